"""Pool step 6: the rolling image update, in place, one pod at a time.

Where it sits: decide, after replacements and creates. When a Ready pod runs another
image than spec.image, and the pool is otherwise idle and healthy with at least 2
Ready pods, the oldest such pod is drained for an update. Its member machine does the
rest (rpp/machines/member.py): after drain.period it sends UpdatePod (same machine,
same GPU, so no free stock is needed), waits for its process to restart (read from
its own metrics: RunPod's timestamps do not move on a reset) and 3 passing probes,
then wires it again; a refused or unhealthy update is rolled back to the old image and
image updates pause for 30 minutes (status.backoff.updateUntil).

"Otherwise idle and healthy" means: no member is warming, flagged, draining,
updating or terminating, no member is in breach of a health rule, the pool wants no
create, nothing is pool-wide degraded, and the update backoff is over. Replacements
and missing replicas therefore always go first, and a pod going bad mid-roll pauses
it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from rpp.model.members import DrainReason, MemberRecord, Phase
from rpp.model.records import Rollout

_BUSY = frozenset(
    {Phase.WARMING, Phase.FLAGGED, Phase.DRAINING, Phase.UPDATING, Phase.TERMINATING}
)


@dataclass(frozen=True)
class RollStep:
    """This loop's rollout: the member to drain (or None) and why the roll waits."""

    drain: MemberRecord | None
    waiting: str | None
    progress: Rollout | None


def _in_update(m: MemberRecord) -> bool:
    return m.phase == Phase.UPDATING or (
        m.phase == Phase.DRAINING and m.drain_reason == DrainReason.UPDATE
    )


def plan_roll(
    *,
    image: str | None,
    members: Sequence[MemberRecord],
    wants_create: bool,
    pool_wide: bool,
    update_until: dt.datetime | None,
    now: dt.datetime,
) -> RollStep:
    """Which Ready member starts its in-place update this loop, if any."""
    if not image:
        return RollStep(None, None, None)
    live = [m for m in members if m.phase != Phase.GONE]
    current = [m for m in live if _in_update(m)]
    stale = [m for m in live if m.phase == Phase.READY and m.image and m.image != image]
    # RunPod reports the new image as soon as the PATCH lands; the pod counts as
    # updated once it is back in service on it.
    updated = sum(1 for m in live if m.image == image and not _in_update(m))
    if current:
        pod = current[0]
        step = (
            "drain"
            if pod.phase == Phase.DRAINING
            else (pod.update.step if pod.update else "restart")
        )
        if pod.update and pod.update.rollback:
            step = "rollback"
        progress = Rollout(updated=updated, total=len(live), pod=pod.pod_id, step=step)
        return RollStep(None, None, progress)
    if not stale:
        return RollStep(None, None, None)
    progress = Rollout(updated=updated, total=len(live))
    ready = [m for m in live if m.phase == Phase.READY and m.slot is not None]
    if update_until is not None and now < update_until:
        why = f"image updates are paused after a failed update until {update_until:%H:%M:%SZ}"
        return RollStep(None, why, progress)
    busy = sorted({str(m.phase) for m in live if m.phase in _BUSY})
    breaching = sorted(m.pod_id for m in live if m.breaches)
    if breaching:
        busy.append(f"pods in breach of a health rule: {', '.join(breaching)}")
    if busy or wants_create:
        why = "the pool is busy (" + ", ".join(busy or ["a create is pending"]) + ")"
        return RollStep(None, why, progress)
    if pool_wide:
        return RollStep(None, "every Ready pod is degraded", progress)
    if len(ready) < 2:
        return RollStep(None, f"{len(ready)} Ready pod(s); an in-place roll needs 2", progress)
    oldest = min(stale, key=lambda m: (m.created_at or m.since, m.pod_id))
    return RollStep(oldest, None, progress)
