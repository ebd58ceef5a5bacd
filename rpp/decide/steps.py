"""The pool steps that run after the member machines, each a function of the loop.

Where it sits: decide, called in order by rpp/decide/pool.py after flagged members
whose replacement is wired drain (rpp/decide/surge_first.py): the autoscaler sets the
size (step 7's value feeds steps 4 and shrinking), one create (steps 3 and 4) and
shrinking one pod at a time. The image release (step 6) follows them, in
rpp/decide/release.py. Each step appends effects to the `LoopState` and explains itself
with a condition when it cannot act.
"""

from __future__ import annotations

from rpp.decide import autoscale, capacity, intents, release, surge_first
from rpp.decide.conditions import Cond
from rpp.decide.loop_state import LoopState
from rpp.machines import member_step
from rpp.model.effects import Effect
from rpp.model.members import DrainReason, MemberRecord, Phase
from rpp.model.spec import Mode


def autoscale_size(loop: LoopState, planned: list[MemberRecord]) -> int:
    """Pool step 7's size (replicas.min without autoscaling); keeps its windows in status."""
    spec, conds = loop.spec, loop.conds
    ready = sum(1 for m in planned if m.phase == Phase.READY and m.slot is not None)
    reading = loop.obs.prometheus
    scaling = autoscale.scale(
        spec=spec, status=conds.status, value=reading.autoscaling_value, ready=ready, now=loop.now
    )
    conds.status = scaling.status
    if spec.autoscaling.enabled and scaling.unavailable:
        why = "; ".join(p for p in reading.problems if p.startswith("autoscaling.")) or (
            "autoscaling.query returned no value"
        )
        conds.set(
            Cond.AUTOSCALING_METRIC_UNAVAILABLE,
            true=True,
            reason="NoValue",
            message=f"{why}; the pool stays at {scaling.size} pod(s) until a value comes back",
        )
    else:
        conds.clear(
            Cond.AUTOSCALING_METRIC_UNAVAILABLE,
            reason="ValueRead" if spec.autoscaling.enabled else "AutoscalingOff",
            message="the autoscaling query answered"
            if spec.autoscaling.enabled
            else "autoscaling is off",
        )
    if scaling.note:
        loop.note(f"autoscaling: {scaling.note}")
    return scaling.size


def create(loop: LoopState, wish: capacity.CreateWish | None) -> Effect | None:
    """Pool step 4 (and replacements): the one create of this loop, or why not."""
    conds, spec, status = loop.conds, loop.spec, loop.conds.status
    effect = None
    if wish is None:
        conds.clear(
            Cond.CREATE_BLOCKED, reason="NoCreateNeeded", message="the pool has the pods it wants"
        )
    elif spec.mode is not Mode.OBSERVE:
        plan = capacity.plan_create(
            pool=loop.pool,
            spec=spec,
            status=status,
            wish=wish,
            owned=loop.owned,
            now=loop.now,
            writer=loop.obs.writer,
            image=release.create_image(spec, status.rollout, status.members),
        )
        backoff_for_stock = (
            plan.block is not None
            and plan.block.reason == "CreateBackoff"
            and status.last_capacity_refusal is not None
        )
        if backoff_for_stock:
            # CapacityUnavailable below says why; a CreateBlocked raised and cleared
            # every 5-minute retry would only add noise to the Events.
            conds.clear(
                Cond.CREATE_BLOCKED, reason="WaitingForStock", message="see CapacityUnavailable"
            )
        elif plan.block is not None:
            conds.set(
                Cond.CREATE_BLOCKED,
                true=True,
                reason=plan.block.reason,
                message=f"the pool wants a pod ({wish.reason}) but {plan.block.message}",
            )
        else:
            effect = plan.effect
            conds.clear(Cond.CREATE_BLOCKED, reason="CreateAllowed", message="creates are allowed")
    refusal = status.last_capacity_refusal
    if wish is not None and refusal is not None:
        conds.set(
            Cond.CAPACITY_UNAVAILABLE,
            true=True,
            reason="NoStock",
            # The refusal's message says what was tried, what lacked stock and which
            # datacenters the pool's own rules kept out (deny, cooldown, maxPerDatacenter).
            message=f"the pool needs a pod ({wish.reason}) and RunPod refused the last create "
            f"for lack of stock: {refusal.message}; widen gpuTypes, datacenters "
            "(allow, deny, maxPerDatacenter) or cloud, or wait for stock",
        )
    else:
        conds.clear(
            Cond.CAPACITY_UNAVAILABLE,
            reason="NotNeeded" if wish is None else "LastCreateNotRefused",
            message="no pod is waiting for stock",
        )
    return effect


def scale_down(loop: LoopState, planned: list[MemberRecord], desired: int) -> bool:
    """Shrink by one pod when the pool is above its size; True when one was chosen.

    Which pod goes first: a flagged pod the pool does not need to replace, then a pod
    not serving yet (Warming) before a wired one, since it costs the same and serves
    nobody; among those, and then among Ready pods, the costliest, then the newest
    (capacity.scale_down_victim). A flagged pod out of nginx or a warming pod is
    terminated at once; a wired one goes through the drain.
    """
    victim = capacity.scale_down_victim(planned, desired=desired)
    if victim is None:
        return False
    if victim.pod_id in loop.held:
        loop.note(f"scale-down waits: RunPod's answer for pod {victim.pod_id} does not read")
        return False
    signals = loop.plain(victim.pod_id)
    if victim.phase == Phase.FLAGGED:
        serving = capacity.serving_count(planned)
        why = (
            f"the pool has enough without it ({serving} serve or will serve, {desired} "
            "desired): it is not replaced"
        )
        step = member_step.let_go(victim, reason=why, signals=signals, now=loop.now)
    elif victim.phase == Phase.WARMING:
        step = member_step.retire(victim, signals=signals, now=loop.now)
    else:
        step = member_step.drain(
            victim, reason=DrainReason.SCALE_DOWN.value, image=None, signals=signals, now=loop.now
        )
    planned[planned.index(victim)] = loop.order(victim, step)
    return True


def terminate_first(
    loop: LoopState, planned: list[MemberRecord], wish: capacity.CreateWish | None
) -> None:
    """When the pool's replacement create is blocked, a flagged member that serves
    nothing (out of nginx) and has no replacement coming is terminated first: it only
    bills, and its place (maxPods, cost, a datacenter slot) is what the replacement
    needs. A flagged member that still serves is never: it keeps serving, and
    CreateBlocked (or CapacityUnavailable) says what blocks its replacement."""
    if wish is None or wish.replacement_for is None:
        return
    why = _create_blocked(loop)
    if why is None:
        return
    replaced = surge_first.being_replaced(
        planned, covered=intents.pending_replacements(loop.conds.status)
    )
    for victim in [m for m in planned if m.phase == Phase.FLAGGED and m.slot is None]:
        if victim.pod_id in replaced:
            continue
        reason = f"its replacement cannot be created first ({why}); terminating it first"
        step = member_step.let_go(
            victim, reason=reason, signals=loop.plain(victim.pod_id), now=loop.now
        )
        planned[planned.index(victim)] = loop.order(victim, step)


def _create_blocked(loop: LoopState) -> str | None:
    """What keeps this loop's create from happening (its condition's words), if any."""
    for cond in (Cond.CREATE_BLOCKED, Cond.CAPACITY_UNAVAILABLE):
        found = loop.conds.status.condition(cond)
        # A pod RunPod created and does not list yet blocks only for moments: no reason
        # to terminate anything before its replacement can be created.
        if found is not None and found.status == "True" and found.reason != "CreateUnconfirmed":
            return found.message
    return None
