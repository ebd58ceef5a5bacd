"""Stories of PrometheusUnavailable: raised when the rules lose their data, not before.

An empty answer while no pod serves is what a healthy Prometheus gives (nothing is
scraped yet), so a pool starting from nothing raises nothing. Once pods serve in nginx,
an empty answer means Prometheus is not scraping them or the query does not match
(NoData). A Prometheus that cannot be queried at all is QueryFailed from the first loop.
"""

from __future__ import annotations

from rpp.model.status import PoolStatus
from tests.stories.prom_stub import PromStub
from tests.stories.test_replacement import latency_pool
from tests.stories.world_kit import Story, story

QUERIED: dict[str, dict[str, float]] = {
    "app_request_duration_seconds": {},
    "app_requests_failed": {},
}


def serving(status: PoolStatus) -> list[str]:
    return sorted(m.pod_id for m in status.members if m.slot is not None)


def test_no_series_before_any_pod_serves_is_not_prometheus_being_unavailable() -> None:
    prom = PromStub(per_pod={k: dict(v) for k, v in QUERIED.items()})

    async def body(s: Story) -> None:
        first_wired = await s.until(lambda st: bool(serving(st)), limit=30)
        # Every loop until a pod served: Prometheus answered "no series" and nothing rose.
        before = [r.status for r in s.results[:-1] if r.status is not None]
        assert before
        assert all(st.condition("PrometheusUnavailable") is None for st in before)
        assert first_wired.condition("PrometheusUnavailable") is None
        assert prom.queries, "the queries were asked all along"

    story(body, manifest=latency_pool(), prometheus=prom)


def test_no_series_for_pods_that_serve_raises_no_data_naming_them() -> None:
    prom = PromStub(per_pod={k: dict(v) for k, v in QUERIED.items()})

    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 3, limit=30)
        status = await s.until(
            lambda st: (
                (c := st.condition("PrometheusUnavailable")) is not None and c.status == "True"
            ),
            limit=3,
        )
        cond = status.condition("PrometheusUnavailable")
        assert cond is not None
        assert cond.reason == "NoData"
        assert "Prometheus answered" in cond.message
        assert all(pod in cond.message for pod in serving(status))
        assert "RelativeLatency" in cond.message
        assert all(m.phase == "Ready" for m in status.members), "nobody is judged on no data"

    story(body, manifest=latency_pool(), prometheus=prom)


def test_prometheus_that_cannot_be_queried_is_query_failed_from_the_first_loop() -> None:
    prom = PromStub(per_pod={k: dict(v) for k, v in QUERIED.items()})
    prom.down = True

    async def body(s: Story) -> None:
        first = await s.loops(1)
        assert first.status is not None
        assert not serving(first.status)
        cond = first.status.condition("PrometheusUnavailable")
        assert cond is not None
        assert (cond.status, cond.reason) == ("True", "QueryFailed")
        assert "HTTP 503" in cond.message

    story(body, manifest=latency_pool(), prometheus=prom)


def test_series_for_the_serving_pods_clear_no_data() -> None:
    prom = PromStub(per_pod={k: dict(v) for k, v in QUERIED.items()})

    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 3, limit=30)
        await s.loops(2)
        pods = serving(s.status())
        prom.per_pod["app_request_duration_seconds"] = dict.fromkeys(pods, 0.5)
        prom.per_pod["app_requests_failed"] = dict.fromkeys(pods, 0.0)
        status = await s.until(
            lambda st: (
                (c := st.condition("PrometheusUnavailable")) is not None and c.status == "False"
            ),
            limit=2,
        )
        assert status.condition("PrometheusUnavailable").reason == "Answered"  # type: ignore[union-attr]

    story(body, manifest=latency_pool(), prometheus=prom)
