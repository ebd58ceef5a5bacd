"""Stories of pods going bad: the pool replaces them surge-first.

Each test reads as the story a platform engineer would tell: what broke, what the
controller did, in which order, and what status says about it.
"""

from __future__ import annotations

from rpp.model.status import PoolStatus
from tests.stories.prom_stub import PromStub
from tests.stories.world_kit import Story, pool_manifest, story


def ready_pods(status: PoolStatus) -> set[str]:
    return {m.pod_id for m in status.members if m.phase == "Ready" and m.slot is not None}


async def healthy_pool(s: Story) -> PoolStatus:
    return await s.until(lambda st: st.ready == 2, limit=20)


def test_pool_starts_from_nothing_to_min_ready_pods_one_create_per_loop() -> None:
    async def body(s: Story) -> None:
        status = await healthy_pool(s)
        creates = s.effects("create")
        assert len(creates) == 2
        assert len(await s.world.controller.runpod.list_pods()) == 2
        loops_with_create = [
            r
            for r in s.results
            if r.decision and any(e.action == "create" for e in r.decision.effects)
        ]
        assert all(
            sum(e.action == "create" for e in r.decision.effects) == 1
            for r in loops_with_create
            if r.decision
        )
        assert set(s.wired().values()) == ready_pods(status)
        assert status.mode == "Manage"
        assert status.cost_per_hour > 0

    story(body)


def test_dead_pod_is_unwired_at_once_replaced_then_terminated() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        victim = sorted(ready_pods(before))[0]
        s.world.pods[victim].die()
        flagged = await s.until(
            lambda st: any(m.pod_id == victim and m.phase == "Flagged" for m in st.members)
        )
        member = flagged.member(victim)
        assert member is not None
        assert member.flagged_rule == "Unreachable"
        assert member.slot is None, "an unreachable pod is unwired at once"
        assert victim not in s.wired().values()
        final = await s.until(lambda st: st.ready == 2 and st.member(victim) is None, limit=60)
        replacement = next(m for m in final.members if m.replacement_for == victim)
        assert replacement.phase == "Ready"
        terminated = [e for e in s.effects("terminate") if e.pod_id == victim]
        assert len(terminated) == 1
        assert victim not in {p.id for p in await s.world.controller.runpod.list_pods()}
        history = [h.action for h in final.history if h.pod == victim]
        assert "terminate" in history

    story(body)


def test_hung_pod_times_out_and_is_replaced_like_a_dead_one() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        victim = sorted(ready_pods(before))[1]
        s.world.pods[victim].hang()
        final = await s.until(lambda st: st.ready == 2 and st.member(victim) is None, limit=60)
        assert any(m.replacement_for == victim for m in final.members)
        flagged = [h for h in final.history if h.pod == victim and "Flagged" in h.outcome]
        assert flagged
        assert "Unreachable" in flagged[0].detail

    story(body)


def test_the_last_wired_pod_leaves_nginx_once_dead_and_stops_billing_without_stock() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        first, second = sorted(ready_pods(before))
        s.out_of_stock()  # no replacement can come: `second` is the last wired pod
        s.world.pods[first].die()
        await s.until(lambda st: (m := st.member(first)) is None or m.phase != "Ready")
        s.world.pods[second].die()
        await s.loops(2)
        assert s.wired() == {}, "RunPod's list reads: a dead pod is dead for nginx too"
        final = await s.until(lambda st: not st.members, limit=20)
        assert final.ready == 0
        assert not s.world.cloud.pods, "both dead pods terminated first, none billing"
        moves = [h for h in final.history if h.pod == first and h.action == "transition"]
        flagged, terminated = (
            next(h for h in moves if h.outcome == f"{source} -> {target}")
            for source, target in (("Ready (quarantined)", "Flagged"), ("Flagged", "Terminating"))
        )
        assert moves.index(terminated) == moves.index(flagged) + 1
        assert (terminated.time - flagged.time).total_seconds() <= 60, "the next loop"
        reasons = {
            pod: [e["reason"] for e in s.world.kube.events if pod in e["message"]]
            for pod in (first, second)
        }
        assert "DeadPodTerminated" in reasons[first], "dead and out of nginx: terminated"
        assert "ReplacedTerminateFirst" not in reasons[first]
        assert "ReplacedTerminateFirst" in reasons[second], "no stock: terminated first"

    story(body)


def test_slow_host_keeps_serving_until_its_replacement_is_wired() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        victim = sorted(ready_pods(before))[0]
        s.world.pods[victim].slow(3.0)  # every answer, /metrics included: SlowScrape
        flagged = await s.until(
            lambda st: (m := st.member(victim)) is not None and m.phase == "Flagged", limit=40
        )
        member = flagged.member(victim)
        assert member is not None
        assert member.flagged_rule == "SlowScrape"
        assert member.slot is not None, "a slow pod keeps serving until its replacement is wired"
        breach = member.breaches["SlowScrape"]
        flagged_at = next(
            h.time for h in flagged.history if h.pod == victim and "Flagged" in h.outcome
        )
        assert (flagged_at - breach).total_seconds() >= 600
        draining = await s.until(
            lambda st: (m := st.member(victim)) is not None and m.phase == "Draining", limit=40
        )
        replacement = next(m for m in draining.members if m.replacement_for == victim)
        assert replacement.phase == "Ready"
        assert replacement.slot is not None
        assert draining.member(victim).slot is None  # type: ignore[union-attr]

    story(body)


