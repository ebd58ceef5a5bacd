"""The small records inside RunPodPool status: conditions, plan, history, logs, backoff.

Decide reads these from the previous status, computes new ones and returns them in the
new status; they are the pool's memory for everything time-based (the hourly create
cap, datacenter cooldown, backoffs, autoscaling stabilization). rpp/model/status.py composes
them into `PoolStatus`; rpp/model/members.py holds the member records. Texts are
bounded at construction so the whole status stays small whatever RunPod answers.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rpp.model.codec import Fields, drop_none, opt_stamp, write_time
from rpp.model.effects import Effect

CONDITION_STATUSES = ("True", "False", "Unknown")
MESSAGE_LIMIT = 1024  # condition and capacity-refusal messages
DETAIL_LIMIT = 300  # history and plan lines


def bounded(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)


@dataclass(frozen=True, kw_only=True)
class Condition:
    """A standard Kubernetes condition (`status.conditions[]`)."""

    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str
    last_transition_time: dt.datetime
    observed_generation: int | None = None

    def __post_init__(self) -> None:
        if self.status not in CONDITION_STATUSES:
            raise ValueError(
                f"condition {self.type}: status must be one of {', '.join(CONDITION_STATUSES)}, "
                f"got {self.status!r}"
            )
        _set(self, "last_transition_time", opt_stamp(self.last_transition_time))
        _set(self, "message", bounded(self.message, MESSAGE_LIMIT))

    def for_storage(self) -> dict[str, Any]:
        return drop_none(
            {
                "type": self.type,
                "status": self.status,
                "reason": self.reason,
                "message": self.message,
                "lastTransitionTime": write_time(self.last_transition_time),
                "observedGeneration": self.observed_generation,
            }
        )

    @classmethod
    def from_storage(cls, data: object, path: str) -> Condition:
        f = Fields(data, path)
        return cls(
            type=f.text("type"),
            status=f.choice("status", CONDITION_STATUSES),
            reason=f.opt_text("reason") or "",
            message=f.opt_text("message") or "",
            last_transition_time=f.time("lastTransitionTime"),
            observed_generation=f.opt_integer("observedGeneration"),
        )


def set_condition(
    conditions: Iterable[Condition],
    *,
    type: str,
    status: str,
    reason: str,
    message: str,
    now: dt.datetime,
    generation: int | None,
) -> tuple[Condition, ...]:
    """Conditions with `type` set; lastTransitionTime moves only when status changes.

    An existing condition keeps its place in the list, a new one is appended, so the
    order users see in `kubectl describe` is stable from loop to loop.
    """
    result: list[Condition] = []
    found = False
    for existing in conditions:
        if existing.type != type:
            result.append(existing)
            continue
        found = True
        since = existing.last_transition_time if existing.status == status else now
        result.append(
            Condition(
                type=type,
                status=status,
                reason=reason,
                message=message,
                last_transition_time=since,
                observed_generation=generation,
            )
        )
    if not found:
        result.append(
            Condition(
                type=type,
                status=status,
                reason=reason,
                message=message,
                last_transition_time=now,
                observed_generation=generation,
            )
        )
    return tuple(result)


@dataclass(frozen=True, kw_only=True)
class PlannedAction:
    """One line of `status.plannedActions`: what DryRun would do (no secrets)."""

    action: str
    detail: str
    pod: str | None = None

    def __post_init__(self) -> None:
        _set(self, "detail", bounded(self.detail, DETAIL_LIMIT))

    @classmethod
    def from_effect(cls, effect: Effect) -> PlannedAction:
        return cls(action=effect.action, detail=effect.describe(), pod=effect.pod)

    def for_storage(self) -> dict[str, Any]:
        return drop_none({"action": self.action, "pod": self.pod, "detail": self.detail})

    @classmethod
    def from_storage(cls, data: object, path: str) -> PlannedAction:
        f = Fields(data, path)
        return cls(
            action=f.text("action"), detail=f.opt_text("detail") or "", pod=f.opt_text("pod")
        )


@dataclass(frozen=True, kw_only=True)
class HistoryEntry:
    """One line of `status.history`: something the controller did, and how it went."""

    time: dt.datetime
    action: str
    outcome: str
    detail: str = ""
    pod: str | None = None

    def __post_init__(self) -> None:
        _set(self, "time", opt_stamp(self.time))
        _set(self, "detail", bounded(self.detail, DETAIL_LIMIT))

    def for_storage(self) -> dict[str, Any]:
        return drop_none(
            {
                "time": write_time(self.time),
                "action": self.action,
                "pod": self.pod,
                "outcome": self.outcome,
                "detail": self.detail,
            }
        )

    @classmethod
    def from_storage(cls, data: object, path: str) -> HistoryEntry:
        f = Fields(data, path)
        return cls(
            time=f.time("time"),
            action=f.text("action"),
            outcome=f.opt_text("outcome") or "",
            detail=f.opt_text("detail") or "",
            pod=f.opt_text("pod"),
        )


@dataclass(frozen=True, kw_only=True)
class Recommendation:
    """One autoscaling recommendation: the size the pool's value asked for at `time`."""

    time: dt.datetime
    size: int

    def __post_init__(self) -> None:
        _set(self, "time", opt_stamp(self.time))

    def for_storage(self) -> dict[str, Any]:
        return {"time": write_time(self.time), "size": self.size}

    @classmethod
    def from_storage(cls, data: object, path: str) -> Recommendation:
        f = Fields(data, path)
        return cls(time=f.time("time"), size=f.integer("size"))


