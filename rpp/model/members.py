"""One pool member as persisted in `status.members[]`: the member machine's only memory.

Each loop, decide rehydrates a member's state machine from this record (its `phase` is
the machine's current state), drives it with that loop's observations and writes the
new record back. So everything a rule needs across loops lives here as a timestamp or
a count: when the member entered its phase, when each health rule started breaching,
the probe pass streak, the in-place update in progress, the loops RunPod has not
listed it. Records are frozen; change them with `dataclasses.replace` (the machine
works on a mutable view and hands back a new record).

Storage uses the camelCase keys Kubernetes status uses; `from_storage` names the path
of any malformed field (see rpp/model/codec.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from rpp.model.codec import (
    Fields,
    StatusFormatError,
    drop_none,
    opt_stamp,
    parse_time,
    stamp,
    write_time,
)


class Phase(StrEnum):
    """The member machine's states, exactly as persisted in `status.members[].phase`."""

    WARMING = "Warming"
    READY = "Ready"
    FLAGGED = "Flagged"
    DRAINING = "Draining"
    UPDATING = "Updating"
    TERMINATING = "Terminating"
    GONE = "Gone"


PHASES: tuple[str, ...] = tuple(phase.value for phase in Phase)


class DrainReason(StrEnum):
    """Why a member was taken out of nginx (`drainReason`)."""

    REPLACE = "replace"  # its replacement is wired (it was Flagged)
    UPDATE = "update"  # in-place image update follows the drain
    SCALE_DOWN = "scale-down"  # the pool shrinks


class UpdateStep(StrEnum):
    """Where an in-place image update is (`update.step`)."""

    DRAIN = "drain"  # waiting for drain.period before sending the update
    RESTART = "restart"  # UpdatePod sent; waiting for the process to restart and pass


def _freeze_times(obj: object, *names: str) -> None:
    """Normalize timestamp fields of a frozen dataclass to stored precision."""
    for name in names:
        object.__setattr__(obj, name, opt_stamp(getattr(obj, name)))


@dataclass(frozen=True, kw_only=True)
class ProbeRecord:
    """The member's last probe (`lastProbe`), as the prober reported it at `at`."""

    at: dt.datetime
    passed: bool
    health_ok: bool
    metrics_ok: bool
    health_latency: float | None = None
    metrics_latency: float | None = None
    error: str | None = None
    process_start: float | None = None  # epoch seconds from the pod's metrics

    def __post_init__(self) -> None:
        _freeze_times(self, "at")

    def for_storage(self) -> dict[str, Any]:
        return drop_none(
            {
                "at": write_time(self.at),
                "passed": self.passed,
                "healthOk": self.health_ok,
                "metricsOk": self.metrics_ok,
                "healthLatency": self.health_latency,
                "metricsLatency": self.metrics_latency,
                "error": self.error,
                "processStart": self.process_start,
            }
        )

    @classmethod
    def from_storage(cls, data: object, path: str) -> ProbeRecord:
        f = Fields(data, path)
        return cls(
            at=f.time("at"),
            passed=f.flag("passed"),
            health_ok=f.flag("healthOk"),
            metrics_ok=f.flag("metricsOk"),
            health_latency=f.opt_number("healthLatency"),
            metrics_latency=f.opt_number("metricsLatency"),
            error=f.opt_text("error"),
            process_start=f.opt_number("processStart"),
        )


@dataclass(frozen=True, kw_only=True)
class UpdateProgress:
    """An in-place image update of this member (`update`), from drain to rewire.

    `process_start_before` is the process start time the pod reported before the
    update was sent: a newer one means RunPod reset the pod (its lastStartedAt does
    not change on a reset). `rollback` is True once the member went back to
    `from_image` after the update failed.
    """

    from_image: str
    to_image: str
    step: str = UpdateStep.DRAIN.value
    started_at: dt.datetime | None = None
    process_start_before: float | None = None
    rollback: bool = False
    refused: str | None = None  # RunPod's words when it refused the last UpdatePod

    def __post_init__(self) -> None:
        _freeze_times(self, "started_at")

    @property
    def running_image(self) -> str:
        """The image the member runs once this update (or its rollback) completes."""
        return self.from_image if self.rollback else self.to_image

    def for_storage(self) -> dict[str, Any]:
        return drop_none(
            {
                "fromImage": self.from_image,
                "toImage": self.to_image,
                "step": self.step,
                "startedAt": write_time(self.started_at),
                "processStartBefore": self.process_start_before,
                "rollback": self.rollback,
                "refused": self.refused,
            }
        )

    @classmethod
    def from_storage(cls, data: object, path: str) -> UpdateProgress:
        f = Fields(data, path)
        return cls(
            from_image=f.text("fromImage"),
            to_image=f.text("toImage"),
            step=f.choice("step", tuple(UpdateStep), default=UpdateStep.DRAIN.value),
            started_at=f.opt_time("startedAt"),
            process_start_before=f.opt_number("processStartBefore"),
            rollback=f.flag("rollback"),
            refused=f.opt_text("refused"),
        )