def latency_pool(replicas: int = 3, *, creates_per_hour: int = 5) -> dict[str, object]:
    """A pool whose health rules read Prometheus (latency and error ratio per pod)."""
    manifest = pool_manifest(
        replicas={"min": replicas, "max": replicas},
        limits={
            "maxPods": replicas + 2,
            "maxHourlyCostUsd": 10.0,
            "maxCreatesPerHour": creates_per_hour,
            "estimatedPodCostUsd": 0.7,
        },
    )
    manifest["spec"]["prometheus"] = {
        "job": "inference-pods",
        "latencyQuery": "sum by (runpod_pod) (rate(app_request_duration_seconds_sum[5m]))",
        "errorRatioQuery": "sum by (runpod_pod) (rate(app_requests_failed_total[5m]))",
    }
    return manifest


def test_host_slower_than_its_peers_is_flagged_by_relative_latency() -> None:
    prom = PromStub(per_pod={"app_request_duration_seconds": {}, "app_requests_failed": {}})

    async def body(s: Story) -> None:
        status = await s.until(lambda st: st.ready == 3, limit=30)
        pods = sorted(ready_pods(status))
        slow, others = pods[0], pods[1:]
        prom.per_pod["app_request_duration_seconds"] = {slow: 2.1, **dict.fromkeys(others, 0.5)}
        prom.per_pod["app_requests_failed"] = dict.fromkeys(pods, 0.0)
        flagged = await s.until(
            lambda st: (m := st.member(slow)) is not None and m.phase == "Flagged", limit=40
        )
        member = flagged.member(slow)
        assert member is not None
        assert member.flagged_rule == "RelativeLatency"
        assert member.slot is not None, "it keeps serving until its replacement is wired"
        assert all(flagged.member(p).phase == "Ready" for p in others)  # type: ignore[union-attr]
        cond = flagged.condition("PrometheusUnavailable")
        assert cond is None or cond.status == "False"

    story(body, manifest=latency_pool(), prometheus=prom)


def test_pod_answering_5xx_is_flagged_by_error_rate() -> None:
    prom = PromStub(per_pod={"app_request_duration_seconds": {}, "app_requests_failed": {}})

    async def body(s: Story) -> None:
        status = await s.until(lambda st: st.ready == 3, limit=30)
        pods = sorted(ready_pods(status))
        prom.per_pod["app_request_duration_seconds"] = dict.fromkeys(pods, 0.5)
        prom.per_pod["app_requests_failed"] = {pods[1]: 0.2, pods[0]: 0.0, pods[2]: 0.01}
        flagged = await s.until(
            lambda st: (m := st.member(pods[1])) is not None and m.phase == "Flagged", limit=20
        )
        assert flagged.member(pods[1]).flagged_rule == "ErrorRate"  # type: ignore[union-attr]
        breach = flagged.member(pods[1]).breaches["ErrorRate"]  # type: ignore[union-attr]
        assert (s.clock.now() - breach).total_seconds() >= 300 - 30

    story(body, manifest=latency_pool(), prometheus=prom)


def test_prometheus_without_series_for_serving_pods_turns_its_rules_off_and_flags_nobody() -> None:
    prom = PromStub(per_pod={"app_request_duration_seconds": {}, "app_requests_failed": {}})

    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 3, limit=30)
        await s.loops(30)
        status = s.status()
        cond = status.condition("PrometheusUnavailable")
        assert cond is not None
        assert (cond.status, cond.reason) == ("True", "NoData")
        assert "latencyQuery" in cond.message
        assert "RelativeLatency" in cond.message
        assert all(m.phase == "Ready" for m in status.members)

    story(body, manifest=latency_pool(), prometheus=prom)


def test_a_created_pod_costs_from_the_loop_that_created_it() -> None:
    async def body(s: Story) -> None:
        first = await s.loops(1)
        (created,) = [r for r in first.results if r.result == "created"]
        assert created.pod is not None
        assert created.pod.cost_per_hr > 0
        assert first.status is not None
        assert first.status.cost_per_hour == created.pod.cost_per_hr  # not $0/h until next loop
        second = await s.loops(1)
        assert second.status is not None
        listed = await s.world.controller.runpod.list_pods()
        assert len(listed) == 2  # the first pod, and the one this loop created
        assert second.status.cost_per_hour == round(sum(p.cost_per_hr for p in listed), 4)

    story(body)
