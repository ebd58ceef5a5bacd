"""Stories of the autoscaler against HPA-style cases, on one Prometheus value."""

from __future__ import annotations

from typing import Any

from tests.stories.prom_stub import PromStub
from tests.stories.world_kit import Story, pool_manifest, story


def autoscaled(**changes: Any) -> dict[str, Any]:
    autoscaling = {
        "enabled": True,
        "query": 'avg(app_queue_length{job="$job"})',
        "target": 4,
        "scaleUpStabilization": "2m",
        "scaleDownStabilization": "30m",
    } | changes
    return pool_manifest(
        replicas={"min": 2, "max": 4},
        maxPerDatacenter=2,
        autoscaling=autoscaling,
        limits={
            "maxPods": 6,
            "maxHourlyCostUsd": 10.0,
            "maxCreatesPerHour": 10,
            "estimatedPodCostUsd": 0.7,
        },
        nginx={"slotPorts": 5},
    )


def sizes(s: Story) -> list[int]:
    return [r.status.desired for r in s.results if r.status is not None]


def test_a_spike_shorter_than_the_up_window_does_not_scale_up() -> None:
    prom = PromStub(4.0)

    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        prom.value = 12.0  # 3x the target
        await s.loops(3)  # 90 s < 2 m
        prom.value = 4.0
        await s.loops(10)
        assert max(sizes(s)) == 2
        assert len(s.effects("create")) == 2
        assert prom.queries[-1] == 'avg(app_queue_length{job="inference-pods"})'

    story(body, manifest=autoscaled(), prometheus=prom)


def test_sustained_load_grows_to_the_lowest_recommendation_in_the_window() -> None:
    prom = PromStub(4.0)

    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        prom.value = 6.5  # ceil(2 x 6.5 / 4) = 4 ...
        await s.loops(2)
        prom.value = 6.0  # ... then ceil(2 x 6 / 4) = 3: the lowest in the window wins
        grown = await s.until(lambda st: st.desired > 2, limit=10)
        assert grown.desired == 3
        autoscaling = grown.autoscaling
        assert autoscaling is not None
        assert autoscaling.size == 3
        assert autoscaling.value == 6.0
        await s.until(lambda st: st.ready == 3, limit=20)

    story(body, manifest=autoscaled(), prometheus=prom)


def test_value_within_tolerance_changes_nothing() -> None:
    prom = PromStub(4.3)  # 7.5% above target

    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        await s.loops(20)
        assert set(sizes(s)) == {2}

    story(body, manifest=autoscaled(), prometheus=prom)


def test_slow_decline_shrinks_one_pod_at_a_time_after_the_down_window() -> None:
    prom = PromStub(8.0)

    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 4, limit=40)
        prom.value = 0.5
        low_since = s.clock.now()
        shrunk = await s.until(lambda st: st.desired < 4, limit=120)
        assert (s.clock.now() - low_since).total_seconds() >= 30 * 60
        assert shrunk.desired == 2
        in_drain = 0
        for _ in range(60):
            result = await s.loops(1)
            assert result.status is not None
            leaving = [
                m
                for m in result.status.members
                if m.drain_reason == "scale-down" and m.phase in ("Draining", "Terminating")
            ]
            in_drain = max(in_drain, len(leaving))
            if result.status.ready == 2 and len(result.status.members) == 2:
                break
        assert in_drain == 1, "one pod at a time"
        assert s.status().ready == 2

    story(body, manifest=autoscaled(), prometheus=prom)


def test_missing_metric_keeps_the_size_and_says_so() -> None:
    prom = PromStub(8.0)

    async def body(s: Story) -> None:
        await s.until(lambda st: st.desired == 4, limit=40)
        prom.value = None
        await s.loops(80)  # 40 minutes: past the down window
        status = s.status()
        assert status.desired == 4
        cond = status.condition("AutoscalingMetricUnavailable")
        assert cond is not None
        assert cond.status == "True"
        assert "stays at 4" in cond.message

    story(body, manifest=autoscaled(), prometheus=prom)


def test_controller_restarts_keep_both_windows() -> None:
    prom = PromStub(4.0)

    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        prom.value = 8.0
        for _ in range(6):  # restart before every loop: the up window still fills
            await s.world.restart_controller()
            await s.loops(1)
        assert s.status().desired == 4
        await s.until(lambda st: st.ready == 4, limit=30)
        prom.value = 0.5
        low_since = s.clock.now()
        for _ in range(200):
            await s.world.restart_controller()
            await s.loops(1)
            if s.status().desired < 4:
                break
        assert (s.clock.now() - low_since).total_seconds() >= 30 * 60

    story(body, manifest=autoscaled(), prometheus=prom)