@dataclass(frozen=True, kw_only=True)
class Autoscaling:
    """`status.autoscaling`: the last value, the size in force and the recommendations."""

    value: float | None = None
    size: int | None = None
    recommendations: tuple[Recommendation, ...] = ()

    def for_storage(self) -> dict[str, Any]:
        return drop_none(
            {
                "value": self.value,
                "size": self.size,
                "recommendations": [r.for_storage() for r in self.recommendations],
            }
        )

    @classmethod
    def from_storage(cls, data: object, path: str) -> Autoscaling:
        f = Fields(data, path)
        return cls(
            value=f.opt_number("value"),
            size=f.opt_integer("size"),
            recommendations=f.each("recommendations", Recommendation.from_storage),
        )


@dataclass(frozen=True, kw_only=True)
class CreateAttempt:
    """A create that counts toward limits.maxCreatesPerHour (`status.createLog[]`)."""

    time: dt.datetime
    outcome: str
    name: str | None = None  # the pod name asked for: the next listing adopts it by name
    replacement_for: str | None = None  # so an adopted pod keeps its replacement link

    def __post_init__(self) -> None:
        _set(self, "time", opt_stamp(self.time))

    def for_storage(self) -> dict[str, Any]:
        return drop_none(
            {
                "time": write_time(self.time),
                "outcome": self.outcome,
                "name": self.name,
                "replacementFor": self.replacement_for,
            }
        )

    @classmethod
    def from_storage(cls, data: object, path: str) -> CreateAttempt:
        f = Fields(data, path)
        return cls(
            time=f.time("time"),
            outcome=f.opt_text("outcome") or "",
            name=f.opt_text("name"),
            replacement_for=f.opt_text("replacementFor"),
        )


@dataclass(frozen=True, kw_only=True)
class Backoff:
    """`status.backoff`: until when creates or image updates wait after a failure."""

    create_until: dt.datetime | None = None
    update_until: dt.datetime | None = None

    def __post_init__(self) -> None:
        _set(self, "create_until", opt_stamp(self.create_until))
        _set(self, "update_until", opt_stamp(self.update_until))

    def creates_blocked(self, now: dt.datetime) -> bool:
        return self.create_until is not None and now < self.create_until

    def updates_blocked(self, now: dt.datetime) -> bool:
        return self.update_until is not None and now < self.update_until

    def for_storage(self) -> dict[str, Any]:
        return drop_none(
            {
                "createUntil": write_time(self.create_until),
                "updateUntil": write_time(self.update_until),
            }
        )

    @classmethod
    def from_storage(cls, data: object, path: str) -> Backoff:
        f = Fields(data, path)
        return cls(create_until=f.opt_time("createUntil"), update_until=f.opt_time("updateUntil"))


@dataclass(frozen=True, kw_only=True)
class CapacityRefusal:
    """RunPod's last "no stock" answer to a create, and what was asked for."""

    time: dt.datetime
    gpu_types: tuple[str, ...]
    cloud: str | None
    datacenters: tuple[str, ...]
    message: str

    def __post_init__(self) -> None:
        _set(self, "time", opt_stamp(self.time))
        _set(self, "message", bounded(self.message, MESSAGE_LIMIT))

    def for_storage(self) -> dict[str, Any]:
        return drop_none(
            {
                "time": write_time(self.time),
                "gpuTypes": list(self.gpu_types),
                "cloud": self.cloud,
                "datacenters": list(self.datacenters),
                "message": self.message,
            }
        )

    @classmethod
    def from_storage(cls, data: object, path: str) -> CapacityRefusal:
        f = Fields(data, path)
        return cls(
            time=f.time("time"),
            gpu_types=f.texts("gpuTypes"),
            cloud=f.opt_text("cloud"),
            datacenters=f.texts("datacenters"),
            message=f.opt_text("message") or "",
        )


@dataclass(frozen=True, kw_only=True)
class Rollout:
    """`status.rollout`: progress of the rolling image update, one pod at a time."""

    updated: int
    total: int
    pod: str | None = None
    step: str | None = None

    def for_storage(self) -> dict[str, Any]:
        return drop_none(
            {"updated": self.updated, "total": self.total, "pod": self.pod, "step": self.step}
        )

    @classmethod
    def from_storage(cls, data: object, path: str) -> Rollout:
        f = Fields(data, path)
        return cls(
            updated=f.integer("updated"),
            total=f.integer("total"),
            pod=f.opt_text("pod"),
            step=f.opt_text("step"),
        )
