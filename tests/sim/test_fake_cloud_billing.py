"""The fake RunPod's bill (listPodBilling) comes from its own pods' lives: each pod billed
at its price from its create to its terminate, in hour or day buckets, up to now; a
terminated pod stays on the bill for the hours it ran (rpp/sim/cloud_model.py
`pod_bills`, served by rpp/sim/cloud_api.py).
"""

from __future__ import annotations

import datetime as dt

import httpx

from rpp.adapters.clock import ManualClock
from rpp.sim.cloud import FakeCloud
from rpp.sim.cloud_api import CloudApi
from tests.fixtures_runpod import RTX4090, stocked_cloud

T0 = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


def world() -> tuple[FakeCloud, ManualClock, str, str]:
    """Pod "gone" runs 00:30 to 02:15 at $0.69/h, pod "kept" from 01:00 at $1.00/h; now 03:30."""
    clock = ManualClock(T0 + HOUR / 2)
    cloud = stocked_cloud(clock)
    gone = cloud.add_pod(
        name="rpp-a-1", image="i", gpu_type=RTX4090, datacenter="EU-RO-1", booted=False
    )
    clock.set(T0 + HOUR)
    kept = cloud.add_pod(
        name="rpp-a-2",
        image="i",
        gpu_type=RTX4090,
        datacenter="EU-SE-1",
        cost_per_hr=1.0,
        booted=False,
    )
    clock.set(T0 + 2 * HOUR + HOUR / 4)
    cloud.delete_pod(gone.info.pod_id)
    clock.set(T0 + 3 * HOUR + HOUR / 2)
    return cloud, clock, gone.info.pod_id, kept.info.pod_id


async def billing(cloud: FakeCloud, **params: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=CloudApi(cloud))
    async with httpx.AsyncClient(
        transport=transport,
        base_url="https://api.runpod.io",
        headers={"Authorization": "Bearer k"},
    ) as http:
        return await http.get("/v2/billing/pods", params=params)


async def test_each_pod_is_billed_per_hour_for_the_part_of_the_hour_it_ran() -> None:
    cloud, _, gone, kept = world()
    answer = await billing(
        cloud, startTime="2026-06-01T00:00:00Z", endTime="2026-06-01T04:00:00Z", bucketSize="hour"
    )
    assert answer.status_code == 200
    bills = {(r["podId"], r["startTime"]): r["totalAmount"] for r in answer.json()["records"]}
    assert bills == {
        (gone, "2026-06-01T00:00:00Z"): 0.345,  # from 00:30
        (gone, "2026-06-01T01:00:00Z"): 0.69,
        (gone, "2026-06-01T02:00:00Z"): 0.1725,  # terminated at 02:15, still on the bill
        (kept, "2026-06-01T01:00:00Z"): 1.0,
        (kept, "2026-06-01T02:00:00Z"): 1.0,
        (kept, "2026-06-01T03:00:00Z"): 0.5,  # the hour running now: up to now
    }
    metadata = answer.json()["metadata"]
    assert metadata["totals"]["totalAmount"] == 3.7075
    assert (metadata["recordCount"], metadata["uniquePodCount"]) == (6, 2)


async def test_day_buckets_and_a_pod_filter_sum_the_same_lives() -> None:
    cloud, _, gone, _ = world()
    answer = await billing(cloud, bucketSize="day", podId=gone, startTime="2026-06-01T01:00:00Z")
    (only,) = answer.json()["records"]
    assert (only["podId"], only["startTime"], only["endTime"]) == (
        gone,
        "2026-06-01T00:00:00Z",  # snapped down to its day
        "2026-06-02T00:00:00Z",
    )
    assert only["totalAmount"] == 1.2075


async def test_a_window_before_any_pod_or_in_the_future_bills_nothing() -> None:
    cloud, _, _, _ = world()
    before = await billing(cloud, startTime="2026-05-01T00:00:00Z", endTime="2026-05-02T00:00:00Z")
    after = await billing(cloud, startTime="2026-06-02T00:00:00Z", endTime="2026-06-03T00:00:00Z")
    assert before.json()["records"] == after.json()["records"] == []


async def test_what_the_fake_does_not_bill_by_is_refused_as_runpod_refuses() -> None:
    cloud, _, _, _ = world()
    assert (await billing(cloud, bucketSize="week")).status_code == 400
    assert (await billing(cloud, bucketSize="fortnight")).status_code == 422
    assert (await billing(cloud, lastN="3")).status_code == 400
    assert (await billing(cloud, startTime="soon")).status_code == 422
