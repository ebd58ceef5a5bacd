"""A dead pod is never kept for a rule's sake; a serving one kept is said aloud (issue 25).

The rules that keep the controller from over-acting ("never unwire the last wired pod",
PoolWideDegradation, the caps) each had a case where a dead pod stayed wired and billed
for good: the only pod of a pool at `maxPods: 1` died and stayed Flagged, in nginx and
billing, READY 0/1. Now a pod the controller cannot reach, while RunPod's API answers,
leaves nginx; a dead flagged pod whose replacement a cap blocks is terminated first and
replaced as soon as the cap allows; and a flagged pod that still serves is kept (the
default) with ReplacementBlocked naming the cap, or terminated first when
health.whenReplacementBlocked says TerminateFirst.
"""

from __future__ import annotations

from typing import Any

from rpp.model.status import PoolStatus
from tests.stories.test_replacement import healthy_pool, ready_pods
from tests.stories.world_kit import LIMITS, Story, pool_manifest, story

UNREACHABLE_S = 120.0  # health.replaceWhen.unreachable.duration's default


def one_pod(**limits: Any) -> dict[str, Any]:
    """A pool of one pod; `limits` change the stories' budget."""
    return pool_manifest(replicas={"min": 1, "max": 1}, limits={**LIMITS, **limits})


def tight(size: int, **health: Any) -> dict[str, Any]:
    """A pool of `size` with maxPods `size`: no room for a surge pod."""
    manifest = pool_manifest(
        replicas={"min": size, "max": size},
        limits={**LIMITS, "maxPods": size, "maxCreatesPerHour": 6},
        maxPerDatacenter=2,
    )
    manifest["spec"]["nginx"]["slotPorts"] = size + 1
    manifest["spec"]["health"] = {**manifest["spec"].get("health", {}), **health}
    return manifest


async def dead_last_pod_is_replaced(s: Story, *, cap: str) -> PoolStatus:
    """The only pod dies: out of nginx within a minute, terminated first within a few
    (the Unreachable rule's duration), with an Event naming `cap`; a new pod serves."""
    before = await s.until(lambda st: st.ready == 1, limit=20)
    (dead,) = ready_pods(before)
    s.world.pods[dead].die()
    died = s.clock.now()
    await s.until(lambda st: dead not in s.wired().values(), limit=4)
    assert (s.clock.now() - died).total_seconds() <= 60, "a dead pod leaves nginx in 60 s"
    await s.until(lambda st: dead not in s.world.cloud.pods, limit=12)
    billed = (s.clock.now() - died).total_seconds()
    assert billed <= UNREACHABLE_S + 90, f"the dead pod billed {billed:g}s"
    events = [e for e in s.world.kube.events if e["reason"] == "ReplacedTerminateFirst"]
    assert len(events) == 1
    assert dead in events[0]["message"]
    assert cap in events[0]["message"], "the Event names the cap that forced the order"
    assert events[0]["message"].count(cap) == 1, "one reason, said once"
    return await s.until(lambda st: st.ready == 1 and st.member(dead) is None, limit=200)


def test_dead_last_pod_is_terminated_first_when_max_pods_is_full() -> None:
    async def body(s: Story) -> None:
        final = await dead_last_pod_is_replaced(s, cap="MaxPodsReached")
        assert len(s.world.cloud.pods) == 1
        assert [m.phase for m in final.members] == ["Ready"]

    story(body, manifest=one_pod(maxPods=1))


def test_dead_last_pod_is_terminated_first_when_the_cost_cap_fits_one_pod() -> None:
    async def body(s: Story) -> None:
        await dead_last_pod_is_replaced(s, cap="CostCapReached")

    story(body, manifest=one_pod(maxHourlyCostUsd=1.0))


