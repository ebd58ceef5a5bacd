"""Stories of a status-write storm: every write of the pool's status is refused.

The controller keeps the status it could not write in memory and decides from it
(rpp/controller/status_carry.py), so dead pods still leave nginx and are terminated;
creates wait for their write-ahead; StatusWriteFailing reaches the stored status with
the first write that lands (rpp/decide/ledger/write_failures.py).
"""

from __future__ import annotations

from rpp.model.status import PoolStatus
from rpp.sim.crash_points import STATUS_WRITE
from rpp.sim.crossings import KubeFault
from tests.stories.test_replacement import healthy_pool, ready_pods
from tests.stories.world_kit import Story, story

STORM = 100_000  # writes: longer than any story here


def storm(s: Story) -> None:
    s.world.crossings.fault_next(STATUS_WRITE, KubeFault("Conflict"), times=STORM)


def calm(s: Story) -> None:
    s.world.crossings.kube_faults.pop(STATUS_WRITE, None)


def creates(s: Story) -> int:
    return sum(1 for c in s.world.cloud.calls if c.operation == "createPod")


def failing(status: PoolStatus) -> str | None:
    cond = status.condition("StatusWriteFailing")
    return cond.message if cond is not None and cond.status == "True" else None


def test_dead_pods_leave_nginx_and_are_terminated_during_a_status_write_storm() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        storm(s)
        await s.loops(2)
        dead = sorted(ready_pods(before))[0]
        s.world.pods[dead].die()
        died = s.clock.now()
        unwired = None
        for _ in range(20):  # 10 minutes
            await s.loops(1)
            if unwired is None and dead not in s.wired().values():
                unwired = (s.clock.now() - died).total_seconds()
            if dead not in s.world.cloud.pods:
                break
        assert unwired is not None
        assert unwired <= 60
        assert dead not in s.world.cloud.pods, "the dead pod is terminated in the storm"
        assert (s.clock.now() - died).total_seconds() <= 5 * 60
        assert dead not in s.wired().values(), "and never wired again"
        stale = s.status().member(dead)  # nothing landed: all of it was decided in memory
        assert stale is not None
        assert (stale.phase, stale.slot is not None) == ("Ready", True)

    story(body)


def test_creates_wait_for_their_write_ahead_during_a_status_write_storm() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        made = creates(s)
        storm(s)
        dead = sorted(ready_pods(before))[0]
        s.world.pods[dead].die()
        await s.loops(20)
        assert creates(s) == made, "no create without its intent stored"
        blocked = s.results[-1].status
        assert blocked is not None
        cond = blocked.condition("CreateBlocked")
        assert cond is not None
        assert (cond.status, cond.reason) == ("True", "StatusWriteFailing")
        calm(s)
        final = await s.until(lambda st: st.ready == 2 and st.member(dead) is None, limit=20)
        assert creates(s) == made + 1
        assert final.intents == ()

    story(body)


def test_status_write_failing_is_reported_once_a_write_lands() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        storm(s)
        await s.loops(10)
        assert failing(s.status()) is None, "nothing landed during the storm"
        calm(s)
        await s.loops(1)
        landed = failing(s.status())
        assert landed is not None, "the first write that lands carries it"
        assert "409 Conflict" in landed
        assert "write(s) of this pool's status failed since" in landed
        events = [e for e in s.effects("event") if e.reason == "StatusWriteFailing"]
        assert len(events) == 1, "one Event when writes start failing, not one per loop"
        await s.loops(1)
        cond = s.status().condition("StatusWriteFailing")
        assert cond is not None
        assert (cond.status, cond.reason) == ("False", "StatusWritesLand")

    story(body)


def test_a_status_someone_else_wrote_during_the_storm_wins_over_the_carried_one() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        storm(s)
        dead = sorted(ready_pods(before))[0]
        s.world.pods[dead].die()
        await s.loops(2)  # quarantined: carried in memory, not stored
        stored = s.world.kube.pool(s.name)["status"]
        other = {
            "type": "WrittenByHand",
            "status": "True",
            "reason": "Edit",
            "message": "someone else wrote this status",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        await s.set_status({**stored, "conditions": [*stored["conditions"], other]})
        calm(s)
        await s.loops(1)
        assert s.status().condition("WrittenByHand") is not None, "decided from theirs"

    story(body)
