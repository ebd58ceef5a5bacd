"""The acting steps size, create, terminate first and shrink, each a function of the loop.

Where it sits: decide, called by rpp/decide/pool.py (which names every step in the order
they run) after `drain`: `size` (the autoscaler's size, which `create` and `shrink`
aim for), `create` (one create: a replacement first, then the size), `terminate first`
(a flagged pod whose replacement cannot be created, with the ReplacementBlocked
condition for one kept serving) and `shrink` (one pod at a time). `roll` follows them,
in rpp/decide/release/steps.py. Each step appends effects to the `LoopState` and
explains itself with a condition when it cannot act.
"""

from __future__ import annotations

from dataclasses import dataclass

from rpp.decide.capacity import autoscale, surge_first
from rpp.decide.capacity import sizing as capacity
from rpp.decide.ledger import intents, write_failures
from rpp.decide.release import steps as release
from rpp.decide.state.conditions import Cond
from rpp.decide.state.loop_state import LoopState
from rpp.machines import member_step
from rpp.machines.signals import down
from rpp.model.effects import Effect
from rpp.model.members import DrainReason, MemberRecord, Phase
from rpp.model.spec import Mode


def autoscale_size(loop: LoopState, planned: list[MemberRecord]) -> int:
    """The `size` step: replicas.min without autoscaling; keeps its windows in status."""
    spec, conds = loop.spec, loop.conds
    ready = sum(1 for m in planned if m.phase == Phase.READY and m.slot is not None)
    reading = loop.obs.prometheus
    scaling = autoscale.scale(
        spec=spec,
        status=loop.status.current,
        value=reading.autoscaling_value,
        ready=ready,
        now=loop.now,
    )
    loop.status.adopt(scaling.status)
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
    """The `create` step (replacements first): the one create of this loop, or why not."""
    conds, spec, status = loop.conds, loop.spec, loop.status.current
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
            unwritten=write_failures.create_hold(loop.obs.status_writes),
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
    dead = frozenset(m.pod_id for m in planned if down(m, loop.settings))
    victim = capacity.scale_down_victim(planned, desired=desired, down=dead)
    if victim is None:
        return False
    if victim.pod_id in loop.held:
        loop.note(f"scale-down waits: RunPod's answer for pod {victim.pod_id} does not read")
        return False
    signals = loop.plain(victim.pod_id)
    if victim.phase == Phase.FLAGGED:
        serving = capacity.serving_count(planned, down=dead)
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
    """When the pool's replacement create is blocked (a cap, the create backoff, no
    stock), a flagged member with no replacement coming is terminated first if it serves
    nothing (out of nginx, or its probes fail hard): it only bills, and its place
    (maxPods, cost, a datacenter slot) is what the replacement needs. Its Event names the
    cap that forced the order; the replacement follows as soon as the cap allows.

    A flagged member that still serves goes by health.whenReplacementBlocked: Keep (the
    default) serves on with it, and ReplacementBlocked names the pod, its rule, the cap
    and what a person can do; TerminateFirst drains it, one at a time, and terminates it.
    `wish` is None when this loop's create goes out or nothing is wanted: nothing waits.
    """
    blocked = _create_blocked(loop) if wish is not None and wish.replacement_for else None
    kept: list[MemberRecord] = []
    if blocked is not None:
        replaced = surge_first.being_replaced(
            planned, covered=intents.pending_replacements(loop.status.current)
        )
        choice = loop.spec.health.when_replacement_blocked
        # A flagged pod already leaving makes room: one serving pod drains at a time.
        leaving = any(
            m.phase in (Phase.DRAINING, Phase.TERMINATING)
            and m.drain_reason == DrainReason.REPLACE
            for m in planned
        )
        for victim in [m for m in planned if m.phase == Phase.FLAGGED]:
            if victim.pod_id in replaced or victim.pod_id in loop.held:
                continue
            dead = victim.slot is None or down(victim, loop.settings)
            if not dead and (choice == "Keep" or leaving):
                kept.append(victim)
                continue
            reason = f"its replacement cannot be created first ({blocked.said})"
            if dead:
                reason += "; terminated first, it is replaced as soon as that allows"
            else:
                reason += (
                    "; health.whenReplacementBlocked is TerminateFirst, so it drains and is "
                    "terminated first, and is replaced as soon as that allows"
                )
                leaving = True
            step = member_step.let_go(
                victim, reason=reason, signals=loop.plain(victim.pod_id), now=loop.now
            )
            planned[planned.index(victim)] = loop.order(victim, step)
    _report_kept(loop, kept, blocked)


@dataclass(frozen=True)
class _Blocked:
    """What keeps a replacement from being created first: a cap's reason and its words."""

    reason: str  # MaxPodsReached, CostCapReached, CreateRateLimited, CreateBackoff, NoStock...
    message: str

    @property
    def said(self) -> str:
        return f"{self.reason}: {self.message}"


def _create_blocked(loop: LoopState) -> _Blocked | None:
    """What keeps this loop's create from happening, if anything, from its condition."""
    status = loop.status.current
    found = status.condition(Cond.CREATE_BLOCKED.value)
    # A pod RunPod created and does not list yet blocks only for moments: no reason
    # to terminate anything before its replacement can be created.
    if found is not None and found.status == "True" and found.reason != "CreateUnconfirmed":
        # The condition says what the pool wants, then "but" what blocks it.
        return _Blocked(found.reason, found.message.split(" but ", 1)[-1])
    stock = status.condition(Cond.CAPACITY_UNAVAILABLE.value)
    if stock is not None and stock.status == "True":
        return _Blocked("NoStock", "RunPod has no stock for it (see CapacityUnavailable)")
    return None


def _report_kept(loop: LoopState, kept: list[MemberRecord], blocked: _Blocked | None) -> None:
    """ReplacementBlocked: the flagged pods kept serving because their replacement is
    blocked, and what a person can do; cleared when none is."""
    conds = loop.conds
    if not kept or blocked is None:
        conds.clear(
            Cond.REPLACEMENT_BLOCKED,
            reason="NothingKept",
            message="no flagged pod is kept for want of its replacement",
        )
        return
    one = len(kept) == 1
    pods = ", ".join(
        f"{m.pod_id} ({m.name}, flagged for {m.flagged_rule or 'a health rule'})" for m in kept
    )
    it, waits = ("it", "It waits") if one else ("them", "They wait")
    lift = {
        "MaxPodsReached": "Raise limits.maxPods",
        "CostCapReached": "Raise limits.maxHourlyCostUsd",
        "CreateRateLimited": f"{waits} for the hour's creates; raise limits.maxCreatesPerHour",
        "CreateBackoff": f"{waits} for the create backoff",
        "NoStock": "Widen gpuTypes, datacenters or cloud, or wait for stock",
        "NoDatacenter": "Allow more datacenters",
    }.get(blocked.reason, "Lift what blocks the create")
    conds.set(
        Cond.REPLACEMENT_BLOCKED,
        true=True,
        reason=blocked.reason,
        message=f"{'pod' if one else 'pods'} {pods} {'serves' if one else 'serve'} on and "
        f"{'is' if one else 'are'} kept (health.whenReplacementBlocked: Keep): the "
        f"replacement cannot be created first ({blocked.said}). {lift}, or set "
        f"health.whenReplacementBlocked: TerminateFirst to drain and terminate {it} first",
    )
