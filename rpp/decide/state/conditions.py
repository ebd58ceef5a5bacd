"""The pool's conditions: their names, and the Events their changes produce.

Where it sits: decide. Every step that can explain "why nothing happened" or "what is
wrong" sets a condition through `Conditions`; at the end of decide the changed ones
become RecordEvent effects, so `kubectl describe rpp` tells the same story as
`kubectl get rpp -o yaml`. Conditions use the standard shape (type, status, reason,
message, lastTransitionTime, observedGeneration); lastTransitionTime only moves when
the status flips.
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import assert_never

from rpp.decide.state.working_status import WorkingStatus
from rpp.model.effects import EventType, RecordEvent
from rpp.model.spec import Mode
from rpp.model.status import PoolStatus


class Cond(StrEnum):
    INVALID_SPEC = "InvalidSpec"
    NOT_ACTING = "NotActing"
    CAPACITY_UNAVAILABLE = "CapacityUnavailable"
    CREATE_BLOCKED = "CreateBlocked"
    REPLACEMENT_BLOCKED = "ReplacementBlocked"
    POOL_WIDE = "PoolWideDegradation"
    HOST_NOTICE = "HostNotice"
    PROMETHEUS_UNAVAILABLE = "PrometheusUnavailable"
    UPDATE_FAILED = "UpdateFailed"
    AUTOSCALING_METRIC_UNAVAILABLE = "AutoscalingMetricUnavailable"
    UNREADABLE_PODS = "UnreadablePods"
    SECOND_CONTROLLER = "SecondController"
    DELETION_BLOCKED = "DeletionBlocked"
    STATUS_WRITE_FAILING = "StatusWriteFailing"


# Every condition is a problem when True, so a change to True is a Warning Event.
ALL_CONDITIONS = tuple(c.value for c in Cond)

READY = "Ready"
"""The aggregate condition tools judge a pool by (`kubectl wait --for=condition=Ready`,
Argo CD and Flux health): True is good, unlike every condition above, so it is kept out
of ALL_CONDITIONS (and of runpod_pool_condition). `readiness` says when it is True."""
RECONCILING = "Reconciling"
STALLED = "Stalled"
"""The two conditions kstatus reads (rpp/decide/progress.py says when each is True).
They restate Ready and the conditions above for GitOps tools, so like Ready they are
kept out of ALL_CONDITIONS, and their flips make no Event: the condition that stalls the
pool, or the actions it takes while it reconciles, already said it."""
SUMMARY_CONDITIONS = (READY, RECONCILING, STALLED)
_QUIET = frozenset({RECONCILING, STALLED})
_BLOCKING = (Cond.INVALID_SPEC.value, Cond.NOT_ACTING.value)


def readiness(status: PoolStatus, *, mode: Mode, deleting: bool) -> tuple[bool, str, str]:
    """Ready, its reason and message (docs/operating.md#ready): the pool is not being
    deleted, no InvalidSpec or NotActing holds, and in Manage no PoolWideDegradation holds
    and at least `desired` members are Ready and in nginx. DryRun and Observe create no
    pods, so there it means the controller plans or observes the pool without trouble.
    ReconcileFailed (raised outside decide, rpp/controller/reconcile_failed.py) makes it
    False too."""
    counted = f"{status.ready} of {status.desired} desired pod(s) are Ready and in nginx"
    if deleting:
        return False, "Deleting", "the pool is being deleted"
    for blocking in _BLOCKING:
        cond = status.condition(blocking)
        if cond is not None and cond.status == "True":
            return False, blocking, cond.message
    match mode:
        case Mode.MANAGE:
            held = status.condition(Cond.POOL_WIDE.value)
            if held is not None and held.status == "True":
                # Ready and wired, but every one of them degraded: nothing serves well.
                return False, Cond.POOL_WIDE.value, held.message
            if status.ready < status.desired:
                return False, "PodsNotReady", counted
            return True, "PodsReady", counted
        case Mode.DRY_RUN:
            doing = "plans"
        case Mode.OBSERVE:
            doing = "observes"
        case _:
            assert_never(mode)
    return True, mode.value, f"{mode.value}: the controller {doing} and creates no pods; {counted}"


class Conditions:
    """Sets this loop's conditions on the working status, and the Events their changes
    make against the conditions it started with."""

    def __init__(self, working: WorkingStatus, *, now: dt.datetime, generation: int) -> None:
        self.working = working  # the status is the loop's (rpp/decide/state/working_status.py)
        self.before = {c.type: c for c in working.current.conditions}
        self.now = now
        self.generation = generation

    def set(self, cond: Cond, *, true: bool, reason: str, message: str) -> None:
        self.working.set_condition(
            type=cond.value,
            status="True" if true else "False",
            reason=reason,
            message=message,
            now=self.now,
            generation=self.generation,
        )

    def clear(self, cond: Cond, *, reason: str, message: str) -> None:
        """Set False, but only if the condition was ever raised (keeps status short)."""
        if cond.value in self.before or self.working.current.condition(cond.value) is not None:
            self.set(cond, true=False, reason=reason, message=message)

    def set_ready(self, *, mode: Mode, deleting: bool) -> None:
        """Ready from this loop's status (set it last: it reads the others)."""
        ready, reason, message = readiness(self.working.current, mode=mode, deleting=deleting)
        self.working.set_condition(
            type=READY,
            status="True" if ready else "False",
            reason=reason,
            message=message,
            now=self.now,
            generation=self.generation,
        )

    def events(self) -> list[RecordEvent]:
        """One Event per condition that appeared or changed status this loop; Ready's
        flips only (NotReady a Warning, Ready back a Normal one); none for Reconciling
        and Stalled."""
        out: list[RecordEvent] = []
        for cond in self.working.current.conditions:
            old = self.before.get(cond.type)
            if (old is not None and old.status == cond.status) or cond.type in _QUIET:
                continue
            if cond.type == READY:
                if old is not None:
                    back = cond.status == "True"
                    kind: EventType = "Normal" if back else "Warning"
                    reason = READY if back else f"Not{READY}"
                    out.append(RecordEvent(type=kind, reason=reason, message=cond.message))
                continue
            if old is None and cond.status != "True":
                continue
            raised = cond.status == "True"
            out.append(
                RecordEvent(
                    type="Warning" if raised else "Normal",
                    reason=cond.type if raised else f"{cond.type}Cleared",
                    message=cond.message,
                )
            )
        return out
