"""No deadlock when a flagged pod's surge replacement is blocked (finding 4).

A dead pod whose replacement cannot be created first (maxPods, the cost cap, no
datacenter room, no stock) used to stay Flagged for hours: billing, serving nothing,
keeping the pool short and stopping scale-down and image rolls. Now a flagged pod that
serves nothing is terminated first, with an Event saying why, and the pool creates its
replacement for size. A flagged pod that still serves is never terminated without its
replacement: it serves on, and CreateBlocked says what blocks it.
"""

from __future__ import annotations

from typing import Any

from rpp.model.durations import parse_duration
from tests.stories.test_replacement import ready_pods
from tests.stories.world_kit import LIMITS, Story, pool_manifest, story


def tight(size: int, **spec: Any) -> dict[str, Any]:
    """A pool of `size` with maxPods `size`: no room for a surge pod."""
    limits = {**LIMITS, "maxPods": size, "maxCreatesPerHour": 6}
    manifest = pool_manifest(
        replicas={"min": size, "max": size}, limits=limits, maxPerDatacenter=2, **spec
    )
    manifest["spec"]["nginx"]["slotPorts"] = size + 1
    return manifest


def pods(s: Story) -> int:
    return len(s.world.cloud.pods)


def test_a_dead_pod_that_cannot_be_surged_is_terminated_first_then_replaced() -> None:
    async def body(s: Story) -> None:
        before = await s.until(lambda st: st.ready == 3, limit=20)
        most = [pods(s)]
        s.world.cloud_listeners.append(lambda _: most.append(pods(s)))
        victim = sorted(ready_pods(before))[0]
        s.world.pods[victim].die()
        final = await s.until(lambda st: st.member(victim) is None and st.ready == 3, limit=30)
        assert max(most) <= 3, "never a fourth pod: maxPods is 3"
        events = [e for e in s.world.kube.events if e["reason"] == "ReplacedTerminateFirst"]
        assert len(events) == 1
        assert victim in events[0]["message"]
        assert "maxPods" in events[0]["message"], "the Event says what blocked the surge"
        terminated = next(h for h in final.history if h.pod == victim and h.action == "terminate")
        created = [h for h in final.history if h.action == "create" and h.time >= terminated.time]
        assert created, "its replacement came after"

    story(body, manifest=tight(3))


def test_a_slow_pod_that_still_serves_is_kept_and_the_condition_says_why() -> None:
    async def body(s: Story) -> None:
        before = await s.until(lambda st: st.ready == 3, limit=20)
        victim = sorted(ready_pods(before))[0]
        s.world.pods[victim].slow(3.0)
        await s.until(
            lambda st: (m := st.member(victim)) is not None and m.phase == "Flagged", limit=40
        )
        later = await s.loops(40)
        assert later.status is not None
        member = later.status.member(victim)
        assert member is not None
        assert member.phase == "Flagged"
        assert member.slot is not None, "it still serves: never terminated without its surge"
        assert victim in s.wired().values()
        blocked = later.status.condition("CreateBlocked")
        assert blocked is not None
        assert blocked.reason == "MaxPodsReached"
        assert f"replace {victim}" in blocked.message

    story(body, manifest=tight(3))


def test_a_dead_pod_with_no_room_then_a_smaller_pool_converges_to_its_size() -> None:
    """The issue's repro: 4/4 with maxPods 4, a pod dies, then min goes to 2."""

    async def body(s: Story) -> None:
        s.world.cloud.set_stock("EU-RO-1", "NVIDIA GeForce RTX 4090", "SECURE", 5)
        before = await s.until(lambda st: st.ready == 4, limit=30)
        victim = sorted(ready_pods(before))[0]
        s.world.pods[victim].die()
        await s.loops(10)
        s.apply(replicas={"min": 2, "max": 2})
        final = await s.until(lambda st: st.ready == 2 and len(st.members) == 2, limit=30)
        assert final.member(victim) is None
        assert not [m for m in final.members if m.phase == "Flagged"]
        assert pods(s) == 2

    story(body, manifest=tight(4))


def test_a_flagged_pod_whose_replacement_never_warms_is_terminated_after_one_warm_up() -> None:
    async def body(s: Story) -> None:
        before = await s.until(lambda st: st.ready == 2, limit=20)
        victim = sorted(ready_pods(before))[0]
        s.new_pods_die()
        s.world.pods[victim].die()
        flagged = await s.until(
            lambda st: (m := st.member(victim)) is not None and m.phase == "Flagged", limit=20
        )
        # Back the loop it is flagged: out of nginx but alive, so not terminated as dead;
        # it waits for its replacement (surge-first), which never warms.
        s.world.pods[victim].recover()
        flagged_at = flagged.member(victim).since  # type: ignore[union-attr]
        await s.until(lambda st: st.member(victim) is None, limit=60)
        events = [e for e in s.world.kube.events if e["reason"] == "FlaggedPodTerminated"]
        assert len(events) == 1
        assert victim in events[0]["message"]
        assert not [e for e in s.world.kube.events if e["reason"] == "DeadPodTerminated"]
        terminated = next(
            h.time for h in s.status().history if h.pod == victim and h.action == "terminate"
        )
        warmup = parse_duration(s.manifest["spec"]["health"]["warmupTimeout"])
        assert warmup <= (terminated - flagged_at).total_seconds() <= warmup + 60

    story(body)
