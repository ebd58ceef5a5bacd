"""Stories of PoolWideDegradation's bounds: what it holds, and for how long.

A pool-wide hold keeps every pod while a shared cause (RunPod, the network) degrades
them all. It must not hold independent failures together, and it must end: after
`health.poolWideHold` (30m by default) the worst pod is replaced, and once that
replacement passes its probes the hold ends for every pod.
"""

from __future__ import annotations

from rpp.model.status import PoolStatus
from tests.stories.prom_stub import PromStub
from tests.stories.test_replacement import healthy_pool, latency_pool, ready_pods
from tests.stories.world_kit import Story, story


def replaced(status: PoolStatus, pods: set[str]) -> bool:
    """None of `pods` serves any more, and the pool has its pods Ready from new ones."""
    return not pods & ready_pods(status) and len(ready_pods(status)) == status.desired


def being_replaced(status: PoolStatus, pod: str) -> bool:
    """The pod is on its way out: terminated (first), or its replacement is made."""
    member = status.member(pod)
    return member is None or member.phase in ("Terminating", "Gone") or bool(member.replaced_by)


def test_whole_pool_dead_without_stock_is_replaced_after_the_hold_once_stock_returns() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        dead = ready_pods(before)
        s.out_of_stock()
        for pod in dead:
            s.world.pods[pod].die()
        died = s.clock.now()
        await s.loops(20)  # 10 minutes: Unreachable is due, but the hold holds
        held = s.status()
        cond = held.condition("PoolWideDegradation")
        assert cond is not None
        assert cond.status == "True"
        assert "health.poolWideHold" in cond.message
        ready = held.condition("Ready")
        assert ready is not None
        assert (ready.status, ready.reason) == ("False", "PoolWideDegradation")
        reconciling = held.condition("Reconciling")
        assert reconciling is not None
        assert (reconciling.status, reconciling.reason) == ("True", "PoolWideDegradation")
        await s.until(lambda st: (s.clock.now() - died).total_seconds() >= 7200, limit=300)
        s.restock()
        final = await s.until(lambda st: replaced(st, dead), limit=40)  # by 2h20m, not never
        assert (s.clock.now() - died).total_seconds() < 2 * 3600 + 20 * 60
        after = final.condition("PoolWideDegradation")
        assert after is not None
        assert after.status == "False"

    story(body)


def test_errors_on_one_pod_and_another_dying_minutes_later_are_not_lumped_together() -> None:
    prom = PromStub(per_pod={"app_request_duration_seconds": {}, "app_requests_failed": {}})

    async def body(s: Story) -> None:
        status = await s.until(lambda st: st.ready == 2, limit=30)
        erring, dying = sorted(ready_pods(status))
        prom.per_pod["app_request_duration_seconds"] = {erring: 0.5, dying: 0.5}
        prom.per_pod["app_requests_failed"] = {erring: 0.3, dying: 0.0}
        await s.loops(6)  # 3 minutes
        s.world.pods[dying].die()
        died = s.clock.now()
        await s.until(lambda st: dying not in s.wired().values(), limit=10)
        assert (s.clock.now() - died).total_seconds() <= 120
        await s.until(lambda st: being_replaced(st, dying), limit=12)
        assert (s.clock.now() - died).total_seconds() <= 360
        assert dying not in s.wired().values()
        lumped = [
            r.status
            for r in s.results
            if r.status is not None
            and (c := r.status.condition("PoolWideDegradation")) is not None
            and c.status == "True"
        ]
        assert lumped == [], "a breach 3 minutes after another's, of another rule"

    story(body, manifest=latency_pool(2, creates_per_hour=6), prometheus=prom)


def test_the_hold_ends_by_replacing_the_worst_pod_first_with_an_event() -> None:
    prom = PromStub(per_pod={"app_request_duration_seconds": {}, "app_requests_failed": {}})

    async def body(s: Story) -> None:
        status = await s.until(lambda st: st.ready == 2, limit=30)
        pods = sorted(ready_pods(status))
        worst = pods[-1]  # not the first by name: chosen for being worst
        for pod in pods:
            s.world.pods[pod].slow(3.0)  # SlowScrape on every pod at once: alike, together
        prom.per_pod["app_request_duration_seconds"] = dict.fromkeys(pods, 0.5)
        prom.per_pod["app_requests_failed"] = {**dict.fromkeys(pods, 0.0), worst: 0.5}
        start = s.clock.now()
        first = await s.until(lambda st: bool(s.effects("create")[2:]), limit=80)
        assert (s.clock.now() - start).total_seconds() >= 1800 - 60  # health.poolWideHold
        assert [e.replacement_for for e in s.effects("create")[2:]] == [worst]
        others = [first.member(p) for p in pods if p != worst]
        assert all(m is not None and m.phase == "Ready" for m in others), "only the worst"
        events = [e for e in s.effects("event") if e.reason == "PoolWideHoldExpired"]
        assert len(events) == 1
        assert worst in events[0].message
        final = await s.until(lambda st: replaced(st, set(pods)), limit=80)
        cond = final.condition("PoolWideDegradation")
        assert cond is not None
        assert cond.status == "False"
        assert len([e for e in s.effects("event") if e.reason == "PoolWideHoldExpired"]) == 1

    story(body, manifest=latency_pool(2, creates_per_hour=6), prometheus=prom)
