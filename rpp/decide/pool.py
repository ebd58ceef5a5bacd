"""Decide one loop of one pool: (spec, status, observations, now) -> (status, effects).

This is the pure heart of the controller (ARCHITECTURE.md: observe -> decide -> act).
It reads no clock, network or environment; the executor (rpp/act/) carries the effects
out according to the pool's mode, then folds their results into the status
(rpp/decide/fold.py).

The pool steps run in this order: the member machines first (drained members
finish, warming members are wired or time out, flagged members are unwired when
unreachable, vanished members leave), then flagged members whose replacement is wired
drain, then the autoscaler sets the size, then one create (a replacement first, then
the size), shrinking one pod at a time, the rolling image update, and the slots
(rpp/decide/steps.py). Every mode runs the same decisions:

- Manage: the new status is the one the effects lead to; the executor acts.
- DryRun: the effects are the plan (status.plannedActions, `would:` log lines); member
  records keep describing reality, so a member whose step needs an action (a wire, a
  terminate...) keeps its previous phase, refreshed with this loop's facts.
- Observe: the same judgement, nothing planned: status, metrics and SD only.

The pool object's finalizer is bookkeeping, carried out in every mode: a Manage pool gets
it (so deleting the pool waits for its pods), a pool in another mode loses it (those
modes never terminate pods). A pool being deleted skips the steps above for
rpp/decide/deletion.py.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections import Counter
from dataclasses import dataclass

from rpp.decide import (
    capacity,
    deletion,
    intents,
    judgement,
    prices,
    progress,
    rebuild,
    release,
    second_controller,
    steps,
    surge_first,
    unconfirmed,
    unlisted,
    unreadable,
    write_failures,
)
from rpp.decide.conditions import Cond, Conditions
from rpp.decide.health import PoolHealth
from rpp.decide.loop_state import LoopState, Note, Transition, settings_for
from rpp.decide.membership import find_new_members
from rpp.decide.nginx_slots import (
    RenderedSlots,
    SlotsFormatError,
    slot_ports,
    slots_effect,
    wired_pods,
)
from rpp.decide.ownership import owned_pods
from rpp.decide.working_status import WorkingStatus
from rpp.machines import member_step
from rpp.machines.signals import MemberSignals, fails_hard, refresh
from rpp.model.effects import (
    AddFinalizer,
    Effect,
    Finalizer,
    RecordEvent,
    RemoveFinalizer,
    TerminatePod,
)
from rpp.model.members import MemberRecord, Phase
from rpp.model.observations import PoolObservation
from rpp.model.proxy_hosts import DEFAULT_URL_PATTERN as DEFAULT_PROXY_URL
from rpp.model.records import HistoryEntry
from rpp.model.spec import Mode, RunPodPoolSpec
from rpp.model.status import PoolStatus

__all__ = ["Decision", "Note", "Transition", "decide", "settings_for"]


@dataclass(frozen=True)
class Decision:
    """What decide returns: the next status, the effects in order, and what moved;
    with what the controller needs to carry them out without deciding again."""

    status: PoolStatus
    effects: tuple[Effect, ...]
    log: tuple[Note, ...] = ()
    transitions: tuple[Transition, ...] = ()
    rebuilt: str | None = None  # why this loop rebuilt the status from ground truth
    slots: RenderedSlots | None = None  # pass back as the next loop's `last_slots`
    needs_write_ahead: bool = False
    """Manage, with a RunPod write among the effects: `status` carries its intents and
    must be stored before act carries anything out (rpp/decide/intents.py)."""
    acts: tuple[Effect, ...] = ()
    """The effects that change something besides the status (every one but the Events):
    a loop that carried one out may not be decided again on a re-read pool."""


def decide(
    *,
    pool: str,
    generation: int,
    spec: RunPodPoolSpec,
    status: PoolStatus,
    obs: PoolObservation,
    now: dt.datetime,
    proxy_url: str = DEFAULT_PROXY_URL,
    status_unreadable: str | None = None,
    last_slots: RenderedSlots | None = None,
) -> Decision:
    """One loop of one pool; see the module docstring for the steps and the modes.

    `status_unreadable`: the stored status could not be read (why); `status` is then
    empty and this loop rebuilds it (rpp/decide/rebuild.py). `last_slots`: the
    previous Decision's `slots`, reused when the slots did not change."""
    working = WorkingStatus(status)
    conds = Conditions(working, now=now, generation=generation)
    conds.clear(Cond.INVALID_SPEC, reason="Valid", message="the spec is valid")
    second_controller.report(conds, obs.other_controller, now=now)
    write_failures.report(conds, obs.status_writes)
    loop = LoopState(
        pool,
        spec,
        obs,
        now,
        conds,
        proxy_url,
        settings_for(spec),
        status=working,
        slots=last_slots,
    )
    if obs.pool.deleting_since is not None:
        deletion.step(loop)
        return _finish(loop, generation=generation, desired=0)
    if obs.pods is None:
        blind = unlisted.step(loop) if status_unreadable is None else []
        conds.set(
            Cond.NOT_ACTING,
            true=True,
            reason="RunPodUnavailable",
            message=f"RunPod's pod list could not be read ({obs.runpod_error}); the pool "
            "creates, terminates and updates nothing until it can "
            + (
                f"and keeps {', '.join(blind)} in nginx although its probes fail hard: no "
                "pod passes its probe either, so the fault may be the controller's own "
                "network"
                if blind
                else "(a wired pod whose probes fail hard still leaves nginx)"
            ),
        )
        return _finish(loop, generation=generation, desired=status.desired)
    known = {m.pod_id for m in status.members}
    loop.own(
        unreadable.with_known_facts(
            owned_pods(spec, obs.pods, members=known), status=status, spec=spec
        )
    )
    # Members whose next step waits for a write-ahead that failed are kept still too.
    loop.held = unreadable.held(loop.owned) | obs.status_writes.keep_still
    unreadable.report(conds, loop.owned)
    blockers, wired_now = _blockers(loop)
    # The stored status, not the working one: this loop's conditions (UnreadablePods,
    # SecondController) already make the new one look non-empty.
    rebuilt = rebuild.needed(status=status, unreadable=status_unreadable, wired=wired_now)
    for found in find_new_members(
        status=working.current, owned=loop.owned, wired=wired_now, now=now
    ):
        working.with_member(found.record)
        working.with_history(
            HistoryEntry(
                time=now, action="adopt", outcome="ok", detail=found.how, pod=found.record.pod_id
            )
        )
        loop.note(found.how, pod=found.record.pod_id)
    settled = intents.settle(working.current, owned=loop.owned, now=now)
    working.adopt(settled.status)
    loop.unconfirmed = settled.unconfirmed
    for line in settled.notes:
        loop.note(line)
    sorted_out, loop.awaiting = unconfirmed.sort_out(
        working.current,
        listed=(p.id for p in obs.pods),
        grace=spec.health.create_listing_grace,
        now=now,
    )
    working.adopt(sorted_out)
    if rebuilt is not None:
        rebuild.announce(loop, rebuilt)
        members = tuple(
            refresh(m, loop.plain(m.pod_id, probe=True), now) for m in working.current.members
        )
        working.replace(members=members)
        decision = _finish(loop, generation=generation, desired=spec.replicas.min)
        return dataclasses.replace(decision, rebuilt=rebuilt)
    if blockers:
        conds.set(
            Cond.NOT_ACTING,
            true=True,
            reason=blockers[0][0],
            message="; ".join(message for _, message in blockers),
        )
        members = tuple(
            refresh(m, loop.plain(m.pod_id, probe=True), now) for m in working.current.members
        )
        working.replace(members=members)
        return _finish(loop, generation=generation, desired=status.desired or spec.replicas.min)
    conds.clear(Cond.NOT_ACTING, reason="Acting", message="the pool has what it needs to act")
    before = working.current
    health = judgement.judge(spec=spec, status=working.current, obs=obs, now=now, conds=conds)
    if (expired := judgement.hold_expired_event(before, health)) is not None:
        loop.effects.append(expired)
    canary = release.bake(loop, health)
    planned, real = _drive_members(loop, health, canary)
    surge_first.drain_replaced(loop, planned)
    desired = steps.autoscale_size(loop, planned)
    wish = capacity.wanted_create(
        members=planned,
        desired=desired,
        pool_wide=health.blocks_replacement,
        covered=intents.pending_replacements(working.current),
        coming=len(working.current.pending_creates()),
    )
    create = steps.create(loop, wish)
    steps.terminate_first(loop, planned, wish if create is None else None)
    # A blocked create does not stop the pool from shrinking by its bad pods first.
    shrunk = create is None and steps.scale_down(loop, planned, desired)
    wants_create = wish is not None or shrunk
    release.roll(loop, planned, wants_create=wants_create, pool_wide=health.pool_wide)
    write, loop.slots = slots_effect(
        pool=pool,
        spec=spec,
        members=planned,
        observed=obs.slots,
        proxy_url=proxy_url,
        last=loop.slots,
    )
    if write is not None:
        loop.effects.append(write)
    if create is not None:
        loop.effects.append(create)
    if spec.mode is Mode.MANAGE:
        for effect in loop.effects:
            if isinstance(effect, TerminatePod) and effect.cooldown_datacenter:
                working.with_datacenter_replacement(effect.cooldown_datacenter, now)
    kept = planned if spec.mode is Mode.MANAGE else real
    working.replace(members=tuple(m for m in kept if m.phase != Phase.GONE))
    return _finish(loop, generation=generation, desired=desired)


