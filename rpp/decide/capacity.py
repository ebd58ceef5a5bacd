"""Pool steps 3 and 4: replacements for flagged members, creates up to the wanted size,
and shrinking one pod at a time when the pool is larger than it should be.

Where it sits: decide, after every member machine has run for the loop. At most one
create per loop, whoever asks (a replacement first, then the size), and every create
passes the safeguards (rpp/decide/safeguards.py) and placement
(rpp/decide/placement.py); when either blocks it, the reason becomes a condition.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from rpp.decide import surge_first
from rpp.decide.ownership import new_pod_name
from rpp.decide.placement import place
from rpp.decide.safeguards import Block, create_block
from rpp.model.effects import CreatePod
from rpp.model.members import DrainReason, MemberRecord, Phase
from rpp.model.observations import RunPodPod
from rpp.model.spec import RunPodPoolSpec
from rpp.model.status import PoolStatus

# Members that serve now or will without the pool doing anything more: a warming pod
# serves once it passes, an updating pod comes back, a pod draining for an update too.
_SERVING = frozenset({Phase.WARMING, Phase.READY, Phase.UPDATING})


def serving_count(members: Sequence[MemberRecord]) -> int:
    """Members that count toward the wanted size (a flagged one is being replaced)."""
    return sum(
        1
        for m in members
        if m.phase in _SERVING
        or (m.phase == Phase.DRAINING and m.drain_reason == DrainReason.UPDATE)
    )


@dataclass(frozen=True)
class CreateWish:
    """Why the pool wants one more pod this loop."""

    reason: str
    replacement_for: str | None = None


def wanted_create(
    *, members: Sequence[MemberRecord], desired: int, pool_wide: bool
) -> CreateWish | None:
    """The one create this loop asks for: a replacement first, then the pool size."""
    flagged = surge_first.next_to_replace(members, pool_wide=pool_wide)
    if flagged is not None:
        rule = flagged.flagged_rule or "a health rule"
        return CreateWish(f"replace {flagged.pod_id} ({rule})", replacement_for=flagged.pod_id)
    serving = serving_count(members)
    if serving < desired:
        return CreateWish(f"{serving} of {desired} wanted pods")
    return None


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
    image: str | None = None,
) -> CreatePlan:
    """A CreatePod that passes every safeguard, or the safeguard that blocks it.

    `image` is what the pod runs (None: spec.image, or the template's); the release
    keeps spec.image off new pods until its canary passed (rpp/decide/release.py)."""
    cost = sum(p.cost_per_hr for p in owned)
    block = create_block(
        spec=spec, status=status, pod_count=len(owned), cost_per_hour=cost, now=now
    )
    if block is not None:
        return CreatePlan(None, block)
    placement = place(
        spec=spec, status=status, pod_datacenters=(p.datacenter for p in owned), now=now
    )
    if not placement.datacenters:
        return CreatePlan(None, Block("NoDatacenter", placement.explain()))
    taken = [p.name for p in owned] + [a.name for a in status.create_log if a.name]
    effect = CreatePod(
        pool=pool,
        name=new_pod_name(spec, now=now, taken=taken),
        reason=wish.reason,
        replacement_for=wish.replacement_for,
        gpu_types=spec.gpu_types,
        datacenters=placement.datacenters,
        cloud=spec.cloud,
        skipped=placement.excluded,
        image=image if image != spec.image else None,
    )
    return CreatePlan(effect, None)


def scale_down_victim(members: Sequence[MemberRecord], *, desired: int) -> MemberRecord | None:
    """The member to take out when the pool is above its size, one at a time.

    Nothing while a scale-down is still under way. A warming pod (not serving yet)
    goes before a wired one; within each group the costliest goes first, then the
    newest (the least proven).
    """
    if any(
        m.drain_reason == DrainReason.SCALE_DOWN and m.phase in (Phase.DRAINING, Phase.TERMINATING)
        for m in members
    ):
        return None
    if serving_count(members) <= desired:
        return None
    warming = [m for m in members if m.phase == Phase.WARMING and not m.replacement_for]
    ready = [m for m in members if m.phase == Phase.READY]
    group = warming or ready
    if not group:
        return None
    return max(group, key=lambda m: (m.cost_per_hr or 0.0, m.created_at or m.since, m.pod_id))
