"""Surge-first replacement: a bad pod that still serves leaves only after its replacement does.

Where it sits: decide, in three moments of one replacement, all here:

1. Ask (the `create` step, through rpp/decide/capacity/sizing.py `wanted_create`): each Flagged
   member without a live replacement gets one create, before any create for the
   pool's size, oldest flag first. Not while PoolWideDegradation holds: when every
   Ready pod looks bad the cause is rarely the pods, and replacing them all would only
   cost money.
2. Link (after act, from rpp/decide/fold.py): the created pod is a Warming member with
   `replacementFor`, and the flagged member gets `replacedBy`, so status shows the pair
   and a restarted controller keeps them paired.
3. Drain (the `drain` step): once the replacement is Ready and wired, the
   flagged member is told `replacement_wired` and drains (Flagged -> Draining), then
   its machine terminates it after drain.period, cooling its datacenter down.

Until then the flagged pod keeps serving, unless it is unreachable, which the member
machine unwires at once (the last wired pod too, unless the controller may be blind:
rpp/machines/member.py `blind`). A dead pod out of nginx (its probes fail hard, or the
Unreachable rule is still due) does not wait for moment 3: its machine terminates it at
once (`terminate_dead`, Event DeadPodTerminated), since it gives no capacity and only
bills; its replacement, asked for in moment 1, still comes. When its replacement cannot
be created first, pool step terminate-first decides (rpp/decide/steps.py).
A scale-down never takes a warming replacement while the pod it replaces is still
Flagged (rpp/decide/capacity/sizing.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

from rpp.decide.state.loop_state import LoopState
from rpp.machines import member_step
from rpp.machines.member_step import new_member
from rpp.model.effects import CreatePod
from rpp.model.members import MemberRecord, Phase
from rpp.model.observations import RunPodPod
from rpp.model.status import PoolStatus


def being_replaced(
    members: Iterable[MemberRecord], *, covered: Iterable[str] = ()
) -> frozenset[str]:
    """The members whose replacement is on its way: a member (not Gone) made to replace
    them, or a create for them in `covered` (written down, not settled yet)."""
    live = {m.replacement_for for m in members if m.replacement_for and m.phase != Phase.GONE}
    return frozenset(live.union(covered))


def next_to_replace(
    members: Sequence[MemberRecord], *, pool_wide: bool, covered: frozenset[str] = frozenset()
) -> MemberRecord | None:
    """The flagged member whose replacement this loop creates, if any (moment 1).

    `covered`: members whose replacement create is written down and not settled yet."""
    if pool_wide:
        return None
    live = being_replaced(members, covered=covered)
    for m in sorted(members, key=lambda m: (m.since, m.pod_id)):
        if m.phase == Phase.FLAGGED and m.pod_id not in live:
            return m
    return None


def link_created(
    status: PoolStatus, *, effect: CreatePod, pod: RunPodPod, now: dt.datetime
) -> PoolStatus:
    """A created pod joins as Warming, paired with the member it replaces (moment 2);
    it waits for RunPod's listing to show it (rpp/decide/capacity/unconfirmed.py)."""
    record = new_member(pod, now=now, replacement_for=effect.replacement_for).replace(
        unconfirmed_since=now
    )
    status = status.with_member(record)
    if effect.replacement_for and (old := status.member(effect.replacement_for)):
        status = status.with_member(old.replace(replaced_by=record.pod_id))
    return status


def drain_replaced(loop: LoopState, planned: list[MemberRecord]) -> None:
    """A flagged member whose replacement is Ready and wired drains (moment 3)."""
    for i, m in enumerate(planned):
        if m.phase != Phase.FLAGGED or m.pod_id in loop.held:
            continue
        repl = next((r for r in planned if r.replacement_for == m.pod_id), None)
        if repl is None or repl.phase != Phase.READY or repl.slot is None:
            continue
        step = member_step.replacement_wired(m, signals=loop.plain(m.pod_id), now=loop.now)
        planned[i] = loop.order(m, step).replace(replaced_by=repl.pod_id)
