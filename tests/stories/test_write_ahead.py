"""Crashes and lost writes between a RunPod call and the status write (finding 1).

The controller writes what it is about to do into status before it calls RunPod, and
the next loop settles whatever a stopped loop left written down from RunPod's listing.
Each story kills the controller at one point (rpp/sim/crash_points.py), or loses a
status write, and checks the pool carries on as if nothing happened: one pod per need,
links kept, every create counted toward maxCreatesPerHour.
"""

from __future__ import annotations

from rpp.model.status import PoolStatus
from rpp.sim.crash_points import STATUS_WRITE
from rpp.sim.crossings import KubeFault
from rpp.sim.world import CloudChange
from tests.stories.test_replacement import healthy_pool, ready_pods
from tests.stories.world_kit import LIMITS, Story, pool_manifest, story


def calls(s: Story, operation: str, pod: str | None = None) -> int:
    return sum(
        1
        for c in s.world.cloud.calls
        if c.operation == operation and (pod is None or c.path.endswith(f"/{pod}"))
    )


async def kill_one(s: Story) -> str:
    before = await healthy_pool(s)
    victim = sorted(ready_pods(before))[0]
    s.world.pods[victim].die()
    return victim


async def replaced(s: Story, victim: str) -> PoolStatus:
    return await s.until(lambda st: st.ready == 2 and st.member(victim) is None, limit=60)


def test_a_crash_right_after_a_create_adopts_the_pod_with_its_link_and_counts_it() -> None:
    async def body(s: Story) -> None:
        victim = await kill_one(s)
        s.crash("after", "createPod")
        final = await replaced(s, victim)
        assert s.crashes == 1
        assert calls(s, "createPod") == 3, "two for the pool, one replacement, none twice"
        (replacement,) = [m for m in final.members if m.replacement_for == victim]
        logged = [a for a in final.create_log if a.name == replacement.name]
        assert [(a.outcome, a.replacement_for) for a in logged] == [("adopted", victim)]
        assert final.intents == ()
        settled = [h for h in final.history if h.outcome == "settled"]
        assert any(replacement.pod_id in h.detail for h in settled)

    story(body)


def test_a_crash_before_a_create_is_sent_waits_then_counts_it_and_creates_once() -> None:
    limits = {**LIMITS, "maxCreatesPerHour": 6}

    async def body(s: Story) -> None:
        victim = await kill_one(s)
        s.crash("before", "createPod")
        flagged = await s.until(lambda st: bool(st.pending_creates()), limit=20)
        (intent,) = flagged.pending_creates()
        assert intent.replacement_for == victim
        assert calls(s, "createPod") == 2, "the crash came before the POST"
        waited = await s.until(lambda st: not st.pending_creates(), limit=20)
        (unknown,) = [a for a in waited.create_log if a.name == intent.name]
        assert unknown.outcome == "unknown", "settled as a create of unknown outcome"
        assert (unknown.time - intent.time).total_seconds() >= 300
        await replaced(s, victim)
        assert calls(s, "createPod") == 3

    story(body, manifest=pool_manifest(limits=limits))


def test_crashes_before_creates_still_count_toward_max_creates_per_hour() -> None:
    async def body(s: Story) -> None:  # the stories' budget: 3 creates an hour
        for _ in range(6):  # every create the pool tries dies before it is sent
            s.crash("before", "createPod")
        await s.loops(40)  # 20 minutes
        status = s.status()
        assert calls(s, "createPod") == 0
        assert status.creates_in_last_hour(s.clock.now()) == 3
        blocked = status.condition("CreateBlocked")
        assert blocked is not None
        assert blocked.reason == "CreateRateLimited"
        assert len(s.world.crossings.crashes.armed) == 3, "only three creates were tried"

    story(body)


