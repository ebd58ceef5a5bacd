"""The status one decide call builds (rpp/decide/state/working_status.py): it starts as the
stored status, each named change moves `current` on, and the stored value is never
changed under the caller (PoolStatus stays frozen)."""

from __future__ import annotations

import datetime as dt

from rpp.decide.state.working_status import WorkingStatus
from rpp.model.members import Phase
from rpp.model.records import ConditionStatus, HistoryEntry
from rpp.model.status import HISTORY_LIMIT, PoolStatus
from tests.decide.builders import HOUR, NOW, member, pool_status


def entry(n: int) -> HistoryEntry:
    return HistoryEntry(time=NOW, action="transition", outcome=f"#{n}", detail="", pod=None)


def test_a_loop_starts_from_the_stored_status(stored: PoolStatus) -> None:
    assert WorkingStatus(stored).current is stored


def test_replace_changes_top_level_fields_and_leaves_the_stored_status_as_it_was(
    stored: PoolStatus, working: WorkingStatus
) -> None:
    working.replace(desired=5, ready=1)
    assert (working.current.desired, working.current.ready) == (5, 1)
    assert (stored.desired, stored.ready) == (2, 0)
    assert working.current.members == stored.members


def test_with_member_updates_a_member_in_place_and_appends_a_new_one(
    working: WorkingStatus,
) -> None:
    working.with_member(member("b", Phase.READY, slot=8082))
    working.with_member(member("c", Phase.WARMING))
    current = working.current
    assert [(m.pod_id, m.phase) for m in current.members] == [
        ("a", Phase.READY),
        ("b", Phase.READY),
        ("c", Phase.WARMING),
    ]
    b = current.member("b")
    assert b is not None
    assert b.slot == 8082


def test_with_history_appends_and_keeps_only_the_newest_entries(working: WorkingStatus) -> None:
    working.with_history(entry(0), entry(1))
    assert [e.outcome for e in working.current.history] == ["#0", "#1"]
    working.with_history(*(entry(n) for n in range(2, HISTORY_LIMIT + 5)))
    history = working.current.history
    assert len(history) == HISTORY_LIMIT
    assert history[0].outcome == "#5"
    assert history[-1].outcome == f"#{HISTORY_LIMIT + 4}"


def test_adopt_takes_a_status_a_pure_helper_derived(working: WorkingStatus) -> None:
    derived = working.current.without_member("a")
    working.adopt(derived)
    assert working.current is derived
    assert working.current.member("a") is None


def test_a_condition_keeps_its_transition_time_until_its_status_flips(
    working: WorkingStatus,
) -> None:
    def set_to(state: ConditionStatus, at: dt.timedelta, reason: str) -> None:
        working.set_condition(
            type="CreateBlocked",
            status=state,
            reason=reason,
            message=reason,
            now=NOW + at,
            generation=3,
        )

    set_to("True", HOUR, "CostCapReached")  # raised an hour before NOW, still True
    (kept,) = working.current.conditions
    assert (kept.reason, kept.last_transition_time, kept.observed_generation) == (
        "CostCapReached",
        NOW - HOUR,
        3,
    )
    set_to("False", 2 * HOUR, "CreatesAllowed")
    (flipped,) = working.current.conditions
    assert flipped.last_transition_time == NOW + 2 * HOUR


def test_a_condition_without_a_generation_takes_the_statuss_observed_one() -> None:
    working = WorkingStatus(pool_status(observed_generation=7))
    working.set_condition(type="HostNotice", status="True", reason="r", message="m", now=NOW)
    (cond,) = working.current.conditions
    assert cond.observed_generation == 7


def test_a_replacement_is_logged_against_its_datacenter(working: WorkingStatus) -> None:
    working.with_datacenter_replacement("EU-RO-1", NOW - HOUR)
    working.with_datacenter_replacement("EU-RO-1", NOW)
    assert working.current.datacenter_replacements == {"EU-RO-1": (NOW - HOUR, NOW)}
    assert working.current.cooldown_datacenters(NOW) == frozenset({"EU-RO-1"})
