"""The small records inside RunPodPool status: conditions, plan, history, logs, backoff.

Decide reads these from the previous status, computes new ones and returns them in the
new status; they are the pool's memory for everything time-based (the hourly create
cap, datacenter cooldown, backoffs, autoscaling stabilization). rpp/model/status.py composes
them into `PoolStatus`; rpp/model/members.py holds the member records and
rpp/model/rollout_records.py the release of a new image. Texts are
bounded at construction so the whole status stays small whatever RunPod answers.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from functools import partial
from typing import Annotated, Literal

from pydantic import AfterValidator, StrictBool

from rpp.model.codec import Number, StatusModel, Timestamp, Whole
from rpp.model.effects import Effect

MESSAGE_LIMIT = 1024  # condition and capacity-refusal messages
DETAIL_LIMIT = 300  # history and plan lines


def bounded(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


Message = Annotated[str, AfterValidator(partial(bounded, limit=MESSAGE_LIMIT))]
Detail = Annotated[str, AfterValidator(partial(bounded, limit=DETAIL_LIMIT))]
ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(StatusModel):
    """A standard Kubernetes condition (`status.conditions[]`)."""

    type: str
    status: ConditionStatus
    reason: str = ""
    message: Message = ""
    last_transition_time: Timestamp
    observed_generation: Whole | None = None


def set_condition(
    conditions: Iterable[Condition],
    *,
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: dt.datetime,
    generation: int | None,
) -> tuple[Condition, ...]:
    """Conditions with `type` set; lastTransitionTime moves only when status changes.

    An existing condition keeps its place in the list, a new one is appended, so the
    order users see in `kubectl describe` is stable from loop to loop. Each type is kept
    once (the first): the CRD keys the list by type, and the API server refuses a status
    repeating one, as an older CRD stored by hand could have.
    """
    result: list[Condition] = []
    found = False
    seen: set[str] = set()
    for existing in conditions:
        if existing.type in seen:
            continue
        seen.add(existing.type)
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


class PlannedAction(StatusModel):
    """One line of `status.plannedActions`: what DryRun would do (no secrets)."""

    action: str
    pod: str | None = None
    detail: Detail = ""

    @classmethod
    def from_effect(cls, effect: Effect) -> PlannedAction:
        return cls(action=effect.action, detail=effect.describe(), pod=effect.pod)


class HistoryEntry(StatusModel):
    """One line of `status.history`: something the controller did, and how it went."""

    time: Timestamp
    action: str
    pod: str | None = None
    outcome: str = ""
    detail: Detail = ""


class Recommendation(StatusModel):
    """One autoscaling recommendation: the size the pool's value asked for at `time`."""

    time: Timestamp
    size: Whole = 0


class Autoscaling(StatusModel):
    """`status.autoscaling`: the last value, the size in force and the recommendations."""

    value: Number | None = None
    size: Whole | None = None
    recommendations: tuple[Recommendation, ...] = ()


class CreateAttempt(StatusModel):
    """A create that counts toward limits.maxCreatesPerHour (`status.createLog[]`)."""

    time: Timestamp
    outcome: str = ""
    name: str | None = None  # the pod name asked for: the next listing adopts it by name
    replacement_for: str | None = None  # so an adopted pod keeps its replacement link


IntentAction = Literal["create", "terminate", "update"]


class Intent(StatusModel):
    """An action written down before it is carried out (`status.intents[]`).

    Before the controller asks RunPod to create, terminate or update a pod it stores
    what it is about to do in status, with a conflict-safe write, and it removes the
    intent once the call's outcome is known. An intent found at the start of a loop is
    the trace of a loop that stopped in between (a crash, a lost status write);
    rpp/decide/ledger/intents.py resolves it from RunPod's listing. A create's intent names
    the pod's unique name and what it is for (`replacement_for`, or the pool's size).
    """

    action: IntentAction
    time: Timestamp
    name: str  # the pod's name; for a create, the unique name asked for
    pod: str | None = None  # the pod id (terminate, update)
    replacement_for: str | None = None  # a create that replaces this member
    purpose: Detail = ""  # why, in words: the create's wish, the terminate's reason
    image: str | None = None  # an update's image
    rollback: StrictBool = False  # an update that rolls back

    @property
    def key(self) -> tuple[str, str]:
        """What one intent is about: one per (action, pod or name)."""
        return (self.action, self.pod or self.name)


class Backoff(StatusModel):
    """`status.backoff`: until when creates or image updates wait after a failure."""

    create_until: Timestamp | None = None
    update_until: Timestamp | None = None

    def creates_blocked(self, now: dt.datetime) -> bool:
        return self.create_until is not None and now < self.create_until

    def updates_blocked(self, now: dt.datetime) -> bool:
        return self.update_until is not None and now < self.update_until


class CapacityRefusal(StatusModel):
    """RunPod's last "no stock" answer to a create, and what was asked for."""

    time: Timestamp
    gpu_types: tuple[str, ...] = ()
    cloud: str | None = None
    datacenters: tuple[str, ...] = ()
    message: Message = ""
