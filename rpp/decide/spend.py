"""status.spend: what RunPod really billed the pool's own pods, beside the catalog estimate.

Where it sits: decide, called by the end of every branch (rpp/decide/finish.py) with the
loop's billing reading (rpp/observe/billing.py reads it for the whole account at most
every 10 minutes). Pure: the reading carries its own `read_at`, and "the last hour",
"today" and "this month" are counted back from it (UTC), never from a clock.

Which records are the pool's. RunPod's billing records name a pod by id only, and a
pod that was terminated is no longer listed, so its name (the pool's namePrefix) is
lost. A pod's records count for the pool when the pod is, at the reading:
- a member of status.members, or an owned pod of this loop's listing (namePrefix or
  spec.adopt, rpp/decide/ownership.py);
- named in status.history (the last 50 actions: a pod terminated lately is there);
- already in status.spend.pods: the pods billed to this pool this month, remembered so
  a pod gone from members and history still counts until the month ends (the 32 billed
  last are kept: the status must stay small, and members and history cover the rest).
A pod the pool had and lost from all of these before a reading saw its bill (a status
rebuilt from scratch, more than 32 pods gone from members and history in a month) is not
counted: the figures can be low, never another pool's. The pool's pods only, never the
account's total.

Figures are recomputed only when a new reading arrives (its `read_at` moved): a month
of hourly records is summed once per read, not every loop.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from rpp.model.observations import BillingReading, BillingRecord
from rpp.model.status import SPEND_PODS_KEPT, PoolStatus, Spend

HOUR = dt.timedelta(hours=1)


def pool_pod_ids(status: PoolStatus, current: frozenset[str]) -> frozenset[str]:
    """The pod ids whose bill is this pool's (see the module's docstring); `current` are
    its members and owned pods now."""
    ids = set(current) | {entry.pod for entry in status.history if entry.pod}
    if status.spend is not None:
        ids |= set(status.spend.pods)
    return frozenset(ids)


def next_spend(
    status: PoolStatus, *, billing: BillingReading | None, owned: Iterable[str]
) -> Spend | None:
    """status.spend after this loop: recomputed from a new reading, else kept (with the
    latest read's error, if it failed)."""
    previous = status.spend
    if billing is None:
        return previous
    if billing.read_at is None:  # never read yet: only the error to say
        if billing.error is None:
            return previous
        return (previous or Spend()).replace(error=billing.error)
    read_at = billing.read_at.replace(microsecond=0)
    if previous is not None and previous.read_at == read_at:
        if previous.error == billing.error:
            return previous
        return previous.replace(error=billing.error)
    current = frozenset({m.pod_id for m in status.members} | set(owned))
    return summed(
        billing.records,
        pods=pool_pod_ids(status, current),
        read_at=read_at,
        error=billing.error,
        current=current,
    )


def summed(
    records: Iterable[BillingRecord],
    *,
    pods: frozenset[str],
    read_at: dt.datetime,
    error: str | None = None,
    current: frozenset[str] = frozenset(),
) -> Spend:
    """The pool's spend at `read_at` from the records of its `pods`: the last full hour,
    today and this month (UTC) by each bucket's start. Remembered in `pods` are those
    billed this month that are not `current` (members count anyway)."""
    hour = read_at.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)
    day = hour.replace(hour=0)
    month = day.replace(day=1)
    last_hour = today = this_month = 0.0
    latest: dict[str, dt.datetime] = {}
    for record in records:
        if record.pod_id not in pods:
            continue
        if record.start == hour - HOUR:
            last_hour += record.amount
        if record.start >= day:
            today += record.amount
        if record.start >= month:
            this_month += record.amount
            if record.pod_id not in current:
                latest[record.pod_id] = max(record.end, latest.get(record.pod_id, record.end))
    # The most recently billed pods are the ones worth remembering.
    kept = sorted(latest, key=lambda pod: (latest[pod], pod), reverse=True)[:SPEND_PODS_KEPT]
    return Spend(
        last_hour=round(last_hour, 4),
        today=round(today, 4),
        this_month=round(this_month, 4),
        read_at=read_at,
        error=error,
        pods=tuple(sorted(kept)),
    )
