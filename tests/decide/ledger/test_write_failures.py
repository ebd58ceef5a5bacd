"""When the pool's status cannot be written: what still happens, and saying so
(rpp/decide/ledger/write_failures.py).

With its write-ahead failed, a loop still takes dead pods out of nginx and terminates
them (safe to repeat), while creates wait (CreateBlocked StatusWriteFailing) and the
members whose update or terminate needs an intent are kept still. StatusWriteFailing
says how many writes failed, since when and why, and clears once writes land.
"""

from __future__ import annotations

import datetime as dt

from rpp.decide.ledger.write_failures import create_hold, dead, keep_still, report
from rpp.decide.state.conditions import Cond
from rpp.machines.signals import UNREACHABLE, MemberSettings
from rpp.model.effects import CreatePod, Effect, RecordEvent, TerminatePod, Unwire, UpdatePod
from rpp.model.members import MemberRecord, Phase
from rpp.model.observations import StatusWrites
from rpp.model.status import PoolStatus
from tests.decide.builders import NOW, PREFIX, member
from tests.decide.ledger.conftest import IMAGE, NEW_IMAGE, condition_of, conditions

SETTINGS = MemberSettings()
REFUSED = StatusWrites(since=NOW - dt.timedelta(minutes=3), failed=4, error="409 Conflict")


def terminate(pod_id: str) -> TerminatePod:
    return TerminatePod(pod_id=pod_id, name=f"{PREFIX}{pod_id}", reason="flagged")


def hard_failing(pod_id: str, *, slot: int | None) -> MemberRecord:
    return member(pod_id, phase=Phase.FLAGGED, slot=slot, hard_failures=2)


# --- StatusWriteFailing -----------------------------------------------------------------


def test_failing_writes_raise_status_write_failing_with_how_many_since_when_and_why() -> None:
    conds = conditions()
    report(conds, REFUSED)
    found = condition_of(conds, Cond.STATUS_WRITE_FAILING)
    assert found is not None
    status, reason, message = found
    assert (status, reason) == ("True", "WritesRefused")
    assert message.startswith("4 write(s) of this pool's status failed since 2026-03-01T11:57:00Z")
    assert "the last with 409 Conflict" in message


def test_status_write_failing_clears_once_writes_land_again() -> None:
    conds = conditions()
    report(conds, REFUSED)
    later = conditions(conds.working.current)
    report(later, StatusWrites())
    found = condition_of(later, Cond.STATUS_WRITE_FAILING)
    assert found is not None
    assert found[:2] == ("False", "StatusWritesLand")


def test_a_pool_whose_writes_always_landed_never_mentions_status_write_failing() -> None:
    conds = conditions()
    report(conds, StatusWrites())
    assert condition_of(conds, Cond.STATUS_WRITE_FAILING) is None


# --- creates wait for their write-ahead -----------------------------------------------


def test_a_create_waits_only_when_this_loops_write_ahead_failed() -> None:
    assert create_hold(REFUSED) is None  # earlier writes failed; this loop's landed
    hold = create_hold(StatusWrites(failed=1, error="409 Conflict", ahead_failed=True))
    assert hold is not None
    assert "(409 Conflict)" in hold
    assert "waits until its intent is stored" in hold


# --- what is kept still ------------------------------------------------------------------


def test_effects_that_write_nothing_to_runpod_keep_no_member_still() -> None:
    effects: list[Effect] = [
        Unwire(pod_id="pod1", slot=8081, reason="dead"),
        RecordEvent(type="Normal", reason="Why", message="because"),
    ]
    assert keep_still(effects, status=PoolStatus(), settings=SETTINGS, now=NOW) == frozenset()


def test_a_create_cannot_be_kept_still_by_holding_a_member() -> None:
    effects: list[Effect] = [terminate("pod1"), CreatePod(pool="web", name="x", reason="size")]
    assert keep_still(effects, status=PoolStatus(), settings=SETTINGS, now=NOW) is None


def test_a_dead_pods_terminate_is_safe_to_send_again_without_a_write_ahead() -> None:
    status = PoolStatus(members=(hard_failing("pod1", slot=None),))
    still = keep_still([terminate("pod1")], status=status, settings=SETTINGS, now=NOW)
    assert still == frozenset()


def test_updates_and_the_terminates_of_live_or_wired_pods_wait_for_a_write_ahead() -> None:
    status = PoolStatus(
        members=(
            member("live", phase=Phase.DRAINING),  # out of nginx, but not down
            hard_failing("wired", slot=8081),  # down, but still in nginx
            member("upd"),
            hard_failing("deadupd", slot=None),  # dead, but an update is no terminate
        )
    )
    effects: list[Effect] = [
        terminate("live"),
        terminate("wired"),
        terminate("unknown"),  # no record: nothing says it is dead
        UpdatePod(
            pod_id="deadupd",
            name=f"{PREFIX}deadupd",
            image=IMAGE,
            from_image=NEW_IMAGE,
            reason="r",
        ),
        UpdatePod(
            pod_id="upd", name=f"{PREFIX}upd", image=NEW_IMAGE, from_image=IMAGE, reason="r"
        ),
    ]
    still = keep_still(effects, status=status, settings=SETTINGS, now=NOW)
    assert still == frozenset({"live", "wired", "unknown", "upd", "deadupd"})


def test_a_pod_flagged_unreachable_and_still_in_breach_out_of_nginx_is_dead() -> None:
    unreachable = member(
        "pod1",
        phase=Phase.FLAGGED,
        flagged_rule=UNREACHABLE,
        breaches={UNREACHABLE: NOW - dt.timedelta(minutes=5)},
    )
    assert dead(unreachable, SETTINGS)
    recovered = unreachable.replace(breaches={})
    assert not dead(recovered, SETTINGS)
    assert not dead(unreachable.replace(slot=8081), SETTINGS)
    assert not dead(None, SETTINGS)
