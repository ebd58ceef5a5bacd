"""`status.rollout`: the release of a new image, as the pool remembers it between loops.

Where it sits: the model layer, composed into `PoolStatus` (rpp/model/status.py). Decide
writes it (rpp/decide/release/steps.py plans the release, rpp/decide/release/canary.py judges the
canary's bake) and reads it back the next loop, so a restarted controller carries on a
bake, a passed canary or a rejected image from status alone. `kubectl get rpp` shows
`phase` in its Rollout column; `verdict` carries the numbers a human needs to agree
or disagree with the controller.

A release goes Canary -> Baking -> Rolling -> Done; a canary that fails its bake goes
to RolledBack and stays there (its image is not tried again) until spec.image changes.
A pod whose update does not start in time is rolled back too, and the release retries
once the update backoff is over.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from rpp.model.codec import Number, StatusModel, Timestamp, Whole
from rpp.model.records import Message


class RolloutPhase(StrEnum):
    """Where the release of spec.image is (`status.rollout.phase`)."""

    CANARY = "Canary"  # the canary is drained and updated in place
    BAKING = "Baking"  # the canary serves on the new image and is judged against its peers
    ROLLING = "Rolling"  # the canary passed (or was skipped): the other pods follow
    ROLLED_BACK = "RolledBack"  # a pod went back to the old image: its canary or update failed
    DONE = "Done"  # every pod runs spec.image


class VerdictResult(StrEnum):
    """The canary's verdict so far (`status.rollout.verdict.result`)."""

    BAKING = "Baking"  # the bake is not over
    WAITING = "WaitingForRequests"  # the bake is over but the canary served too few requests
    PASSED = "Passed"
    FAILED = "Failed"
    SKIPPED = "Skipped"  # rollout.canary.enabled is false


JudgedBy = Literal["metrics", "probes"]


class BakeTally(StatusModel):
    """What the canary's bake saw so far, as running sums over the loops of its window.

    Each loop with data adds the canary's value and its peers' (the Ready pods still on
    the old image) for the same instant: for the error ratio the peers' mean, for the
    latency their median. Comparing the sums compares both sides over the same
    window, so a load change that hits every pod alike changes both sides alike.
    Requests are rates times the time since the last loop; None while not counted
    (no prometheus.requestRateQuery, or no answer for it).
    """

    started_at: Timestamp
    last_at: Timestamp | None = None
    error_loops: Whole = 0
    canary_error_sum: Number = 0.0
    peers_error_sum: Number = 0.0
    latency_loops: Whole = 0
    canary_latency_sum: Number = 0.0
    peers_latency_sum: Number = 0.0
    canary_requests: Number | None = None
    peers_requests: Number | None = None
    peers: Whole = 0  # the most old-image pods compared in one loop


class Side(StatusModel):
    """One side of the canary's comparison over the bake's window."""

    error_ratio: Number | None = None
    latency: Number | None = None  # seconds
    requests: Number | None = None  # None: not counted


class Verdict(StatusModel):
    """The canary's verdict and the numbers behind it (`status.rollout.verdict`)."""

    result: VerdictResult
    judged_by: JudgedBy = "metrics"
    message: Message = ""
    window: Number = 0  # seconds of bake the numbers cover
    canary: Side | None = None
    peers: Side | None = None  # the pods still on the old image


class Rollout(StatusModel):
    """`status.rollout`: the release of `image`, from its canary to the last pod."""

    image: str | None = None
    from_image: str | None = None  # what the canary ran before: a rollback goes back to it
    phase: RolloutPhase = RolloutPhase.ROLLING
    canary: str | None = None  # the canary's pod id
    bake: BakeTally | None = None
    verdict: Verdict | None = None
    updated: Whole = 0  # pods back in service on `image`
    total: Whole = 0
    updating: tuple[str, ...] = ()  # pods draining or updating for this release now
    waiting: Message | None = None  # why no further pod is updated this loop
