"""The rolling image update and its rollback: the whole policy, in one place.

Where it sits: beside the member machine (rpp/machines/member.py), which carries each
pod through the update; the machine's update guards, the pool's rollout step
(rpp/decide/steps.py `roll`), the fold after act (rpp/decide/fold.py) and the
UpdateFailed condition all ask this module. Pure: no I/O, no clock.

1. When a roll starts (`plan_roll`, pool step 6). When a Ready pod runs another image
   than spec.image, and the pool is otherwise idle and healthy with at least 2 Ready
   pods, the oldest such pod is drained for an update, one pod at a time. "Otherwise
   idle and healthy" means: no member is warming, flagged, draining, updating or
   terminating, no member is in breach of a health rule, the pool wants no create,
   nothing is pool-wide degraded, and the update backoff is over. Replacements and
   missing replicas therefore always go first, and a pod going bad mid-roll pauses it.
2. How one pod updates (the machine's guards). After drain.period it gets UpdatePod
   (same machine, same GPU, so no free stock is needed). It is back in service once
   its process restarted (read from its own metrics: RunPod's timestamps do not move
   on a reset; passes of the old process do not count) and it passed 3 probes in a
   row; then it is wired again.
3. When an update fails. RunPod refused it, or it did not restart and pass within the
   update timeout (health.warmupTimeout): the pod is rolled back to its old image,
   which needs only passing probes. A rollback that does not pass in time either is
   terminated (its datacenter cools down), and the pool replaces it.
4. The backoff. Once a rollback is sent, image updates pause for `UPDATE_BACKOFF`
   (status.backoff.updateUntil), and UpdateFailed says why until it is over.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from rpp.model.effects import UpdatePod
from rpp.model.members import DrainReason, MemberRecord, Phase, UpdateStep
from rpp.model.records import Rollout
from rpp.model.results import EffectResult, Result
from rpp.model.status import PoolStatus

UPDATE_BACKOFF = dt.timedelta(minutes=30)
"""How long image updates pause after a rollback was sent."""

# --- when a roll starts: pool step 6 ------------------------------------------------

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


# --- how one pod updates: the member machine's update guards -------------------------


def _elapsed(since: dt.datetime | None, now: dt.datetime) -> float:
    return 0.0 if since is None else (now - since).total_seconds()


def restarted_since_update(record: MemberRecord, process_start: float | None) -> bool:
    """The pod reports a process newer than the one running when the update was sent."""
    update = record.update
    if update is None or process_start is None:
        return False
    before = update.process_start_before
    return before is None or process_start > before


def pass_counts(record: MemberRecord, *, passed: bool, process_start: float | None) -> bool:
    """Whether this probe adds to the pass streak. While an update waits for its restart,
    passes of the old process do not count (a rollback only needs passing probes: the
    old image may never have left)."""
    waiting_restart = (
        record.phase == Phase.UPDATING
        and record.update is not None
        and record.update.step == UpdateStep.RESTART
        and not record.update.rollback
    )
    if waiting_restart and not restarted_since_update(record, process_start):
        return False
    return passed


def new_process_running(record: MemberRecord) -> bool:
    """The update took: its process restarted (a rollback needs only passing probes)."""
    update = record.update
    if update is None:
        return False
    probe = record.last_probe
    return update.rollback or restarted_since_update(
        record, None if probe is None else probe.process_start
    )


def update_failed(
    record: MemberRecord, *, refused: bool, timeout_s: float, now: dt.datetime
) -> bool:
    """RunPod refused the update, or it did not restart and pass within the timeout."""
    update = record.update
    started = None if update is None else update.started_at
    return refused or _elapsed(started, now) >= timeout_s


def rolling_back(record: MemberRecord) -> bool:
    return record.update is not None and record.update.rollback


def rollback_timed_out(record: MemberRecord, *, timeout_s: float, now: dt.datetime) -> bool:
    """The rollback did not pass probes within the update timeout either."""
    update = record.update
    if update is None or not update.rollback:
        return False
    return _elapsed(update.started_at, now) >= timeout_s


# --- after act, and what the pool shows ----------------------------------------------


def after_update(
    status: PoolStatus, effect: UpdatePod, done: EffectResult, now: dt.datetime
) -> PoolStatus:
    """Fold one UpdatePod's result: a rollback sent starts the backoff, and a refused
    update is remembered on the member, so its machine rolls back."""
    if done.result is Result.PLANNED:
        return status
    if effect.rollback:
        status = status.replace(backoff=status.backoff.replace(update_until=now + UPDATE_BACKOFF))
    member = status.member(effect.pod_id)
    if member is None or member.update is None:
        return status
    refused = None if done.ok else (done.detail or done.result.value)
    update = member.update.replace(refused=refused)
    return status.with_member(member.replace(update=update))


def update_failure(
    members: Sequence[MemberRecord], *, update_until: dt.datetime | None, now: dt.datetime
) -> str | None:
    """The UpdateFailed condition's message while a pod rolls back or updates are
    paused; None when no update failed."""
    failed = [m for m in members if m.update is not None and m.update.rollback]
    if not failed and (update_until is None or now >= update_until):
        return None
    why = (
        "; ".join(
            f"pod {m.pod_id}: update to {m.update.to_image} failed"  # type: ignore[union-attr]
            + (f" (RunPod: {m.update.refused})" if m.update and m.update.refused else "")
            for m in failed
        )
        or "the last in-place update failed and was rolled back"
    )
    paused = (
        f"; image updates paused until {update_until:%Y-%m-%dT%H:%M:%SZ}" if update_until else ""
    )
    return why + paused
