"""Which pods a release takes out next: its canary, or the next pods to roll.

Where it sits: decide, the `roll` step of rpp/decide/pool.py (rpp/decide/release/steps.py
calls it). The release machine (rpp/machines/release.py) decides the phase and asks for
a canary or for the next pods; choosing them needs the whole pool, so it is here:

- A canary: the oldest Ready pod on another image, once the pool is otherwise idle and
  healthy with at least 2 Ready pods. "Otherwise idle and healthy": no member warming,
  flagged, draining, updating or terminating, none in breach of a health rule, no
  create wanted, no pool-wide degradation.
- The next pods, oldest first: up to rollout.maxParallel at once. A first pod may always
  go, as the one-at-a-time roll always did (at least 2 Ready); each further one only
  while Ready stays at or above the floor: replicas.min, or more when the autoscaler's
  value says the load needs more, ceil(Ready x value / target), the HPA formula.

A pod RunPod's answer did not read is held (rpp/decide/ledger/unreadable.py): none is
chosen. Each choice comes with why no more pods go (None: nothing holds the roll back).
Pure: a function of the loop's members, spec and status.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass

from rpp.decide.state.loop_state import LoopState
from rpp.machines.release import ReleaseSignals
from rpp.model.members import MemberRecord, Phase
from rpp.model.rollout_records import Rollout

_BUSY = frozenset(
    {Phase.WARMING, Phase.FLAGGED, Phase.DRAINING, Phase.UPDATING, Phase.TERMINATING}
)


def in_release(m: MemberRecord, target: str) -> bool:
    """Draining or updating to `target` (not rolling back from it)."""
    update = m.update
    return (
        m.phase in (Phase.DRAINING, Phase.UPDATING)
        and update is not None
        and update.to_image == target
        and not update.rollback
    )


@dataclass(frozen=True)
class ReleasePods:
    """The pool's members this loop, by their part in the release of `target`."""

    target: str
    live: list[MemberRecord]  # every member not Gone
    updating: list[MemberRecord]  # draining or updating to `target`
    stale: list[MemberRecord]  # Ready, in nginx or quarantined, on another image

    @classmethod
    def of(cls, planned: Sequence[MemberRecord], *, target: str) -> ReleasePods:
        live = [m for m in planned if m.phase != Phase.GONE]
        # A quarantined pod is out of nginx for now, not for good: it still runs its image.
        stale = [
            m
            for m in live
            if m.phase == Phase.READY
            and (m.slot is not None or m.quarantine is not None)
            and m.image
            and m.image != target
        ]
        updating = [m for m in live if in_release(m, target)]
        return cls(target=target, live=live, updating=updating, stale=stale)

    def signals(self, release: Rollout, *, update_until: dt.datetime | None) -> ReleaseSignals:
        """What these pods tell the release machine (rpp/machines/release.py)."""
        canary = next((m for m in self.live if m.pod_id == release.canary), None)
        return ReleaseSignals(
            to_update=len(self.stale),
            in_flight=len(self.updating),
            rolling_back=any(m.update is not None and m.update.rollback for m in self.live),
            canary_updating=canary is not None and canary in self.updating,
            canary_on_image=canary is not None
            and canary.phase == Phase.READY
            and canary.image == self.target,
            update_until=update_until,
        )


def canary(
    loop: LoopState, pods: ReleasePods, *, wants_create: bool, pool_wide: bool
) -> tuple[MemberRecord | None, str | None]:
    """The canary to drain now, or None and why the release waits for one."""
    live, stale = pods.live, pods.stale
    waiting = _not_idle(live, wants_create=wants_create, pool_wide=pool_wide, ours=None)
    ready = _ready(live)
    if waiting is None and ready < 2:
        waiting = f"{ready} Ready pod(s); an in-place roll needs 2"
    held = [m.pod_id for m in stale if m.pod_id in loop.held]
    if waiting is None and len(held) == len(stale):
        waiting = f"RunPod's answer for pod(s) {', '.join(held)} does not read"
    if waiting is not None:
        return None, waiting
    return _oldest([m for m in stale if m.pod_id not in loop.held]), None


def next_pods(
    loop: LoopState, pods: ReleasePods, *, wants_create: bool, pool_wide: bool
) -> tuple[list[MemberRecord], str | None]:
    """The pods to drain now, oldest first, and why no more (None: nothing holds them)."""
    ours = pods.target
    why = _not_idle(pods.live, wants_create=wants_create, pool_wide=pool_wide, ours=ours)
    if why:
        return [], why
    return _parallel(loop, live=pods.live, stale=pods.stale, updating=pods.updating)


def _ready(live: Sequence[MemberRecord]) -> int:
    return sum(1 for m in live if m.phase == Phase.READY and m.slot is not None)


def _oldest(members: Sequence[MemberRecord]) -> MemberRecord:
    return min(members, key=lambda m: (m.created_at or m.since, m.pod_id))


def _not_idle(
    live: Sequence[MemberRecord], *, wants_create: bool, pool_wide: bool, ours: str | None
) -> str | None:
    """Why the pool is not idle and healthy enough to take one more pod out, if it is not.

    Pods already updating for this release (`ours`) do not count as busy."""
    busy = sorted(
        {str(m.phase) for m in live if m.phase in _BUSY and not (ours and in_release(m, ours))}
    )
    breaching = sorted(m.pod_id for m in live if m.breaches)
    if breaching:
        busy.append(f"pods in breach of a health rule: {', '.join(breaching)}")
    if busy or wants_create:
        return "the pool is busy (" + ", ".join(busy or ["a create is pending"]) + ")"
    if pool_wide:
        return "every Ready pod is degraded"
    return None


def _parallel(
    loop: LoopState,
    *,
    live: Sequence[MemberRecord],
    stale: Sequence[MemberRecord],
    updating: Sequence[MemberRecord],
) -> tuple[list[MemberRecord], str | None]:
    """The stale pods to drain now, oldest first, and why no more (None: none left)."""
    spec = loop.spec
    ready = _ready(live)
    floor, why_floor = _floor(loop, ready=ready)
    chosen: list[MemberRecord] = []
    in_flight = len(updating)
    movable = [m for m in stale if m.pod_id not in loop.held]
    if not movable:
        held = ", ".join(m.pod_id for m in stale)
        return [], f"RunPod's answer for pod(s) {held} does not read"
    for m in sorted(movable, key=lambda m: (m.created_at or m.since, m.pod_id)):
        if in_flight >= spec.rollout.max_parallel:
            return chosen, None
        if in_flight == 0 and ready < 2:
            return chosen, f"{ready} Ready pod(s); an in-place roll needs 2"
        if in_flight > 0 and ready - 1 < floor:
            return chosen, (
                f"{in_flight} pod(s) update now; one more would leave {ready - 1} Ready, "
                f"below {floor} ({why_floor})"
            )
        chosen.append(m)
        ready -= 1
        in_flight += 1
    return chosen, None


def _floor(loop: LoopState, *, ready: int) -> tuple[int, str]:
    """The Ready count a parallel roll keeps: replicas.min, or what the load needs."""
    spec = loop.spec
    floor, why = spec.replicas.min, f"replicas.min is {spec.replicas.min}"
    scaling = loop.status.current.autoscaling
    if spec.autoscaling.enabled and scaling is not None and scaling.value is not None:
        needed = math.ceil(ready * scaling.value / spec.autoscaling.target)
        if needed > floor:
            floor = needed
            why = (
                f"the load needs {needed}: ceil({ready} Ready x {scaling.value:g} / "
                f"target {spec.autoscaling.target:g})"
            )
    return floor, why
