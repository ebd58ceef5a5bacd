"""The `create` and `shrink` steps: replacements for flagged members, creates up to the size,
and shrinking one pod at a time when the pool is larger than it should be.

Where it sits: decide, after every member machine has run for the loop. At most one
create per loop, whoever asks (a replacement first, then the size), and every create
passes the safeguards (rpp/decide/capacity/safeguards.py) and placement
(rpp/decide/capacity/placement.py); when either blocks it, the reason becomes a condition.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from rpp.decide.capacity import prices, surge_first, unconfirmed
from rpp.decide.capacity.placement import place
from rpp.decide.capacity.safeguards import Block, create_block
from rpp.decide.ownership import new_pod_name
from rpp.model.effects import CreatePod
from rpp.model.members import DrainReason, MemberRecord, Phase
from rpp.model.observations import RunPodPod
from rpp.model.spec import RunPodPoolSpec
from rpp.model.status import PoolStatus

_IN_NGINX = frozenset({Phase.READY, Phase.FLAGGED})

# Members that serve now or will without the pool doing anything more: a warming pod
# serves once it passes, an updating pod comes back, a pod draining for an update too.
_SERVING = frozenset({Phase.WARMING, Phase.READY, Phase.UPDATING})


def serving_count(members: Sequence[MemberRecord], *, down: Collection[str] = ()) -> int:
    """Members that count toward the wanted size (a flagged one is being replaced).

    `down` names members that are dead or hung (rpp/machines/signals.py `down`): they
    serve nobody, so they never count as serving. A create does not pass them (see
    `wanted_create`); a scale-down does."""
    return sum(
        1
        for m in members
        if (
            m.phase in _SERVING
            or (m.phase == Phase.DRAINING and m.drain_reason == DrainReason.UPDATE)
        )
        and m.pod_id not in down
    )


@dataclass(frozen=True)
class CreateWish:
    """Why the pool wants one more pod this loop."""

    reason: str
    replacement_for: str | None = None


def wanted_create(
    *,
    members: Sequence[MemberRecord],
    desired: int,
    pool_wide: bool,
    covered: frozenset[str] = frozenset(),
    coming: int = 0,
) -> CreateWish | None:
    """The one create this loop asks for: a replacement first, then the pool size.

    `covered` are members whose replacement is written down and not settled yet, and
    `coming` the creates in that state (rpp/decide/ledger/intents.py): each may have made a
    pod, so it covers its need, and counts as serving, until it is settled.

    A Ready pod out of nginx for failing hard (quarantine) still counts here: it comes
    back after 3 passes, and a dead one is flagged after the Unreachable rule's duration
    (then replaced), so a blip never buys a pod. Held by PoolWideDegradation, it counts
    too: the hold is what keeps the pool from replacing every pod for a shared cause.
    """
    serving = serving_count(members) + coming
    if serving >= desired:
        return None  # enough serve without the flagged: scale-down takes those first
    flagged = surge_first.next_to_replace(members, pool_wide=pool_wide, covered=covered)
    if flagged is not None:
        rule = flagged.flagged_rule or "a health rule"
        return CreateWish(f"replace {flagged.pod_id} ({rule})", replacement_for=flagged.pod_id)
    return CreateWish(f"{serving} of {desired} wanted pods")


@dataclass(frozen=True)
class CreatePlan:
    """The outcome of asking for a create: the effect, or why it may not happen."""

    effect: CreatePod | None
    block: Block | None


def plan_create(
    *,
    pool: str,
    spec: RunPodPoolSpec,
    status: PoolStatus,
    wish: CreateWish,
    owned: Sequence[RunPodPod],
    now: dt.datetime,
    writer: str | None,
    image: str | None = None,
    unwritten: str | None = None,
) -> CreatePlan:
    """A CreatePod that passes every safeguard, or the safeguard that blocks it.

    `image` is what the pod runs (None: spec.image, or the template's); the release
    keeps spec.image off new pods until its canary passed (rpp/decide/release/steps.py).
    Creates written down and not settled count as pods (they may have made one), at the
    highest price a candidate may have; pods RunPod created and does not list yet count
    at the price its create answer gave (rpp/decide/capacity/unconfirmed.py), and no create goes
    out while one waits. `writer` (who decides) is in the pod's name."""
    pending = len(status.pending_creates())
    waiting = unconfirmed.waiting_members(status.members)
    catalog = status.catalog_prices
    dearest = prices.candidates(spec, catalog=catalog, room=0.0).highest()
    cost = prices.pool_cost(
        spec,
        owned,
        pending=pending,
        pending_price=dearest,
        unlisted=unconfirmed.prices(waiting),
    )
    fit = prices.candidates(spec, catalog=catalog, room=cost.room)
    block = create_block(
        spec=spec,
        status=status,
        pod_count=len(owned) + pending + len(waiting),
        cost=cost,
        fit=fit,
        now=now,
        unconfirmed=unconfirmed.describe(waiting, grace=spec.health.create_listing_grace)
        if waiting
        else None,
        unwritten=unwritten,
    )
    if block is not None:
        return CreatePlan(None, block)
    placement = place(
        spec=spec, status=status, pod_datacenters=(p.datacenter for p in owned), now=now
    )
    if not placement.datacenters:
        return CreatePlan(None, Block("NoDatacenter", placement.explain()))
    taken = [p.name for p in owned] + [a.name for a in status.create_log if a.name]
    taken += [i.name for i in status.intents]
    effect = CreatePod(
        pool=pool,
        name=new_pod_name(spec, now=now, writer=writer, taken=taken),
        reason=wish.reason,
        replacement_for=wish.replacement_for,
        gpu_types=fit.fitting,
        datacenters=placement.datacenters,
        cloud=spec.cloud,
        skipped=placement.excluded,
        image=image if image != spec.image else None,
        max_price_per_hr=round(cost.room, 4),
        catalog_prices=tuple(sorted(catalog.items())),
    )
    return CreatePlan(effect, None)


def scale_down_victim(
    members: Sequence[MemberRecord], *, desired: int, down: Collection[str] = ()
) -> MemberRecord | None:
    """The member to take out when the pool is above its size, one at a time.

    Nothing while a scale-down is still under way. Flagged pods go first. One that
    serves nothing goes once the pods that serve or will serve meet desired without it
    (it is not replaced then; one being replaced only when they pass desired: its
    replacement stays, as an ordinary member). One that still serves goes while the
    pool holds more pods than desired and nginx keeps desired pods without it: the pool
    shrinks by its bad pods first, and the flagged pod left gets its surge replacement.
    Then a warming pod (not serving yet) goes before a wired one; within each group the
    costliest goes first, then the newest (the least proven). A pod in `down` (dead or
    hung) never counts as serving, and among Ready pods goes first.
    """
    if any(
        m.drain_reason == DrainReason.SCALE_DOWN and m.phase in (Phase.DRAINING, Phase.TERMINATING)
        for m in members
    ):
        return None
    serving = serving_count(members, down=down)
    replaced = surge_first.being_replaced(members)
    flagged = sorted(
        (m for m in members if m.phase == Phase.FLAGGED),
        key=lambda m: (m.slot is not None, m.since, m.pod_id),
    )
    wired = sum(1 for m in members if m.slot is not None and m.phase in _IN_NGINX)
    for m in flagged:
        if m.slot is None:
            # Serves nothing: it goes once the others meet desired (one being replaced
            # leaves through surge-first, unless the pool shrinks anyway).
            enough = serving > desired if m.pod_id in replaced else serving >= desired
        else:
            # Still serves: it goes only while the pool holds more than desired and
            # nginx keeps desired pods without it (a flagged one too, if need be).
            enough = serving + len(flagged) > desired and wired - 1 >= desired
        if enough:
            return m
    if serving <= desired:
        return None
    # A warming replacement is kept only while the pod it replaces is still Flagged: once
    # that one drains or is terminated (let go, or dead), it is an ordinary warming pod.
    waiting = {m.pod_id for m in members if m.phase == Phase.FLAGGED}
    warming = [
        m
        for m in members
        if m.phase == Phase.WARMING and (not m.replacement_for or m.replacement_for not in waiting)
    ]
    ready = [m for m in members if m.phase == Phase.READY]
    group = warming or [m for m in ready if m.pod_id in down] or ready
    if not group:
        return None
    return max(group, key=lambda m: (m.cost_per_hr or 0.0, m.created_at or m.since, m.pod_id))
