"""Fold what the executor did back into the status: pure, after act.

Where it sits: the last step of a loop, between act and the status write. Decide
planned on the assumption that effects succeed; this is where their real results
land, so status keeps telling the truth:

- a created pod becomes a Warming member, paired with the member it replaces
  (rpp/decide/capacity/surge_first.py), the create is logged for limits.maxCreatesPerHour, a
  CapacityUnavailable refusal is cleared, and its price (RunPod's create answer carries
  it) counts in costPerHour from this loop, not from the next listing;
- a create refused for stock records what was tried (CapacityUnavailable) and waits
  5 minutes; any other refusal waits 5 minutes and does not count toward the hourly
  cap; a create whose result is unknown (timeout, 5xx) counts and waits, and the pod
  is found by its name on the next listing;
- a terminate that failed is remembered on the member, whose machine sends it again
  the next loop;
- an update's result goes to the update policy (rpp/machines/rollout.py): a refusal is
  remembered on the member, so its machine rolls back, and a rollback sent holds
  image updates back for 30 minutes;
- every result lands in the bounded history, and the intent written down for it
  before act (rpp/decide/ledger/intents.py) is removed: its outcome is known now.

A create is logged at `acted_at`, rounded up to the second: no earlier than RunPod
made the pod, so it counts for at least the hour after it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import assert_never

from rpp.decide.capacity import surge_first
from rpp.decide.capacity.prices import known
from rpp.decide.capacity.safeguards import CREATE_BACKOFF
from rpp.decide.ledger import intents
from rpp.machines import rollout
from rpp.model.effects import (
    AddFinalizer,
    CreatePod,
    RecordEvent,
    RemoveFinalizer,
    TerminatePod,
    Unwire,
    UpdatePod,
    Wire,
    WriteSlots,
)
from rpp.model.records import HistoryEntry
from rpp.model.results import EffectResult, Result
from rpp.model.status import PoolStatus


def fold(
    status: PoolStatus,
    results: Sequence[EffectResult],
    *,
    now: dt.datetime,
    acted_at: dt.datetime | None = None,
) -> PoolStatus:
    """The status with the result of every effect of this loop applied."""
    logged_at = intents.ceil_second(acted_at or now)
    for done in results:
        effect = done.effect
        if isinstance(effect, (RecordEvent, Wire, Unwire)):
            continue
        status = intents.done(status, done, now)
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
        # Every effect type is named here: a new one is a mypy error until it is folded.
        match effect:
            case CreatePod():
                status = _create(status, effect, done, now, logged_at)
            case TerminatePod():
                status = _terminate(status, effect, done)
            case UpdatePod():
                status = rollout.after_update(status, effect, done, now)
            case WriteSlots() | AddFinalizer() | RemoveFinalizer():
                pass  # decide set the slots in status already; a finalizer is on the pool
            case _:
                assert_never(effect)
    return status


def _terminate(status: PoolStatus, effect: TerminatePod, done: EffectResult) -> PoolStatus:
    """A terminate that failed is remembered on the member: its machine sends it again
    next loop (one that went through waits for RunPod to stop listing the pod)."""
    member = status.member(effect.pod_id)
    if member is None or done.result is not Result.FAILED:
        return status
    return status.with_member(member.replace(terminate_error=done.detail or "failed"))


def _detail(described: str, done: EffectResult) -> str:
    """History lines are bounded: a failure leads with RunPod's (or the cause's) words."""
    if not done.detail:
        return described
    if done.ok:
        return f"{described}: {done.detail}"
    return f"{done.detail} (for: {described})"


def _create(
    status: PoolStatus,
    effect: CreatePod,
    done: EffectResult,
    now: dt.datetime,
    logged_at: dt.datetime,
) -> PoolStatus:
    if done.result is Result.PLANNED:
        return status
    if done.prices:
        status = status.replace(catalog_prices={**status.catalog_prices, **done.prices})
    if done.result is Result.CREATED and done.pod is not None:
        status = surge_first.link_created(status, effect=effect, pod=done.pod, now=now)
        return status.with_create_attempt(
            logged_at, "created", name=effect.name, replacement_for=effect.replacement_for
        ).replace(
            cost_per_hour=round(status.cost_per_hour + (known(done.pod.cost_per_hr) or 0.0), 4),
            last_capacity_refusal=None,
            backoff=status.backoff.replace(create_until=None),
        )
    backoff = status.backoff.replace(create_until=now + CREATE_BACKOFF)
    if done.result is Result.UNKNOWN:
        # It may have made a pod that bills: it counts, and the next list adopts it.
        return status.with_create_attempt(
            logged_at, "unknown", name=effect.name, replacement_for=effect.replacement_for
        ).replace(backoff=backoff)
    if done.capacity is not None:
        return status.replace(last_capacity_refusal=done.capacity, backoff=backoff)
    return status.replace(backoff=backoff)
