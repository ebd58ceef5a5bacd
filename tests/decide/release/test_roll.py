"""The `roll` step (rpp/decide/release/steps.py): the release's phase as its machine
decides it, the canary and the next pods it drains, why it waits, and UpdateFailed.

Each test builds one loop of the pool "web" asked to run NEW_IMAGE (conftest.py), runs
the step as rpp/decide/pool.py does after the member machines, and reads the release,
the members as planned, the loop's notes and its conditions.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from rpp.decide.state.conditions import Cond
from rpp.model.effects import Unwire
from rpp.model.members import MemberRecord, Phase
from rpp.model.records import Backoff
from rpp.model.rollout_records import Rollout, RolloutPhase, Verdict, VerdictResult
from tests.decide.builders import NOW, member
from tests.decide.release.conftest import (
    NEW_IMAGE,
    OLD_IMAGE,
    release_loop,
    release_spec,
    roll,
    serving,
    updating,
)

PASSED = Verdict(result=VerdictResult.PASSED, message="as good as the old pods")
FAILED = Verdict(result=VerdictResult.FAILED, message="error ratio 0.2 above the old pods'")


def passed_release(**changes: Any) -> Rollout:
    """A release of NEW_IMAGE whose canary p1 passed its bake, with `changes`."""
    release = Rollout(
        image=NEW_IMAGE,
        phase=RolloutPhase.ROLLING,
        canary="p1",
        from_image=OLD_IMAGE,
        verdict=PASSED,
    )
    return release.replace(**changes)


def test_a_new_image_drains_the_oldest_pod_as_its_canary(idle_pool: list[MemberRecord]) -> None:
    rolled = roll(release_loop(*idle_pool))
    release = rolled.release
    assert (release.phase, release.canary, release.from_image) == (
        RolloutPhase.CANARY,
        "p1",
        OLD_IMAGE,
    )
    assert (release.updating, release.waiting, release.updated, release.total) == (
        ("p1",),
        None,
        0,
        3,
    )
    canary = rolled.member("p1")
    assert canary.phase == Phase.DRAINING
    assert canary.update is not None
    assert (canary.update.from_image, canary.update.to_image) == (OLD_IMAGE, NEW_IMAGE)
    assert [e.pod_id for e in rolled.loop.effects if isinstance(e, Unwire)] == ["p1"]
    assert rolled.member("p2").phase == Phase.READY


def test_a_busy_pool_waits_for_its_canary_and_says_why(idle_pool: list[MemberRecord]) -> None:
    warming = member("p4", Phase.WARMING, image=OLD_IMAGE)
    rolled = roll(release_loop(*idle_pool, warming))
    assert rolled.release.phase is RolloutPhase.CANARY
    assert rolled.release.canary is None
    assert rolled.release.waiting == "the pool is busy (Warming)"
    assert "image roll waits: the pool is busy (Warming)" in rolled.notes
    assert all(m.phase in (Phase.READY, Phase.WARMING) for m in rolled.planned)


def test_a_wanted_create_or_a_pool_wide_degradation_holds_the_canary(
    idle_pool: list[MemberRecord],
) -> None:
    wanted = roll(release_loop(*idle_pool), wants_create=True)
    assert wanted.release.waiting == "the pool is busy (a create is pending)"
    degraded = roll(release_loop(*idle_pool), pool_wide=True)
    assert degraded.release.waiting == "every Ready pod is degraded"


def test_one_ready_pod_is_not_enough_for_an_in_place_roll() -> None:
    rolled = roll(release_loop(serving("p1", 8081)))
    assert rolled.release.waiting == "1 Ready pod(s); an in-place roll needs 2"
    assert rolled.member("p1").phase == Phase.READY


def test_a_pod_whose_answer_does_not_read_is_never_the_canary(
    idle_pool: list[MemberRecord],
) -> None:
    loop = release_loop(*idle_pool)
    loop.held = frozenset({"p1"})
    assert roll(loop).release.canary == "p2"
    loop = release_loop(*idle_pool)
    loop.held = frozenset({"p1", "p2", "p3"})
    rolled = roll(loop)
    assert rolled.release.waiting == "RunPod's answer for pod(s) p1, p2, p3 does not read"


def test_an_image_the_pool_already_serves_needs_no_canary(
    idle_pool: list[MemberRecord],
) -> None:
    rolled = roll(release_loop(*idle_pool, serving("p4", 8084, NEW_IMAGE)))
    release = rolled.release
    assert release.phase is RolloutPhase.ROLLING
    assert release.verdict is not None
    assert release.verdict.result is VerdictResult.SKIPPED
    assert release.verdict.message == (
        f"the pool already serves {NEW_IMAGE} on 1 Ready pod(s): no canary needed"
    )
    assert release.updating == ("p1",)


def test_the_canary_disabled_rolls_at_once(idle_pool: list[MemberRecord]) -> None:
    spec = release_spec(rollout={"canary": {"enabled": False}})
    rolled = roll(release_loop(*idle_pool, spec=spec))
    assert (rolled.release.phase, rolled.release.updating) == (RolloutPhase.ROLLING, ("p1",))


def test_the_canary_updating_then_baking() -> None:
    others = [serving("p2", 8082), serving("p3", 8083)]
    release = Rollout(
        image=NEW_IMAGE, phase=RolloutPhase.CANARY, canary="p1", from_image=OLD_IMAGE
    )
    rolled = roll(release_loop(updating("p1"), *others, rollout=release))
    assert (rolled.release.phase, rolled.release.updating) == (RolloutPhase.CANARY, ("p1",))
    assert rolled.release.waiting is None
    back = serving("p1", 8081, NEW_IMAGE)
    rolled = roll(release_loop(back, *others, rollout=release))
    assert (rolled.release.phase, rolled.release.updating) == (RolloutPhase.BAKING, ())
    assert (rolled.release.updated, rolled.release.total) == (1, 3)


def test_after_a_passed_canary_max_parallel_pods_go_while_ready_stays_at_the_floor() -> None:
    pods = [serving("p1", 8081, NEW_IMAGE)]
    pods += [serving(f"p{i}", 8080 + i, age=10 - i) for i in range(2, 5)]
    spec = release_spec(rollout={"maxParallel": 3})
    rolled = roll(release_loop(*pods, spec=spec, rollout=passed_release()))
    # 4 Ready: the first goes (3 left), a second leaves 2, replicas.min; a third, 1.
    assert rolled.release.updating == ("p2", "p3")
    assert rolled.release.waiting == (
        "2 pod(s) update now; one more would leave 1 Ready, below 2 (replicas.min is 2)"
    )
    assert [m.pod_id for m in rolled.planned if m.phase == Phase.DRAINING] == ["p2", "p3"]


def test_at_max_parallel_the_roll_waits_for_the_pods_under_way() -> None:
    pods = [serving("p1", 8081, NEW_IMAGE), updating("p2"), serving("p3", 8083)]
    rolled = roll(release_loop(*pods, rollout=passed_release()))
    assert (rolled.release.phase, rolled.release.updating) == (RolloutPhase.ROLLING, ("p2",))
    assert rolled.release.waiting is None
    assert rolled.member("p3").phase == Phase.READY


def test_a_failed_canary_rolls_back_and_says_so_in_update_failed() -> None:
    release = passed_release(phase=RolloutPhase.BAKING, verdict=FAILED)
    pods = [serving("p1", 8081, NEW_IMAGE), serving("p2", 8082), serving("p3", 8083)]
    rolled = roll(release_loop(*pods, rollout=release))
    assert rolled.release.phase is RolloutPhase.ROLLED_BACK
    assert rolled.release.waiting == (
        f"{NEW_IMAGE} failed its canary; it is not tried again until spec.image changes"
    )
    assert rolled.condition(Cond.UPDATE_FAILED.value) == (
        "True",
        "CanaryFailed",
        f"the canary p1 of {NEW_IMAGE} failed its bake and goes back to {OLD_IMAGE}: "
        f"{FAILED.message}; {NEW_IMAGE} is not tried again until spec.image changes",
    )


def test_a_pod_going_back_pauses_the_release_until_the_backoff_ends() -> None:
    until = NOW + dt.timedelta(minutes=20)
    pods = [serving("p1", 8081, NEW_IMAGE), updating("p2", rollback=True), serving("p3", 8083)]
    loop = release_loop(*pods, rollout=passed_release(), backoff=Backoff(update_until=until))
    rolled = roll(loop)
    assert rolled.release.phase is RolloutPhase.ROLLED_BACK
    assert rolled.release.waiting == (
        "image updates are paused after a failed update until 12:20:00Z"
    )
    assert rolled.condition(Cond.UPDATE_FAILED.value) == (
        "True",
        "RolledBack",
        f"pod p2: update to {NEW_IMAGE} failed; image updates paused until 2026-03-01T12:20:00Z",
    )
    assert rolled.member("p3").phase == Phase.READY


def test_every_pod_on_the_image_is_done() -> None:
    pods = [serving("p1", 8081, NEW_IMAGE), serving("p2", 8082, NEW_IMAGE)]
    rolled = roll(release_loop(*pods, rollout=passed_release()))
    assert rolled.release.phase is RolloutPhase.DONE
    assert (rolled.release.updated, rolled.release.total) == (2, 2)
    assert rolled.condition(Cond.UPDATE_FAILED.value) is None  # never raised, never cleared


def test_a_new_image_starts_over_without_the_last_backoff_or_verdict(
    idle_pool: list[MemberRecord],
) -> None:
    older = Rollout(image="img:0", phase=RolloutPhase.ROLLED_BACK, canary="p3", verdict=FAILED)
    until = NOW + dt.timedelta(minutes=20)
    rolled = roll(release_loop(*idle_pool, rollout=older, backoff=Backoff(update_until=until)))
    assert rolled.loop.status.current.backoff.update_until is None
    assert (rolled.release.image, rolled.release.canary) == (NEW_IMAGE, "p1")
    assert rolled.release.verdict is None


def test_without_spec_image_there_is_no_release(idle_pool: list[MemberRecord]) -> None:
    spec = release_spec(image=None)
    rolled = roll(release_loop(*idle_pool, spec=spec, rollout=passed_release()))
    assert rolled.loop.status.current.rollout is None
    assert all(m.phase == Phase.READY for m in rolled.planned)
