"""What one loop tells one member's machine, and the bookkeeping done before it runs.

The pool builds one `MemberSignals` per member per loop from its observations (the
RunPod listing, this member's probe, the health rules' verdicts) and from its own
pool-wide view (is this the last wired pod, is degradation pool-wide, which slot is
free). The health rules themselves are judged in rpp/decide/health/ (one file per rule);
the machine only reads their verdict. Its guards read only these signals, the member record and
`now`, so they are pure.

`refresh` is the bookkeeping that turns this loop's facts into the record's memory
before the machine decides anything: the probe pass streak, the probes in a row that
failed hard (quarantine), the health rules' breach starts, the loops in a row RunPod
did not list the pod, and the fields RunPod reports (image, cost, datacenter), unless
RunPod's answer for the pod did not read, or its whole listing did not (`listing=False`:
only the probe is folded in).
Each call is one loop: the driver (rpp/machines/member_step.py `observe`) calls it
once before the machine runs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from rpp.machines import rollout
from rpp.model.codec import stamp
from rpp.model.members import MemberRecord, ProbeRecord
from rpp.model.observations import ProbeResult, RunPodPod

# The rule that also unwires at once (rpp/decide/health/rules/unreachable.py).
UNREACHABLE = "Unreachable"


@dataclass(frozen=True, kw_only=True)
class MemberSettings:
    """The durations and counts the member guards need, from the pool spec (seconds).

    `update_timeout_s` bounds how long an in-place update (or its rollback) may take to
    restart and pass probes; the spec has no field for it, so the pool passes
    health.warmupTimeout, the same budget a new pod gets. `canary_bake_s` is
    rollout.canary.bake, named in the Event of a canary that starts baking.
    """

    warmup_timeout_s: float = 900.0
    drain_period_s: float = 150.0
    update_timeout_s: float = 900.0
    canary_bake_s: float = 600.0
    terminate_retry_s: float = 300.0
    passes_needed: int = 3
    missing_loops_to_gone: int = 2
    hard_failures_to_quarantine: int = 2

    def __post_init__(self) -> None:
        for name in (
            "warmup_timeout_s",
            "drain_period_s",
            "update_timeout_s",
            "canary_bake_s",
            "terminate_retry_s",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"MemberSettings.{name} must be 0 or more")
        counts = ("passes_needed", "missing_loops_to_gone", "hard_failures_to_quarantine")
        if any(getattr(self, name) < 1 for name in counts):
            raise ValueError(f"MemberSettings {', '.join(counts)} must be >= 1")


class MemberSignals(NamedTuple):
    """One loop's facts about one member, as its machine's guards read them.

    `pod` is the pod as RunPod listed it this loop, None when the listing (which
    succeeded: drive members only after a successful list) did not contain it.
    `breaches`, `flagged` and `reasons` are the health rules' verdict for this member
    (rpp/decide/health/pool_wide.py `MemberHealth`): the breach start of each rule in breach,
    the rules breached for their full duration (first one named when flagging), and
    a human reason per rule; `breaches=None` means not judged this loop, and the record
    keeps its breach starts. `pool_wide` is PoolWideDegradation.
    `last_wired` is True when this member is the only wired pod left: the pool
    recomputes it after each member it drives, so two unreachable pods are never
    both unwired in one loop. `network_ok` is True when this loop shows the controller's
    own network works: RunPod's pod list was read, or another pod of the pool passed its
    probe; the last wired pod and a pool-wide one are kept in nginx only without it
    (rpp/machines/member.py `blind`). `offered_slot` is a free slot the pool offers to this
    member if it is ready to be wired (None: no slot free, or not this member's turn).
    `update_refused` is True when RunPod refused this member's last UpdatePod.
    `canary` is True for the release's canary (status.rollout.canary) while it is put on
    the new image; `canary_failure` is the verdict's message once its bake failed, and
    `rollback_to` the image it goes back to (rpp/decide/release/steps.py sets all three).
    `unconfirmed` names a terminate or update of this member that a loop wrote down
    and never saw answered (it stopped in between): it is sent again
    (rpp/decide/ledger/intents.py).

    A named tuple, not a frozen dataclass: as immutable, and the pool builds one per
    member per loop, where a frozen dataclass's construction was a tenth of a quiet loop.
    Build it with keywords.
    """

    settings: MemberSettings
    pod: RunPodPod | None
    probe: ProbeResult | None = None
    breaches: Mapping[str, dt.datetime] | None = None
    flagged: tuple[str, ...] = ()
    reasons: Mapping[str, str] = MappingProxyType({})
    pool_wide: bool = False
    last_wired: bool = False
    network_ok: bool = False
    offered_slot: int | None = None
    update_refused: bool = False
    canary: bool = False
    canary_failure: str | None = None
    rollback_to: str | None = None
    unconfirmed: str | None = None

    @property
    def listed(self) -> bool:
        return self.pod is not None


def fails_hard(record: MemberRecord, settings: MemberSettings) -> bool:
    """Its last probes failed hard, as many as quarantine needs: nginx cannot use it."""
    return record.hard_failures >= settings.hard_failures_to_quarantine


def down(record: MemberRecord, settings: MemberSettings) -> bool:
    """Dead or hung as far as the pool can tell: its probes fail hard, or it was flagged
    for Unreachable and is still in breach of it. Such a pod serves nobody, so it never
    counts as serving: not for Ready, not for "enough pods serve", not as the pod that
    keeps its replacement waiting (rpp/decide/capacity/sizing.py, rpp/decide/steps.py)."""
    return fails_hard(record, settings) or (
        record.flagged_rule == UNREACHABLE and UNREACHABLE in record.breaches
    )


def refresh(
    record: MemberRecord, signals: MemberSignals, now: dt.datetime, *, listing: bool = True
) -> MemberRecord:
    """The record with this loop's facts folded in (no phase change, no effects).

    `listing=False`: RunPod's listing could not be read this loop, so `signals.pod` is
    no news: the missing loops and the fields RunPod reports stay as they were.
    """
    # What this loop counted: whole numbers from the record's own, and a probe record
    # built (so validated) right here. Neither needs validating again.
    counted: dict[str, object] = {}
    # What RunPod and the health rules report: usually the record's values already.
    reported: dict[str, object] = {}
    pod = signals.pod
    if not listing:
        pass
    elif pod is None:
        counted["missing_loops"] = record.missing_loops + 1
    elif pod.unreadable is not None:
        counted["missing_loops"] = 0  # listed, but what RunPod said of it does not read
    else:
        counted["missing_loops"] = 0
        reported["image"] = pod.image or record.image
        reported["cost_per_hr"] = pod.cost_per_hr
        reported["datacenter"] = pod.datacenter or record.datacenter
        reported["gpu_type"] = pod.gpu_type or record.gpu_type
        reported["created_at"] = pod.created_at or record.created_at
    probe = signals.probe
    if probe is not None:
        counts = rollout.pass_counts(
            record, passed=probe.passed, process_start=probe.process_start
        )
        counted["pass_streak"] = record.pass_streak + 1 if counts else 0
        hard = probe.hard_failures
        counted["hard_failures"] = record.hard_failures + hard if hard else 0
        counted["last_probe"] = ProbeRecord(
            at=stamp(now),
            passed=probe.passed,
            health_ok=probe.health_ok,
            metrics_ok=probe.metrics_ok,
            health_latency=probe.health_latency_s,
            metrics_latency=probe.metrics_latency_s,
            error=probe.error,
            process_start=probe.process_start,
        )
    if signals.breaches is not None:
        reported["breaches"] = dict(signals.breaches)
    if all(getattr(record, name) == value for name, value in reported.items()):
        # A quiet loop: nothing new to validate, so the counts go into a copy (a full
        # `replace` validates every field again, twice this function's cost).
        return record.model_copy(update=counted)
    return record.replace(**counted, **reported)
