"""Stories of pods going bad: the pool replaces them surge-first.

Each test reads as the story a platform engineer would tell: what broke, what the
controller did, in which order, and what status says about it.
"""

from __future__ import annotations

from rpp.status import PoolStatus
from tests.stories.world_kit import Story, story


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


def test_the_last_wired_pod_keeps_serving_while_unreachable() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        first, second = sorted(ready_pods(before))
        s.out_of_stock()  # no replacement can come: `second` stays the last wired pod
        s.world.pods[first].die()
        await s.until(lambda st: (m := st.member(first)) is not None and m.slot is None)
        s.world.pods[second].die()
        status = await s.loops(8)
        assert status.status is not None
        second_member = status.status.member(second)
        assert second_member is not None
        assert second_member.slot is not None, "the last wired pod is never unwired"
        assert second in s.wired().values()
        assert list(s.wired().values()) == [second]

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