def _blockers(loop: LoopState) -> tuple[list[tuple[str, str]], dict[int, str]]:
    """What keeps the pool from acting (NotActing), and what nginx serves now."""
    obs, spec = loop.obs, loop.spec
    blockers: list[tuple[str, str]] = []
    wired: dict[int, str] = {}
    name = spec.nginx.slots_config_map
    if obs.slots_error:
        blockers.append(("SlotsUnavailable", f"the slots ConfigMap {name}: {obs.slots_error}"))
    elif obs.slots is not None:
        # A missing ConfigMap is no blocker: nginx then serves none of the pool's pods
        # (examples/nginx.yaml answers 503), and the slots step creates it with what the
        # members say, in Manage only (DryRun plans it; Observe writes nothing).
        try:
            wired = wired_pods(obs.slots)
        except SlotsFormatError as err:
            blockers.append(("SlotsUnreadable", f"the slots ConfigMap {name}: {err}"))
    if obs.secret.problem:
        blockers.append(("EnvSecretUnavailable", obs.secret.problem))
    return blockers, wired


def _drive_members(
    loop: LoopState, health: PoolHealth, canary: release.CanaryCall | None
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


def _finish(loop: LoopState, *, generation: int, desired: int) -> Decision:
    """The summary fields, Ready, Reconciling and Stalled, the conditions' Events, the plan;
    Observe keeps only the finalizer's effects."""
    mode, conds = loop.spec.mode, loop.conds
    members = loop.status.current.members
    loop.status.replace(
        mode=mode.value,
        observed_generation=generation,
        desired=desired,
        # A wired pod whose probes fail hard serves nobody (kept only while the controller
        # may be blind, rpp/machines/member.py `blind`): Ready never counts it.
        ready=sum(
            1
            for m in members
            if m.phase == Phase.READY and m.slot is not None and not fails_hard(m, loop.settings)
        ),
        cost_per_hour=round(
            prices.billed(loop.owned)
            + sum(p or 0.0 for p in unconfirmed.prices(unconfirmed.waiting_members(members))),
            4,
        ),
    )
    deleting = loop.obs.pool.deleting_since is not None
    conds.set_ready(mode=mode, deleting=deleting)
    progress.set_progress(conds, mode=mode, deleting=deleting)
    effects = [*loop.effects, *conds.events(), *_finalizer(loop)]
    actions = [e for e in effects if not isinstance(e, RecordEvent | Finalizer)]
    status = loop.status.current.with_plan(actions if mode is Mode.DRY_RUN else ()).pruned(
        loop.now
    )
    if mode is Mode.MANAGE:
        # Stored before act carries them out (rpp/decide/intents.py).
        status = intents.write_ahead(status, actions, loop.now)
    if mode is Mode.OBSERVE:
        effects = [e for e in effects if isinstance(e, Finalizer)]
    for effect in actions if mode is not Mode.OBSERVE else ():
        loop.note(
            ("would: " if mode is Mode.DRY_RUN else "") + effect.describe(),
            pod=effect.pod,
            effect=effect.action,
        )
    for bookkeeping in (e for e in effects if isinstance(e, Finalizer)):
        loop.note(bookkeeping.describe(), effect=bookkeeping.action)
    return Decision(
        status=status,
        effects=tuple(effects),
        log=tuple(loop.log),
        transitions=tuple(loop.transitions),
        slots=loop.slots,
        needs_write_ahead=mode is Mode.MANAGE
        and any(intents.intent_for(e, loop.now) is not None for e in effects),
        acts=tuple(e for e in effects if not isinstance(e, RecordEvent)),
    )


def _finalizer(loop: LoopState) -> list[Effect]:
    """A Manage pool carries the finalizer; one in another mode does not (its removal
    during a deletion is rpp/decide/deletion.py's)."""
    held, manage = loop.obs.pool.finalizer, loop.spec.mode is Mode.MANAGE
    if loop.obs.pool.deleting_since is not None or held == manage:
        return []
    if manage:
        policy = loop.spec.deletion_policy
        what = "its pods are terminated" if policy == "Delete" else "its pods are named"
        return [
            AddFinalizer(reason=f"deleting the pool waits until {what} (deletionPolicy {policy})")
        ]
    return [
        RemoveFinalizer(
            reason=f"the pool is in {loop.spec.mode.value}, which never terminates pods: "
            "deleting it leaves them running"
        )
    ]