def test_dead_last_pod_is_terminated_first_when_creates_per_hour_are_used_up() -> None:
    async def body(s: Story) -> None:
        final = await dead_last_pod_is_replaced(s, cap="CreateRateLimited")
        creates = [h.time for h in final.history if h.action == "create"]
        assert (creates[-1] - creates[0]).total_seconds() >= 3600, "one create an hour"

    story(body, manifest=one_pod(maxCreatesPerHour=1))


def test_dead_pods_leave_nginx_while_pool_wide_degradation_holds() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        dead = ready_pods(before)
        for pod in dead:
            s.world.pods[pod].die()
        died = s.clock.now()
        await s.until(lambda st: not s.wired(), limit=4)
        assert (s.clock.now() - died).total_seconds() <= 60
        held = await s.loops(10)
        assert held.status is not None
        cond = held.status.condition("PoolWideDegradation")
        assert cond is not None
        assert cond.status == "True", "the hold still holds the replacements"
        assert len(s.effects("create")) == 2, "no replacement created while it holds"
        assert not s.wired()

    story(body)


def test_ready_is_false_when_no_wired_pod_passes() -> None:
    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 1, limit=20)
        (only,) = s.wired().values()
        s.world.pods[only].die()
        for _ in range(6):
            result = await s.loops(1)
            assert result.status is not None
            ready = result.status.condition("Ready")
            assert ready is not None
            passing = [
                m
                for m in result.status.members
                if m.slot is not None and m.last_probe is not None and m.last_probe.passed
            ]
            if not passing:
                assert ready.status == "False", "Ready while no wired pod passes its probes"

    story(body, manifest=one_pod(maxPods=1))


def test_flagged_serving_pod_is_kept_and_the_blocking_cap_is_named() -> None:
    async def body(s: Story) -> None:
        before = await s.until(lambda st: st.ready == 3, limit=20)
        slow = sorted(ready_pods(before))[0]
        s.world.pods[slow].slow(8.0)
        flagged = await s.until(
            lambda st: (m := st.member(slow)) is not None and m.phase == "Flagged", limit=40
        )
        later = await s.loops(20)
        assert later.status is not None
        member = later.status.member(slow)
        assert member is not None
        assert (member.phase, member.wired) == ("Flagged", True), "Keep: it serves on"
        cond = later.status.condition("ReplacementBlocked")
        assert cond is not None
        assert (cond.status, cond.reason) == ("True", "MaxPodsReached")
        for said in (slow, "SlowScrape", "limits.maxPods", "TerminateFirst"):
            assert said in cond.message, said
        raised = [e for e in s.world.kube.events if e["reason"] == "ReplacementBlocked"]
        assert len(raised) == 1, "raised once, not every loop"
        assert flagged.member(slow) is not None

    story(body, manifest=tight(3))


def test_terminate_first_choice_replaces_a_serving_flagged_pod_under_a_full_cap() -> None:
    async def body(s: Story) -> None:
        before = await s.until(lambda st: st.ready == 3, limit=20)
        most = [len(s.world.cloud.pods)]
        s.world.cloud_listeners.append(lambda _: most.append(len(s.world.cloud.pods)))
        slow = sorted(ready_pods(before))[0]
        s.world.pods[slow].slow(8.0)
        final = await s.until(lambda st: st.member(slow) is None and st.ready == 3, limit=60)
        assert max(most) <= 3, "never a fourth pod: maxPods is 3"
        released = [e for e in s.world.kube.events if e["reason"] == "FlaggedPodReleased"]
        assert len(released) == 1
        assert slow in released[0]["message"]
        assert "TerminateFirst" in released[0]["message"]
        assert "MaxPodsReached" in released[0]["message"]
        terminated = next(h for h in final.history if h.pod == slow and h.action == "terminate")
        created = [h for h in final.history if h.action == "create" and h.time >= terminated.time]
        assert created, "its replacement came after"
        kept = [e for e in s.world.kube.events if e["reason"] == "ReplacementBlocked"]
        assert kept == [], "TerminateFirst keeps nothing"

    story(body, manifest=tight(3, whenReplacementBlocked="TerminateFirst"))
