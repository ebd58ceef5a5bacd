"""One pool member as persisted in `status.members[]`: the member machine's only memory.

Each loop, decide rehydrates a member's state machine from this record (its `phase` is
the machine's current state), drives it with that loop's observations and writes the
new record back. So everything a rule needs across loops lives here as a timestamp or
a count: when the member entered its phase, when each health rule started breaching,
the probe pass streak, the in-place update in progress, the loops RunPod has not
listed it. Records are frozen; change them with `replace` (the machine works on a
mutable view and hands back a new record).

Storage uses the camelCase keys Kubernetes status uses; reading names the path of any
malformed field (see rpp/model/codec.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated

from pydantic import Field, StrictBool

from rpp.model.codec import SORTED_KEYS, NonNegative, Number, StatusModel, Timestamp, Whole


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
    POOL_DELETED = "pool-deleted"  # the pool is being deleted (deletionPolicy Delete)


class UpdateStep(StrEnum):
    """Where an in-place image update is (`update.step`)."""

    DRAIN = "drain"  # waiting for drain.period before sending the update
    RESTART = "restart"  # UpdatePod sent; waiting for the process to restart and pass


class ProbeRecord(StatusModel):
    """The member's last probe (`lastProbe`), as the prober reported it at `at`."""

    at: Timestamp
    passed: StrictBool = False
    health_ok: StrictBool = False
    metrics_ok: StrictBool = False
    health_latency: Number | None = None
    metrics_latency: Number | None = None
    error: str | None = None
    process_start: Number | None = None  # epoch seconds from the pod's metrics


class UpdateProgress(StatusModel):
    """An in-place image update of this member (`update`), from drain to rewire.

    `process_start_before` is the process start time the pod reported before the
    update was sent: a newer one means RunPod reset the pod (its lastStartedAt does
    not change on a reset). `rollback` is True once the member went back to
    `from_image` after the update failed.
    """

    from_image: str
    to_image: str
    step: UpdateStep = UpdateStep.DRAIN
    started_at: Timestamp | None = None
    process_start_before: Number | None = None
    rollback: StrictBool = False
    refused: str | None = None  # RunPod's words when it refused the last UpdatePod

    @property
    def running_image(self) -> str:
        """The image the member runs once this update (or its rollback) completes."""
        return self.from_image if self.rollback else self.to_image


class Quarantine(StatusModel):
    """Why a Ready member is out of nginx for now (`quarantine`): its probes failed hard.

    It is put back in a free slot once 3 probes in a row pass. The health rules keep
    judging it meanwhile, so it is flagged and replaced on their durations as before.
    """

    since: Timestamp
    reason: str


class MemberRecord(StatusModel):
    """One RunPod pod of the pool, as the pool remembers it between loops."""

    pod_id: str
    name: str
    phase: Phase
    since: Timestamp  # when it entered `phase`
    slot: NonNegative | None = None  # the nginx slot it is wired into; None = not in nginx
    datacenter: str | None = None
    gpu_type: str | None = None
    image: str | None = None
    cost_per_hr: Number | None = None
    created_at: Timestamp | None = None
    last_probe: ProbeRecord | None = None
    pass_streak: Whole = 0
    # probes in a row that failed hard (no answer, a timeout, 404, 502, 503); 0 is left out
    hard_failures: Whole = Field(default=0, exclude_if=lambda count: count == 0)
    quarantine: Quarantine | None = None  # out of nginx since its probes failed hard
    # rule -> breach start; an empty map is left out of storage
    breaches: Annotated[Mapping[str, Timestamp], SORTED_KEYS] = Field(
        default_factory=dict, exclude_if=lambda breaches: not breaches
    )
    flagged_rule: str | None = None
    flagged_reason: str | None = None
    replacement_for: str | None = None  # pod id this member replaces
    replaced_by: str | None = None  # pod id of this member's replacement
    drain_reason: DrainReason | None = None
    update: UpdateProgress | None = None  # required while Updating (checked on read)
    terminate_requested_at: Timestamp | None = None
    terminate_error: str | None = None  # RunPod's words when the last terminate failed
    missing_loops: Whole = 0  # loops in a row RunPod did not list the pod
    adopted: StrictBool = False
    # when RunPod answered 201 for this pod, while its pod list does not show it yet
    # (rpp/decide/capacity/unconfirmed.py); left out once it is listed
    unconfirmed_since: Timestamp | None = Field(default=None, exclude_if=lambda t: t is None)

    @property
    def wired(self) -> bool:
        return self.slot is not None
