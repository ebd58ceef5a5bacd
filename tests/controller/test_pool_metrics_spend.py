"""runpod_pool_spend_usd_total (rpp/controller/pool_metrics.py): a counter of the USD
RunPod billed a pool's pods, growing by what each new billing reading in status.spend
adds. The first reading a process sees is its baseline (a restart does not count the
month again); a new month counts from its own first dollar; a reading revised down
adds nothing; a deleted pool's series goes.
"""

from __future__ import annotations

import datetime as dt

from prometheus_client import CollectorRegistry

from rpp.controller.pool_metrics import PoolMetrics
from rpp.model.status import PoolStatus, Spend

T0 = dt.datetime(2026, 6, 30, 23, 0, tzinfo=dt.UTC)
TEN = dt.timedelta(minutes=10)
NAME = "runpod_pool_spend_usd_total"
WEB = ("team-a", "web")


def reading(this_month: float, at: dt.datetime) -> PoolStatus:
    return PoolStatus(spend=Spend(this_month=this_month, today=this_month, read_at=at))


def counted(registry: CollectorRegistry, pool: tuple[str, str] = WEB) -> float | None:
    namespace, name = pool
    return registry.get_sample_value(NAME, {"pool_namespace": namespace, "pool": name})


def test_each_new_reading_adds_what_was_billed_since_the_last() -> None:
    registry = CollectorRegistry()
    metrics = PoolMetrics(registry)
    metrics.report(WEB, reading(400.0, T0), desired_min=1)
    assert counted(registry) == 0.0  # the baseline: the month so far is not counted again
    metrics.report(WEB, reading(401.5, T0 + TEN), desired_min=1)
    metrics.report(WEB, reading(401.5, T0 + TEN), desired_min=1)  # the same reading again
    metrics.report(WEB, reading(402.0, T0 + 2 * TEN), desired_min=1)
    assert counted(registry) == 2.0


def test_a_new_month_counts_from_its_first_dollar_and_a_revision_down_adds_nothing() -> None:
    registry = CollectorRegistry()
    metrics = PoolMetrics(registry)
    metrics.report(WEB, reading(400.0, T0), desired_min=1)
    metrics.report(WEB, reading(0.75, T0 + 9 * TEN), desired_min=1)  # July 1st, 00:30
    assert counted(registry) == 0.75
    metrics.report(WEB, reading(0.5, T0 + 10 * TEN), desired_min=1)  # RunPod revised it
    assert counted(registry) == 0.75


def test_a_pool_without_a_reading_exports_no_spend_and_a_deleted_pool_loses_it() -> None:
    registry = CollectorRegistry()
    metrics = PoolMetrics(registry)
    metrics.report(WEB, PoolStatus(), desired_min=1)
    assert counted(registry) is None
    metrics.report(WEB, reading(1.0, T0), desired_min=1)
    metrics.forget(WEB)
    assert counted(registry) is None


def test_pools_of_one_name_in_two_namespaces_keep_their_own_series() -> None:
    registry = CollectorRegistry()
    metrics = PoolMetrics(registry)
    other = ("team-b", "web")
    metrics.report(WEB, PoolStatus(ready=2, desired=2), desired_min=2)
    metrics.report(other, PoolStatus(ready=0, desired=1), desired_min=1)
    for pool, metrics_ready in ((WEB, 2.0), (other, 0.0)):
        labels = {"pool_namespace": pool[0], "pool": pool[1]}
        assert registry.get_sample_value("runpod_pool_ready", labels) == metrics_ready
    metrics.forget(other)
    assert (
        registry.get_sample_value("runpod_pool_ready", {"pool_namespace": "team-b", "pool": "web"})
        is None
    )
    assert (
        registry.get_sample_value("runpod_pool_ready", {"pool_namespace": "team-a", "pool": "web"})
        == 2.0
    )
