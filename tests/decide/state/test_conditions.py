"""The pool's conditions and their Events (rpp/decide/state/conditions.py): a condition is
set on the loop's working status, cleared only if it was ever raised, and each change of
status becomes one Event (a Warning when raised, a Normal `...Cleared` when it clears);
Ready says whether the pool serves its desired pods, and its flips are Events too."""

from __future__ import annotations

import pytest

from rpp.decide.state.conditions import (
    ALL_CONDITIONS,
    READY,
    RECONCILING,
    STALLED,
    Cond,
    Conditions,
    readiness,
)
from rpp.decide.state.working_status import WorkingStatus
from rpp.model.effects import RecordEvent
from rpp.model.records import ConditionStatus
from rpp.model.spec import Mode
from rpp.model.status import PoolStatus
from tests.decide.builders import HOUR, NOW, pool_status


def raised(status: PoolStatus, kind: str, state: ConditionStatus = "True") -> PoolStatus:
    return status.with_condition(
        type=kind, status=state, reason="Because", message=f"{kind} says why", now=NOW - HOUR
    )


def serving(ready: int, desired: int = 2) -> PoolStatus:
    return pool_status(ready=ready, desired=desired)


def test_setting_a_condition_writes_it_through_the_loops_working_status(
    working: WorkingStatus, conds: Conditions
) -> None:
    conds.set(Cond.HOST_NOTICE, true=True, reason="Maintenance", message="pod a: maintenance")
    cond = working.current.condition("HostNotice")
    assert cond is not None
    assert (cond.status, cond.reason, cond.message) == (
        "True",
        "Maintenance",
        "pod a: maintenance",
    )
    assert (cond.last_transition_time, cond.observed_generation) == (NOW, 2)


def test_clearing_a_condition_never_raised_leaves_the_status_short(
    working: WorkingStatus, conds: Conditions
) -> None:
    conds.clear(Cond.HOST_NOTICE, reason="NoNotice", message="no notice")
    assert working.current.condition("HostNotice") is None
    conds.clear(Cond.CREATE_BLOCKED, reason="CreatesAllowed", message="creates may go")
    cleared = working.current.condition("CreateBlocked")
    assert cleared is not None
    assert (cleared.status, cleared.reason) == ("False", "CreatesAllowed")


def test_a_condition_raised_this_loop_is_a_warning_event_named_for_it(conds: Conditions) -> None:
    conds.set(Cond.HOST_NOTICE, true=True, reason="Maintenance", message="pod a: maintenance")
    assert conds.events() == [
        RecordEvent(type="Warning", reason="HostNotice", message="pod a: maintenance")
    ]


def test_a_condition_that_clears_is_a_normal_cleared_event(conds: Conditions) -> None:
    conds.clear(Cond.CREATE_BLOCKED, reason="CreatesAllowed", message="creates may go")
    assert conds.events() == [
        RecordEvent(type="Normal", reason="CreateBlockedCleared", message="creates may go")
    ]


def test_a_condition_that_stays_as_it_was_makes_no_event(conds: Conditions) -> None:
    conds.set(Cond.CREATE_BLOCKED, true=True, reason="CostCapReached", message="new numbers")
    assert conds.events() == []


def test_a_condition_that_first_appears_false_makes_no_event() -> None:
    conds = Conditions(WorkingStatus(pool_status()), now=NOW, generation=1)
    conds.set(Cond.HOST_NOTICE, true=False, reason="NoNotice", message="no notice")
    assert conds.events() == []


def test_ready_flips_are_events_and_its_first_setting_is_not() -> None:
    first = Conditions(WorkingStatus(serving(ready=0)), now=NOW, generation=1)
    first.set_ready(mode=Mode.MANAGE, deleting=False)
    assert first.events() == []
    was_ready = raised(serving(ready=0), READY)
    lost = Conditions(WorkingStatus(was_ready), now=NOW, generation=1)
    lost.set_ready(mode=Mode.MANAGE, deleting=False)
    assert [(e.type, e.reason) for e in lost.events()] == [("Warning", "NotReady")]
    was_not = raised(serving(ready=2), READY, "False")
    back = Conditions(WorkingStatus(was_not), now=NOW, generation=1)
    back.set_ready(mode=Mode.MANAGE, deleting=False)
    assert [(e.type, e.reason) for e in back.events()] == [("Normal", "Ready")]


def test_reconciling_and_stalled_flips_make_no_event() -> None:
    conds = Conditions(WorkingStatus(pool_status()), now=NOW, generation=1)
    for kind in (RECONCILING, STALLED):
        conds.working.set_condition(
            type=kind, status="True", reason="r", message="m", now=NOW, generation=1
        )
    assert conds.events() == []
    assert READY not in ALL_CONDITIONS
    assert RECONCILING not in ALL_CONDITIONS
    assert STALLED not in ALL_CONDITIONS


def test_a_managed_pool_is_ready_once_its_desired_pods_are_ready_and_in_nginx() -> None:
    assert readiness(serving(ready=2), mode=Mode.MANAGE, deleting=False) == (
        True,
        "PodsReady",
        "2 of 2 desired pod(s) are Ready and in nginx",
    )
    assert readiness(serving(ready=1), mode=Mode.MANAGE, deleting=False) == (
        False,
        "PodsNotReady",
        "1 of 2 desired pod(s) are Ready and in nginx",
    )


def test_a_pool_being_deleted_is_not_ready() -> None:
    assert readiness(serving(ready=2), mode=Mode.MANAGE, deleting=True) == (
        False,
        "Deleting",
        "the pool is being deleted",
    )


@pytest.mark.parametrize("mode", [Mode.MANAGE, Mode.DRY_RUN, Mode.OBSERVE])
@pytest.mark.parametrize("blocking", [Cond.INVALID_SPEC, Cond.NOT_ACTING])
def test_an_invalid_spec_or_a_pool_not_acting_is_not_ready_in_any_mode(
    mode: Mode, blocking: Cond
) -> None:
    status = raised(serving(ready=2), blocking.value)
    assert readiness(status, mode=mode, deleting=False) == (
        False,
        blocking.value,
        f"{blocking.value} says why",
    )
    cleared = raised(serving(ready=2), blocking.value, "False")
    assert readiness(cleared, mode=mode, deleting=False)[0] is True


def test_a_managed_pool_held_by_pool_wide_degradation_is_not_ready() -> None:
    status = raised(serving(ready=2), Cond.POOL_WIDE.value)
    ready, reason, _ = readiness(status, mode=Mode.MANAGE, deleting=False)
    assert (ready, reason) == (False, "PoolWideDegradation")


@pytest.mark.parametrize(("mode", "doing"), [(Mode.DRY_RUN, "plans"), (Mode.OBSERVE, "observes")])
def test_a_pool_that_creates_no_pods_is_ready_while_nothing_troubles_it(
    mode: Mode, doing: str
) -> None:
    status = raised(serving(ready=0), Cond.POOL_WIDE.value)
    assert readiness(status, mode=mode, deleting=False) == (
        True,
        mode.value,
        f"{mode.value}: the controller {doing} and creates no pods; "
        "0 of 2 desired pod(s) are Ready and in nginx",
    )
