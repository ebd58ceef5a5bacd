"""RunPod's pod billing (listPodBilling) read by the client: the answer parsed strictly
(rpp/adapters/runpod/billing.py), the call made through the client's one request path
(classified errors, the call counter labelled listPodBilling).

Strict, unlike the pod listing: a bill with one record skipped would read low and look
right, so a record that is not RunPod's shape fails the whole answer, naming the record.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from rpp.adapters.clock import ManualClock
from rpp.adapters.runpod import answers
from rpp.adapters.runpod.billing import billing_from_json, billing_query
from rpp.adapters.runpod.reading import WireError
from rpp.model.observations import BillingRecord
from rpp.sim import faults
from tests.fixtures_runpod import RTX4090, client_for, stocked_cloud

T0 = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)


def record(**changes: Any) -> dict[str, Any]:
    good = {
        "startTime": "2026-06-01T00:00:00Z",
        "endTime": "2026-06-01T01:00:00Z",
        "podId": "7h9k2m4n6p",
        "totalAmount": 0.69,
        "gpuAmount": 0.69,
        "cpuAmount": 0,
        "diskAmount": 0,
    }
    return {k: v for k, v in {**good, **changes}.items() if v is not ...}


def answer(*records: Any) -> dict[str, Any]:
    return {"records": list(records), "metadata": {"recordCount": len(records)}}


def test_each_record_reads_as_the_pods_amount_in_its_bucket() -> None:
    parsed = billing_from_json(answer(record(), record(podId="other", totalAmount=2)))
    assert parsed == (
        BillingRecord("7h9k2m4n6p", T0, T0 + dt.timedelta(hours=1), 0.69),
        BillingRecord("other", T0, T0 + dt.timedelta(hours=1), 2.0),
    )


def test_an_answer_without_records_is_an_empty_bill() -> None:
    assert billing_from_json(answer()) == ()


@pytest.mark.parametrize(
    ("odd", "named"),
    [
        ([], "not an object"),
        ({"metadata": {}}, "records is"),
        ({"records": {"podId": "x"}}, "records is an object"),
        (answer(record(), "x"), r"records\[1\] is"),
        (answer(record(podId=...)), r"records\[0\]\.podId"),
        (answer(record(podId="  ")), r"records\[0\]\.podId"),
        (answer(record(totalAmount="0.69")), r"records\[0\]\.totalAmount"),
        (answer(record(totalAmount=-1)), r"records\[0\]\.totalAmount"),
        (answer(record(totalAmount=True)), r"records\[0\]\.totalAmount"),
        (answer(record(totalAmount=...)), r"records\[0\]\.totalAmount"),
        (answer(record(startTime="yesterday")), r"records\[0\]\.startTime"),
        (answer(record(endTime="2026-06-01T01:00:00")), r"records\[0\]\.endTime"),
        (answer(record(endTime="2026-05-31T23:00:00Z")), r"records\[0\]: its bucket ends"),
    ],
)
def test_an_odd_answer_fails_whole_naming_the_record_and_field(odd: Any, named: str) -> None:
    with pytest.raises(WireError, match=named):
        billing_from_json(odd)


def test_the_query_asks_for_hourly_buckets_in_utc() -> None:
    plus_two = dt.timezone(dt.timedelta(hours=2))
    query = billing_query(
        start=dt.datetime(2026, 6, 1, 2, tzinfo=plus_two), end=T0 + dt.timedelta(hours=3)
    )
    assert query == {
        "startTime": "2026-06-01T00:00:00Z",
        "endTime": "2026-06-01T03:00:00Z",
        "bucketSize": "hour",
    }


async def test_the_client_reads_the_fakes_bill_and_counts_the_call() -> None:
    clock = ManualClock(T0)
    cloud = stocked_cloud(clock)
    pod = cloud.add_pod(name="rpp-x-1", image="img:1", gpu_type=RTX4090, datacenter="EU-RO-1")
    clock.advance(90 * 60)
    registry = CollectorRegistry()
    async with client_for(cloud, registry=registry) as client:
        bill = await client.pod_billing(start=T0, end=T0 + dt.timedelta(hours=2))
    assert [(r.pod_id, r.start, r.amount) for r in bill] == [
        (pod.info.pod_id, T0, 0.69),
        (pod.info.pod_id, T0 + dt.timedelta(hours=1), 0.345),  # half the hour running now
    ]
    calls = registry.get_sample_value(
        "runpod_pool_runpod_api_calls_total", {"operation": "listPodBilling", "outcome": "ok"}
    )
    assert calls == 1


async def test_an_odd_bill_from_runpod_is_a_bad_response_not_a_crash() -> None:
    clock = ManualClock(T0)
    cloud = stocked_cloud(clock)
    cloud.add_pod(name="rpp-x-1", image="img:1", gpu_type=RTX4090, datacenter="EU-RO-1")
    clock.advance(3600)
    cloud.faults.next("listPodBilling", faults.RawAnswer(body='{"records": 3}'))
    async with client_for(cloud) as client:
        with pytest.raises(answers.BadResponse, match="records is"):
            await client.pod_billing(start=T0, end=T0 + dt.timedelta(hours=1))
