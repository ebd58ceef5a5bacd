"""The billing read's rate and its failures (rpp/observe/billing.py, rpp/observe/shared.py).

Due when the pools' oldest status.spend.readAt is 10 minutes old (or a pool has none), so
a restarted process reads when the last one would have; at most one listPodBilling call
per client in 10 minutes whatever the status says, counted in the RunPod calls metric.
Loops in between carry no reading. A failed read is a reading with the error and no
records, is not retried before 10 minutes, and never raises into the loop.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from prometheus_client import CollectorRegistry

from rpp.adapters.clock import ManualClock
from rpp.model.observations import RunPodKeySource
from rpp.model.runpod_operations import RunPodOperation
from rpp.observe.billing import BillingCache, billing_window, oldest_reading
from rpp.observe.shared import read_shared
from rpp.sim import faults
from rpp.sim.cloud import FakeCloud
from tests.fixtures_runpod import RTX4090, client_for, stocked_cloud

T0 = dt.datetime(2026, 6, 14, 12, 5, tzinfo=dt.UTC)
KEY = RunPodKeySource(variable="RUNPOD_API_KEY")


def billing_calls(cloud: FakeCloud) -> int:
    return sum(1 for call in cloud.calls if call.operation == RunPodOperation.LIST_POD_BILLING)


def running_cloud() -> tuple[FakeCloud, ManualClock]:
    clock = ManualClock(T0 - dt.timedelta(hours=2))
    cloud = stocked_cloud(clock)
    cloud.add_pod(name="rpp-a-1", image="i", gpu_type=RTX4090, datacenter="EU-RO-1")
    clock.set(T0)
    return cloud, clock


def stored(read_at: dt.datetime | None) -> dict[str, Any]:
    """A pool as the API server returns it, with status.spend read at `read_at`."""
    spend = {} if read_at is None else {"spend": {"readAt": read_at.isoformat()}}
    return {"metadata": {"name": "web"}, "status": spend}


async def test_loops_every_30s_call_runpods_billing_once_per_10_minutes_and_count_it() -> None:
    cloud, clock = running_cloud()
    cache, registry = BillingCache(), CollectorRegistry()
    last_read = None  # as the pools' status would hold it
    async with client_for(cloud, registry=registry) as client:
        for _ in range(40):  # 20 minutes of loops
            reading = await cache.read(client, clock.now(), last_read=last_read)
            if reading is not None:
                assert reading.records
                assert reading.read_at == clock.now()
                last_read = reading.read_at
            clock.advance(30)
    assert billing_calls(cloud) == 2
    counted = registry.get_sample_value(
        "runpod_pool_runpod_api_calls_total", {"operation": "listPodBilling", "outcome": "ok"}
    )
    assert counted == 2


async def test_a_restarted_process_reads_when_the_status_says_not_at_once() -> None:
    cloud, clock = running_cloud()
    async with client_for(cloud) as client:
        fresh = BillingCache()  # a new process: it never asked
        recent = T0 - dt.timedelta(minutes=4)
        assert await fresh.read(client, clock.now(), last_read=recent) is None
        clock.advance(6 * 60)
        assert await fresh.read(client, clock.now(), last_read=recent) is not None
    assert billing_calls(cloud) == 1


async def test_a_failed_read_says_why_and_is_not_retried_for_10_minutes() -> None:
    cloud, clock = running_cloud()
    cache = BillingCache()
    cloud.faults.always("listPodBilling", faults.ServerError(status=503))
    async with client_for(cloud) as client:
        failed = await cache.read(client, clock.now(), last_read=None)
        calls = billing_calls(cloud)
        clock.advance(5 * 60)
        assert await cache.read(client, clock.now(), last_read=None) is None
        assert billing_calls(cloud) == calls
        clock.advance(5 * 60)
        assert await cache.read(client, clock.now(), last_read=None) is not None
    assert failed is not None
    assert failed.records == ()
    assert failed.read_at is None
    assert failed.error is not None
    assert "503" in failed.error


async def test_each_client_is_asked_on_its_own() -> None:
    cloud, clock = running_cloud()
    cache = BillingCache()
    async with client_for(cloud) as one, client_for(cloud, api_key="other-key") as two:
        assert await cache.read(one, clock.now(), last_read=None) is not None
        assert await cache.read(two, clock.now(), last_read=None) is not None
        assert await cache.read(one, clock.now(), last_read=None) is None
    assert billing_calls(cloud) == 2


async def test_the_loops_shared_read_adds_the_bill_only_when_due() -> None:
    cloud, clock = running_cloud()
    cache = BillingCache()
    async with client_for(cloud) as client:
        due = await read_shared(
            client, key=KEY, now=clock.now(), billing_for=[stored(None)], billing_cache=cache
        )
        clock.advance(30)
        not_due = await read_shared(
            client, key=KEY, now=clock.now(), billing_for=[stored(T0)], billing_cache=cache
        )
        no_clock = await read_shared(client, key=KEY, billing_cache=cache)
    assert due.billing is not None
    assert due.billing.read_at == T0
    assert not_due.billing is None
    assert no_clock.billing is None
    assert billing_calls(cloud) == 1


def test_the_oldest_reading_of_the_pools_decides_and_a_pool_without_one_makes_it_due() -> None:
    older = T0 - dt.timedelta(minutes=30)
    assert oldest_reading([stored(T0), stored(older)]) == older
    assert oldest_reading([stored(T0), stored(None)]) is None
    assert oldest_reading([{"status": {"spend": {"readAt": "garbage"}}}]) is None


def test_the_window_is_the_month_so_far_to_the_end_of_this_hour() -> None:
    assert billing_window(T0) == (
        dt.datetime(2026, 6, 1, tzinfo=dt.UTC),
        dt.datetime(2026, 6, 14, 13, tzinfo=dt.UTC),
    )
    first_hour = dt.datetime(2026, 7, 1, 0, 20, tzinfo=dt.UTC)
    # The first hour of a month still has a last hour: June's 23:00.
    assert billing_window(first_hour)[0] == dt.datetime(2026, 6, 30, 23, tzinfo=dt.UTC)
