"""The in-place image update of one pod, and its rollback: the policy, in one place.

Where it sits: beside the member machine (rpp/machines/member.py), which carries each
pod through the update; the machine's update guards (rpp/machines/member_update.py),
the release step that picks the pods to update (rpp/decide/release/steps.py), the fold after
act (rpp/decide/fold.py) and the UpdateFailed condition all ask this module. Pure: no
I/O, no clock.

1. How one pod updates (the machine's guards). After drain.period it gets UpdatePod
   (same machine, same GPU, so no free stock is needed). It is back in service once
   its process restarted (read from its own metrics: RunPod's timestamps do not move
   on a reset; passes of the old process do not count) and it passed 3 probes in a
   row; then it is wired again.
2. When an update fails. RunPod refused it, or it did not restart and pass within the
   update timeout (health.warmupTimeout): the pod is rolled back to its old image,
   which needs only passing probes. A rollback that does not pass in time either is
   terminated (its datacenter cools down), and the pool replaces it. A canary that
   fails its bake goes back the same way, after a drain.
3. The backoff. Once a rollback is sent, image updates of the same release pause for
   `UPDATE_BACKOFF` (status.backoff.updateUntil), and UpdateFailed says why until it
   is over; a new spec.image is not held back by it (rpp/decide/release/steps.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from rpp.model.effects import UpdatePod
from rpp.model.members import MemberRecord, Phase, UpdateStep
from rpp.model.results import EffectResult, Result
from rpp.model.status import PoolStatus

UPDATE_BACKOFF = dt.timedelta(minutes=30)
"""How long image updates pause after a rollback was sent."""

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
        f"; image updates paused until {update_until:%Y-%m-%dT%H:%M:%SZ}"
        if update_until is not None and now < update_until
        else ""
    )
    return why + paused
