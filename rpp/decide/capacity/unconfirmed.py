"""Created but not listed yet: a pod RunPod answered 201 for counts before it shows.

Where it sits: decide, right after membership and the settling of intents
(rpp/decide/pool.py), before any member machine runs and before any create is planned.

RunPod's pod list can lag its create answer: the 201 carries the new pod's id, yet the
listing (and GET /pods/{id}) may show it only a minute or more later. Read naively, a
Warming member missing from two listings in a row is Gone, its need is open again and a
second pod is created, while the first one appears and bills: a duplicate, and maxPods
and the cost cap broken by one pod each time.

So a member made by a create that answered 201 carries `unconfirmedSince` (set when the
result is folded in, rpp/decide/capacity/surge_first.py `link_created`) until RunPod lists it.
While it waits, and for at most health.createListingGrace after the 201:

- its machine does not run: it is not counted missing, so it never goes Gone for the lag;
- it counts as a pod for limits.maxPods and at its price (RunPod's create answer gives
  it) for limits.maxHourlyCostUsd (rpp/decide/capacity/sizing.py); its create is already in
  the hour's creates (rpp/decide/fold.py), and as a Warming member it covers its need;
- no other create goes out (rpp/decide/capacity/safeguards.py, CreateBlocked
  CreateUnconfirmed): with one pod RunPod has not shown yet, the pool does not add
  another it cannot see either.

Once the grace is over, a pod still not listed is treated like any member RunPod stops
listing: missing for two loops, it is Gone, and its need is open again. The grace is
time, not a GET /pods/{id} 404: RunPod does not document how its reads trail a create,
and a pod its list does not show yet may be missing from the single-pod read too (the
simulator's cloud.listingLag hides it from both), so a 404 inside the lag would prove
nothing, and one more call per loop would buy nothing. A pod that does appear after the
grace is adopted by its name (rpp/decide/ledger/membership.py), like the pod of a create whose
answer was lost, and the pool scales down by it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

from rpp.decide.capacity.prices import known
from rpp.model.members import MemberRecord
from rpp.model.status import PoolStatus
from rpp.model.timestamps import to_rfc3339


def sort_out(
    status: PoolStatus, *, listed: Iterable[str], grace: float, now: dt.datetime
) -> tuple[PoolStatus, frozenset[str]]:
    """The status with members that RunPod lists, or whose grace is over, confirmed; and
    the pod ids still waiting for their listing (their machines do not run this loop)."""
    shown = set(listed)
    waiting: set[str] = set()
    for m in status.members:
        since = m.unconfirmed_since
        if since is None:
            continue
        if m.pod_id in shown or (now - since).total_seconds() >= grace:
            status = status.with_member(m.replace(unconfirmed_since=None))
        else:
            waiting.add(m.pod_id)
    return status, frozenset(waiting)


def waiting_members(members: Iterable[MemberRecord]) -> list[MemberRecord]:
    """Members created (201) and not listed yet, within their grace, oldest first."""
    found = [m for m in members if m.unconfirmed_since is not None]
    return sorted(found, key=lambda m: (m.unconfirmed_since or m.since, m.pod_id))


def prices(members: Sequence[MemberRecord]) -> list[float | None]:
    """What each waiting member bills per hour as RunPod's create answer gave it (None:
    no price; the cost cap counts it at limits.estimatedPodCostUsd)."""
    return [known(m.cost_per_hr) for m in members]


def describe(members: Sequence[MemberRecord], *, grace: float) -> str:
    """Why creates wait: the first pod RunPod created and does not list yet."""
    first = members[0]
    since = first.unconfirmed_since or first.since
    more = f" (and {len(members) - 1} more)" if len(members) > 1 else ""
    return (
        f"RunPod created pod {first.name} ({first.pod_id}) at {to_rfc3339(since)} but does "
        f"not list it yet{more}; creates wait until it is listed, or until "
        f"health.createListingGrace ({grace:g}s) has passed"
    )