@dataclass(frozen=True, kw_only=True)
class MemberRecord:
    """One RunPod pod of the pool, as the pool remembers it between loops."""

    pod_id: str
    name: str
    phase: str
    since: dt.datetime  # when it entered `phase`
    slot: int | None = None  # the nginx slot it is wired into; None = not in nginx
    datacenter: str | None = None
    gpu_type: str | None = None
    image: str | None = None
    cost_per_hr: float | None = None
    created_at: dt.datetime | None = None
    last_probe: ProbeRecord | None = None
    pass_streak: int = 0
    breaches: Mapping[str, dt.datetime] = field(default_factory=dict)  # rule -> breach start
    flagged_rule: str | None = None
    flagged_reason: str | None = None
    replacement_for: str | None = None  # pod id this member replaces
    replaced_by: str | None = None  # pod id of this member's replacement
    drain_reason: str | None = None
    update: UpdateProgress | None = None
    terminate_requested_at: dt.datetime | None = None
    missing_loops: int = 0  # loops in a row RunPod did not list the pod
    adopted: bool = False

    def __post_init__(self) -> None:
        _freeze_times(self, "since", "created_at", "terminate_requested_at")
        object.__setattr__(
            self, "breaches", {rule: stamp(start) for rule, start in self.breaches.items()}
        )

    @property
    def wired(self) -> bool:
        return self.slot is not None

    def replace(self, **changes: Any) -> MemberRecord:
        return dataclasses.replace(self, **changes)

    def for_storage(self) -> dict[str, Any]:
        return drop_none(
            {
                "podId": self.pod_id,
                "name": self.name,
                "phase": self.phase,
                "since": write_time(self.since),
                "slot": self.slot,
                "datacenter": self.datacenter,
                "gpuType": self.gpu_type,
                "image": self.image,
                "costPerHr": self.cost_per_hr,
                "createdAt": write_time(self.created_at),
                "lastProbe": None if self.last_probe is None else self.last_probe.for_storage(),
                "passStreak": self.pass_streak,
                "breaches": {
                    rule: write_time(start) for rule, start in sorted(self.breaches.items())
                }
                or None,
                "flaggedRule": self.flagged_rule,
                "flaggedReason": self.flagged_reason,
                "replacementFor": self.replacement_for,
                "replacedBy": self.replaced_by,
                "drainReason": self.drain_reason,
                "update": None if self.update is None else self.update.for_storage(),
                "terminateRequestedAt": write_time(self.terminate_requested_at),
                "missingLoops": self.missing_loops,
                "adopted": self.adopted,
            }
        )

    @classmethod
    def from_storage(cls, data: object, path: str) -> MemberRecord:
        f = Fields(data, path)
        slot = f.opt_integer("slot")
        if slot is not None and slot < 0:
            raise StatusFormatError(f.at("slot"), f"a slot is 0 or more, got {slot}")
        drain_reason = f.opt_text("drainReason")
        if drain_reason is not None and drain_reason not in tuple(DrainReason):
            raise StatusFormatError(
                f.at("drainReason"),
                f"unknown value {drain_reason!r}; expected one of {', '.join(DrainReason)}",
            )
        phase = f.choice("phase", PHASES)
        update = f.nested("update", UpdateProgress.from_storage)
        if phase == Phase.UPDATING and update is None:
            raise StatusFormatError(f.at("update"), "required while phase is Updating")
        return cls(
            pod_id=f.text("podId"),
            name=f.text("name"),
            phase=phase,
            since=f.time("since"),
            slot=slot,
            datacenter=f.opt_text("datacenter"),
            gpu_type=f.opt_text("gpuType"),
            image=f.opt_text("image"),
            cost_per_hr=f.opt_number("costPerHr"),
            created_at=f.opt_time("createdAt"),
            last_probe=f.nested("lastProbe", ProbeRecord.from_storage),
            pass_streak=f.integer("passStreak"),
            breaches={
                rule: parse_time(start, path) for rule, start, path in f.entries("breaches")
            },
            flagged_rule=f.opt_text("flaggedRule"),
            flagged_reason=f.opt_text("flaggedReason"),
            replacement_for=f.opt_text("replacementFor"),
            replaced_by=f.opt_text("replacedBy"),
            drain_reason=drain_reason,
            update=update,
            terminate_requested_at=f.opt_time("terminateRequestedAt"),
            missing_loops=f.integer("missingLoops"),
            adopted=f.flag("adopted"),
        )
