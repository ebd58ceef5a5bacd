"""Reconciling and Stalled: whether the pool is still on its way to its spec, or stuck.

Where it sits: decide, at the end of every loop beside Ready (rpp/decide/pool.py's
`_finish`; rpp/controller/reconcile.py for a spec that does not load). kstatus, what
Flux's `wait: true`, cli-utils and kpt judge a custom resource by, reads
`status.observedGeneration` and these two conditions before it looks at Ready
(cli-utils pkg/kstatus/status/generic.go, `checkGenericProperties`): Reconciling True is
InProgress, Stalled True is Failed, and only with neither True does a Ready True make the
pool Current. So the pool says, on every status it writes:

- Stalled True when it cannot reach its spec until a person acts: the spec is invalid, a
  canary failed (its image is not tried again), a cap (maxPods, the cost cap,
  maxCreatesPerHour, no datacenter left) blocks a create it needs and no pod is on its
  way out to make room, its deletion is blocked, RunPod refuses the controller's key
  (NotActing RunPodKeyRefused: no retry fixes a key), or a cause that often passes by
  itself (NotActing otherwise: RunPod or the API server unreachable; CapacityUnavailable:
  no stock) has lasted `STALL_AFTER`. Its reason is the condition that stalls it, its message that
  condition's.
- Reconciling True, when not Stalled, while the pool is on its way: pods to create,
  warm, wire, replace, drain, update or terminate, a release under way, a create
  waiting for its backoff or for a leaving pod's room, PoolWideDegradation's bounded
  hold, the pool being deleted, or one of
  the passing causes above within `STALL_AFTER`.
- both False otherwise: in Manage the pool has its desired pods Ready and in nginx and
  nothing in progress; DryRun and Observe carry nothing out, so there is nothing to wait
  for (as Ready says, the controller plans or observes).

Never both True (kstatus takes whichever comes first in the list). Neither is a problem
of its own: each restates Ready and the conditions below it for the tools that read
kstatus, so neither is in runpod_pool_condition nor makes an Event
(rpp/decide/state/conditions.py).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass

from rpp.decide.release.steps import CANARY_FAILED
from rpp.decide.state.conditions import RECONCILING, STALLED, Cond, Conditions
from rpp.model.members import Phase
from rpp.model.records import Condition
from rpp.model.rollout_records import RolloutPhase
from rpp.model.spec import Mode
from rpp.model.status import PoolStatus

STALL_AFTER = dt.timedelta(minutes=10)
"""How long NotActing or CapacityUnavailable holds before the pool counts as Stalled. A
RunPod or API server blip, or stock coming back at the next create (5 minutes after a
refusal), clears before; what is still there is usually a key, a Secret, a permission
or a choice of GPUs that a person has to change."""

_AT_ONCE = frozenset({"RunPodKeyRefused"})
"""NotActing reasons that wait for a person from the first loop: RunPod refused the key,
and only a new key (in the Secret) changes that."""
_CAPS = frozenset({"MaxPodsReached", "CostCapReached", "CreateRateLimited", "NoDatacenter"})
"""CreateBlocked reasons that only a person lifts (rpp/decide/capacity/safeguards.py, capacity.py).
CreateBackoff is not one: creates resume 5 minutes after a failed one."""
_ROOM = frozenset({"MaxPodsReached", "CostCapReached", "NoDatacenter"})
"""The caps a pod on its way out makes room under (fewer pods, less cost, a datacenter)."""
_LEAVING = frozenset({Phase.DRAINING, Phase.TERMINATING})
_ROLLING = frozenset({RolloutPhase.CANARY, RolloutPhase.BAKING, RolloutPhase.ROLLING})


@dataclass(frozen=True)
class Verdict:
    """One of the two conditions as decide sets it."""

    true: bool
    reason: str
    message: str


SEE_STALLED = Verdict(False, "Stalled", "see Stalled: the pool waits for a person")
"""Reconciling while the pool is Stalled (never both True)."""


def progress(
    status: PoolStatus, *, mode: Mode, deleting: bool, now: dt.datetime
) -> tuple[Verdict, Verdict]:
    """Reconciling and Stalled from this loop's status (its other conditions, members,
    rollout, ready and desired), as the module docstring says."""
    stall = _stall(status, mode=mode, deleting=deleting, now=now)
    if stall is not None:
        return SEE_STALLED, Verdict(True, stall.type, stall.message)
    not_stalled = Verdict(False, "NotStalled", "nothing the pool needs waits for a person")
    work = _work(status, mode=mode, deleting=deleting)
    if work is not None:
        return Verdict(True, *work), not_stalled
    if mode is Mode.MANAGE:
        done = (
            f"the pool has reached its spec: {status.ready} of {status.desired} desired "
            "pod(s) are Ready and in nginx, and nothing is in progress"
        )
        return Verdict(False, "Reconciled", done), not_stalled
    idle = f"{mode.value}: the controller carries nothing out, so nothing is in progress"
    return Verdict(False, mode.value, idle), not_stalled


def set_progress(conds: Conditions, *, mode: Mode, deleting: bool) -> None:
    """Set both on `conds` (after Ready: they read the same conditions)."""
    reconciling, stalled = progress(
        conds.working.current, mode=mode, deleting=deleting, now=conds.now
    )
    for kind, verdict in ((RECONCILING, reconciling), (STALLED, stalled)):
        conds.working.set_condition(
            type=kind,
            status="True" if verdict.true else "False",
            reason=verdict.reason,
            message=verdict.message,
            now=conds.now,
            generation=conds.generation,
        )


def _true(status: PoolStatus, cond: Cond) -> Condition | None:
    found = status.condition(cond.value)
    return found if found is not None and found.status == "True" else None


def _lasted(cond: Condition | None, now: dt.datetime) -> bool:
    return cond is not None and now - cond.last_transition_time >= STALL_AFTER


def _stall(
    status: PoolStatus, *, mode: Mode, deleting: bool, now: dt.datetime
) -> Condition | None:
    """The condition that keeps the pool from its spec until a person acts, if any."""
    invalid = _true(status, Cond.INVALID_SPEC)
    if invalid is not None:
        return invalid
    not_acting = _true(status, Cond.NOT_ACTING)
    if not_acting is not None and (not_acting.reason in _AT_ONCE or _lasted(not_acting, now)):
        return not_acting
    if deleting:
        return _true(status, Cond.DELETION_BLOCKED)
    if mode is not Mode.MANAGE or not_acting is not None:
        return None
    failed = _true(status, Cond.UPDATE_FAILED)
    if failed is not None and failed.reason == CANARY_FAILED:
        return failed
    stock = _true(status, Cond.CAPACITY_UNAVAILABLE)
    if _lasted(stock, now):
        return stock
    blocked = _true(status, Cond.CREATE_BLOCKED)
    if blocked is not None and blocked.reason in _CAPS and not _room_coming(status, blocked):
        return blocked
    return None


def _room_coming(status: PoolStatus, blocked: Condition) -> bool:
    """A pod on its way out will make room under this cap."""
    return blocked.reason in _ROOM and any(m.phase in _LEAVING for m in status.members)


def _work(status: PoolStatus, *, mode: Mode, deleting: bool) -> tuple[str, str] | None:
    """What the pool is still doing to reach its spec (reason, message), if anything."""
    not_acting = _true(status, Cond.NOT_ACTING)
    if not_acting is not None:
        return not_acting.type, not_acting.message
    if deleting:
        progress = status.condition(Cond.DELETION_BLOCKED.value)
        return "Deleting", progress.message if progress else "the pool is being deleted"
    if mode is not Mode.MANAGE:
        return None
    # PoolWideDegradation is a bounded wait (health.poolWideHold), never a stall.
    for cond in (
        Cond.POOL_WIDE,
        Cond.CAPACITY_UNAVAILABLE,
        Cond.CREATE_BLOCKED,
        Cond.UPDATE_FAILED,
    ):
        waiting = _true(status, cond)
        if waiting is not None:
            return waiting.type, waiting.message
    release = status.rollout
    if release is not None and release.phase in _ROLLING:
        said = f": {release.waiting}" if release.waiting else ""
        return "RollingOut", f"the release of {release.image} is in {release.phase.value}{said}"
    counted = f"{status.ready} of {status.desired} desired pod(s) are Ready and in nginx"
    if status.ready < status.desired:
        return "PodsNotReady", counted
    moving = Counter(
        "out of nginx" if m.phase is Phase.READY else m.phase.value
        for m in status.members
        if m.phase is not Phase.READY or m.slot is None
    )
    creating = len(status.pending_creates())
    if moving or creating:
        parts = [f"{n} {phase}" for phase, n in sorted(moving.items())]
        parts += [f"{creating} being created"] if creating else []
        return "PodsChanging", f"{counted}; pods on their way: {', '.join(parts)}"
    if len(status.members) > status.desired:
        return "ScalingDown", f"{counted}; {len(status.members)} pod(s), more than desired"
    return None
