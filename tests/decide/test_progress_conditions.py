"""Reconciling and Stalled for the statuses a story does not reach cheaply: which blocker
waits for a person and which passes by itself (rpp/decide/progress.py;
docs/operating.md#reconciling-and-stalled). tests/install/test_gitops_health.py runs the common
ones through the controller and the GitOps tools."""

from __future__ import annotations

import datetime as dt

import pytest

from rpp.adapters.clock import UTC
from rpp.decide.progress import STALL_AFTER, progress
from rpp.model.members import MemberRecord, Phase
from rpp.model.records import ConditionStatus
from rpp.model.spec import Mode
from rpp.model.status import PoolStatus

T0 = dt.datetime(2026, 1, 1, tzinfo=UTC)


def pool(*conditions: tuple[str, str, str], members: tuple[Phase, ...] = ()) -> PoolStatus:
    """Two Ready pods in nginx (plus `members`), with these conditions raised at T0."""
    records = [
        MemberRecord(pod_id=f"r{i}", name=f"rpp-r{i}", phase=Phase.READY, since=T0, slot=8081 + i)
        for i in range(2)
    ]
    records += [
        MemberRecord(pod_id=f"m{i}", name=f"rpp-m{i}", phase=phase, since=T0)
        for i, phase in enumerate(members)
    ]
    status = PoolStatus(mode="Manage", observed_generation=1, desired=2, ready=2)
    status = status.replace(members=tuple(records))
    for kind, state, reason in conditions:
        said: ConditionStatus = "True" if state == "True" else "False"
        status = status.with_condition(
            type=kind, status=said, reason=reason, message=f"{kind} {reason}", now=T0
        )
    return status


def verdict(status: PoolStatus, *, after: dt.timedelta = dt.timedelta(), **kw: object) -> str:
    """The one of Reconciling and Stalled that is True (with its reason), or Converged."""
    mode = kw.get("mode", Mode.MANAGE)
    deleting = bool(kw.get("deleting", False))
    assert isinstance(mode, Mode)
    reconciling, stalled = progress(status, mode=mode, deleting=deleting, now=T0 + after)
    assert not (reconciling.true and stalled.true), "never both True"
    if stalled.true:
        return f"Stalled {stalled.reason}"
    if reconciling.true:
        return f"Reconciling {reconciling.reason}"
    return f"Converged {reconciling.reason}"


@pytest.mark.parametrize("cap", ["MaxPodsReached", "CostCapReached", "NoDatacenter"])
def test_a_cap_stalls_the_pool_unless_a_leaving_pod_makes_room(cap: str) -> None:
    blocked = ("CreateBlocked", "True", cap)
    assert verdict(pool(blocked)) == "Stalled CreateBlocked"
    assert verdict(pool(blocked, members=(Phase.DRAINING,))) == "Reconciling CreateBlocked"
    assert verdict(pool(blocked, members=(Phase.TERMINATING,))) == "Reconciling CreateBlocked"


def test_the_hourly_create_cap_stalls_whatever_leaves_and_a_backoff_never_does() -> None:
    limited = ("CreateBlocked", "True", "CreateRateLimited")
    assert verdict(pool(limited, members=(Phase.DRAINING,))) == "Stalled CreateBlocked"
    backoff = ("CreateBlocked", "True", "CreateBackoff")
    assert verdict(pool(backoff), after=dt.timedelta(hours=1)) == "Reconciling CreateBlocked"


@pytest.mark.parametrize("cond", ["NotActing", "CapacityUnavailable"])
def test_what_often_passes_by_itself_stalls_only_once_it_has_lasted(cond: str) -> None:
    raised = pool((cond, "True", "Because"))
    just_short = STALL_AFTER - dt.timedelta(seconds=1)
    assert verdict(raised, after=just_short) == f"Reconciling {cond}"
    assert verdict(raised, after=STALL_AFTER) == f"Stalled {cond}"


def test_a_failed_canary_stalls_a_rolled_back_update_retries() -> None:
    assert verdict(pool(("UpdateFailed", "True", "CanaryFailed"))) == "Stalled UpdateFailed"
    assert verdict(pool(("UpdateFailed", "True", "RolledBack"))) == "Reconciling UpdateFailed"


def test_a_blocked_deletion_stalls_a_progressing_one_reconciles() -> None:
    blocked = pool(("DeletionBlocked", "True", "TerminateFailed"))
    assert verdict(blocked, deleting=True) == "Stalled DeletionBlocked"
    going = pool(("DeletionBlocked", "False", "TerminatingPods"))
    assert verdict(going, deleting=True) == "Reconciling Deleting"


def test_not_acting_hides_the_stale_blockers_behind_it() -> None:
    """While the pool cannot act, what it last knew of caps and stock is no verdict."""
    status = pool(
        ("NotActing", "True", "RunPodUnavailable"), ("CreateBlocked", "True", "MaxPodsReached")
    )
    assert verdict(status) == "Reconciling NotActing"


def test_dry_run_and_observe_stall_only_on_what_stops_the_controller_itself() -> None:
    capped = pool(("CreateBlocked", "True", "CostCapReached"))
    assert verdict(capped, mode=Mode.DRY_RUN) == "Converged DryRun"
    invalid = pool(("InvalidSpec", "True", "ValidationFailed"))
    assert verdict(invalid, mode=Mode.OBSERVE) == "Stalled InvalidSpec"


def test_pods_on_their_way_keep_a_pool_with_enough_ready_reconciling() -> None:
    assert verdict(pool(members=(Phase.DRAINING,))) == "Reconciling PodsChanging"
    assert verdict(pool(members=(Phase.READY,))) == "Reconciling PodsChanging"  # out of nginx
    assert verdict(pool()) == "Converged Reconciled"
