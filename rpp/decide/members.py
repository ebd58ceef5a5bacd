"""The machines step: every member's machine runs once, in an order that shares slots fairly.

Where it sits: decide, the third of the acting steps of rpp/decide/pool.py (after
`judge` and `bake`, before `drain`). Each member gets its signals (this loop's pod,
probe and health verdict, the slot it may take, whether it is the last one wired,
the canary's verdict) and the member machine (rpp/machines/member.py) answers with its
next record and effects. In DryRun and Observe the planned records drive the rest of
the loop while the real ones are what the status keeps.
"""

from __future__ import annotations

from collections import Counter

from rpp.decide.health.pool_wide import PoolHealth
from rpp.decide.nginx_slots import slot_ports
from rpp.decide.release.steps import CanaryCall
from rpp.decide.state.loop_state import LoopState
from rpp.machines import member_step
from rpp.machines.signals import MemberSignals, refresh
from rpp.model.effects import RecordEvent
from rpp.model.members import MemberRecord, Phase
from rpp.model.spec import Mode


def drive(
    loop: LoopState, health: PoolHealth, canary: CanaryCall | None
) -> tuple[list[MemberRecord], list[MemberRecord]]:
    """Run every member's machine once; return the planned and the real records.

    Members coming back from an update get free slots first, then warming ones by age.
    `last_wired` is recomputed before each member, so two unreachable pods are never
    both unwired in the same loop. The release's canary hears that it is the canary
    while it is put on the new image, and its verdict while it bakes.
    """
    order = {Phase.UPDATING: 0, Phase.WARMING: 1}
    members = sorted(
        loop.status.current.members,
        key=lambda m: (order.get(m.phase, 2), m.since, m.pod_id),
    )
    current = {m.pod_id: m for m in members}
    # Who holds which slot, kept up to date member by member (not recounted for each).
    holders = Counter(x.slot for x in current.values() if x.slot is not None)
    ports = slot_ports(loop.spec)
    rollout = loop.status.current.rollout
    new_canary = (
        rollout.canary
        if rollout is not None and rollout.image == loop.spec.image and rollout.phase == "Canary"
        else None
    )
    planned: list[MemberRecord] = []
    real: list[MemberRecord] = []
    manage = loop.spec.mode is Mode.MANAGE
    wired = holders.total()
    for m in members:
        if m.pod_id in loop.awaiting:
            # RunPod created it and does not list it yet: not missing, not moved.
            planned.append(m)
            real.append(m)
            continue
        if m.pod_id in loop.held:
            # RunPod's answer about this pod did not read: keep the record, move nothing.
            kept = refresh(m, loop.plain(m.pod_id, probe=True), loop.now)
            current[m.pod_id] = kept
            planned.append(kept)
            real.append(kept)
            continue
        verdict = health.members.get(m.pod_id)
        mine = current[m.pod_id].slot
        others_wired = wired - (mine is not None) > 0
        offered = next((p for p in ports if not holders[p]), None) if _may_be_wired(m) else None
        signals = MemberSignals(
            settings=loop.settings,
            pod=loop.pod(m.pod_id),
            probe=loop.obs.probes.get(m.pod_id),
            breaches=None if verdict is None else verdict.breaches,
            flagged=() if verdict is None else verdict.flagged,
            reasons={} if verdict is None else verdict.reasons,
            pool_wide=health.holds(m.pod_id),
            last_wired=not others_wired,
            network_ok=True,  # this loop read RunPod's pod list
            offered_slot=offered,
            update_refused=bool(m.update and m.update.refused),
            canary=m.pod_id == new_canary,
            canary_failure=canary.failure if canary and canary.pod_id == m.pod_id else None,
            rollback_to=canary.rollback_to if canary and canary.pod_id == m.pod_id else None,
            unconfirmed=loop.unconfirmed.get(m.pod_id),
        )
        step = member_step.observe(m, signals=signals, now=loop.now)
        if mine is not None:
            holders[mine] -= 1
            wired -= 1
        if step.record.slot is not None:
            holders[step.record.slot] += 1
            wired += 1
        current[m.pod_id] = step.record
        planned.append(step.record)
        if not step.moves and not step.effects:  # a quiet member: planned is real
            real.append(step.record)
            continue
        acts = [e for e in step.effects if not isinstance(e, RecordEvent)]
        kept_real = refresh(m, signals, loop.now) if acts else step.record
        real.append(kept_real)
        loop.effects += step.effects
        if manage or not acts:
            loop.transition(m, step)
    return planned, real


def _may_be_wired(member: MemberRecord) -> bool:
    """A warming, updating or quarantined member is offered a free slot (once it passes)."""
    return member.phase in (Phase.WARMING, Phase.UPDATING) or member.quarantine is not None