def lose_the_status_write_after_the_next_create(s: Story, kind: str) -> None:
    """Right before the next createPod is sent (its intent is stored by then), arm the
    fault for the status write that follows it: the one that would record the pod."""

    def arm(operation: str, _request: object) -> None:
        if operation == "createPod" and not s.world.crossings.kube_faults.get(STATUS_WRITE):
            s.world.crossings.fault_next(STATUS_WRITE, KubeFault(kind), times=3)
            s.world.crossings.call_listeners.remove(arm)

    s.world.crossings.call_listeners.append(arm)


def test_a_status_write_lost_to_conflicts_after_a_create_makes_no_second_pod() -> None:
    async def body(s: Story) -> None:
        victim = await kill_one(s)
        lose_the_status_write_after_the_next_create(s, "Conflict")
        final = await replaced(s, victim)
        assert s.world.crossings.kube_faults_struck == 3
        assert calls(s, "createPod") == 3
        (replacement,) = [m for m in final.members if m.replacement_for == victim]
        assert any(a.name == replacement.name for a in final.create_log)

    story(body)


def test_a_status_write_lost_to_another_writer_after_a_create_makes_no_second_pod() -> None:
    async def body(s: Story) -> None:
        victim = await kill_one(s)
        lose_the_status_write_after_the_next_create(s, "OtherWriter")
        final = await replaced(s, victim)
        assert calls(s, "createPod") == 3
        assert any(m.replacement_for == victim for m in final.members)
        assert final.condition("WrittenByAnotherWriter") is not None, "its write was kept"

    story(body)


def when_killed_and_deleted(s: Story) -> tuple[list[float], dict[str, float]]:
    """Record when the controller is killed, and when each pod leaves RunPod."""
    killed: list[float] = []
    deleted: dict[str, float] = {}
    s.world.crossings.crash_listeners.append(lambda _: killed.append(s.clock.loop.time()))

    def heard(change: CloudChange) -> None:
        if change.kind == "deleted" and change.pod_id:
            deleted.setdefault(change.pod_id, s.clock.loop.time())

    s.world.cloud_listeners.append(heard)
    return killed, deleted


def test_a_crash_before_a_terminate_is_sent_sends_it_at_the_next_loop() -> None:
    async def body(s: Story) -> None:
        victim = await kill_one(s)
        killed, deleted = when_killed_and_deleted(s)
        s.crash("before", "deletePod")
        final = await replaced(s, victim)
        assert s.crashes == 1
        assert calls(s, "deletePod", victim) == 1, "sent once: by the controller after the crash"
        # The terminate written down was found unconfirmed and sent again at once, not
        # after the 5 minutes a terminate that went through waits for RunPod.
        assert deleted[victim] - killed[0] < 60
        assert final.intents == ()

    story(body)


def test_a_crash_right_after_a_terminate_is_settled_by_the_listing() -> None:
    async def body(s: Story) -> None:
        victim = await kill_one(s)
        s.crash("after", "deletePod")
        final = await replaced(s, victim)
        assert s.crashes == 1
        assert calls(s, "deletePod", victim) == 1, "RunPod no longer lists it: nothing to resend"
        assert final.intents == ()

    story(body)


NEW_IMAGE = "ghcr.io/example/inference:1.5.0"


def rolled(status: PoolStatus) -> bool:
    return status.ready == 2 and all(m.image == NEW_IMAGE for m in status.members)


def test_a_crash_right_after_an_update_lands_it_once() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        s.apply(image=NEW_IMAGE)
        s.crash("after", "updatePod")
        await s.until(rolled, limit=80)
        assert s.crashes == 1
        assert calls(s, "updatePod") == 2, "one PATCH per pod, none twice"
        assert s.status().intents == ()

    story(body)


def test_a_crash_before_an_update_is_sent_sends_it_again() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        s.apply(image=NEW_IMAGE)
        s.crash("before", "updatePod")
        await s.until(rolled, limit=80)
        assert s.crashes == 1
        assert calls(s, "updatePod") == 2, "the first was never sent; each pod once"
        history = s.status().history
        assert any(h.action == "update" and "sent again" in h.detail for h in history)
        assert not any("roll back" in h.detail for h in history), "no rollback for it"

    story(body)
