"""Fold what the executor did back into the status: pure, after act.

Where it sits: the last step of a loop, between act and the status write. Decide
planned on the assumption that effects succeed; this is where their real results
land, so status keeps telling the truth:

- a created pod becomes a Warming member, paired with the member it replaces
  (rpp/decide/surge_first.py), the create is logged for limits.maxCreatesPerHour, a
  CapacityUnavailable refusal is cleared, and its price (RunPod's create answer carries
  it) counts in costPerHour from this loop, not from the next listing;
- a create refused for stock records what was tried (CapacityUnavailable) and waits
  5 minutes; any other refusal waits 5 minutes and does not count toward the hourly
  cap; a create whose result is unknown (timeout, 5xx) counts and waits, and the pod
  is found by its name on the next listing;
- an update's result goes to the update policy (rpp/machines/rollout.py): a refusal is
  remembered on the member, so its machine rolls back, and a rollback sent holds
  image updates back for 30 minutes;
- every result lands in the bounded history.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from rpp.decide import surge_first
from rpp.decide.safeguards import CREATE_BACKOFF
from rpp.machines import rollout
from rpp.model.effects import CreatePod, RecordEvent, Unwire, UpdatePod, Wire
from rpp.model.records import HistoryEntry
from rpp.model.results import EffectResult, Result
from rpp.model.status import PoolStatus


def fold(status: PoolStatus, results: Sequence[EffectResult], *, now: dt.datetime) -> PoolStatus:
    """The status with the result of every effect of this loop applied."""
    for done in results:
        effect = done.effect
        if isinstance(effect, (RecordEvent, Wire, Unwire)):
            continue
        if done.result is not Result.PLANNED:
            status = status.with_history(
                HistoryEntry(
                    time=now,
                    action=effect.action,
                    outcome=done.result.value,
                    detail=_detail(effect.describe(), done),
                    pod=effect.pod,
                )
            )
        if isinstance(effect, CreatePod):
            status = _create(status, effect, done, now)
        elif isinstance(effect, UpdatePod):
            status = rollout.after_update(status, effect, done, now)
    return status


def _detail(described: str, done: EffectResult) -> str:
    """History lines are bounded: a failure leads with RunPod's (or the cause's) words."""
    if not done.detail:
        return described
    if done.ok:
        return f"{described}: {done.detail}"
    return f"{done.detail} (for: {described})"


def _create(
    status: PoolStatus, effect: CreatePod, done: EffectResult, now: dt.datetime
) -> PoolStatus:
    if done.result is Result.PLANNED:
        return status
    if done.result is Result.CREATED and done.pod is not None:
        status = surge_first.link_created(status, effect=effect, pod=done.pod, now=now)
        return status.with_create_attempt(
            now, "created", name=effect.name, replacement_for=effect.replacement_for
        ).replace(
            cost_per_hour=round(status.cost_per_hour + done.pod.cost_per_hr, 4),
            last_capacity_refusal=None,
            backoff=status.backoff.replace(create_until=None),
        )
    backoff = status.backoff.replace(create_until=now + CREATE_BACKOFF)
    if done.result is Result.UNKNOWN:
        # It may have made a pod that bills: it counts, and the next list adopts it.
        return status.with_create_attempt(
            now, "unknown", name=effect.name, replacement_for=effect.replacement_for
        ).replace(backoff=backoff)
    if done.capacity is not None:
        return status.replace(last_capacity_refusal=done.capacity, backoff=backoff)
    return status.replace(backoff=backoff)
