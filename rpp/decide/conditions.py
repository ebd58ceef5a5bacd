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

from rpp.model.effects import RecordEvent
from rpp.model.status import PoolStatus


class Cond(StrEnum):
    INVALID_SPEC = "InvalidSpec"
    NOT_ACTING = "NotActing"
    CAPACITY_UNAVAILABLE = "CapacityUnavailable"
    CREATE_BLOCKED = "CreateBlocked"
    POOL_WIDE = "PoolWideDegradation"
    HOST_NOTICE = "HostNotice"
    PROMETHEUS_UNAVAILABLE = "PrometheusUnavailable"
    UPDATE_FAILED = "UpdateFailed"
    AUTOSCALING_METRIC_UNAVAILABLE = "AutoscalingMetricUnavailable"
    UNREADABLE_PODS = "UnreadablePods"
    DELETION_BLOCKED = "DeletionBlocked"


# Every condition is a problem when True, so a change to True is a Warning Event.
ALL_CONDITIONS = tuple(c.value for c in Cond)


class Conditions:
    """Collects this loop's conditions on top of the previous status."""

    def __init__(self, status: PoolStatus, *, now: dt.datetime, generation: int) -> None:
        self.status = status
        self.before = {c.type: c for c in status.conditions}
        self.now = now
        self.generation = generation

    def set(self, cond: Cond, *, true: bool, reason: str, message: str) -> None:
        self.status = self.status.with_condition(
            type=cond.value,
            status="True" if true else "False",
            reason=reason,
            message=message,
            now=self.now,
            generation=self.generation,
        )

    def clear(self, cond: Cond, *, reason: str, message: str) -> None:
        """Set False, but only if the condition was ever raised (keeps status short)."""
        if cond.value in self.before or self.status.condition(cond.value) is not None:
            self.set(cond, true=False, reason=reason, message=message)

    def events(self) -> list[RecordEvent]:
        """One Event per condition that appeared or changed status this loop."""
        out: list[RecordEvent] = []
        for cond in self.status.conditions:
            old = self.before.get(cond.type)
            if old is not None and old.status == cond.status:
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
