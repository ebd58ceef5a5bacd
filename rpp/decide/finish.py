"""The end of every loop: the summary fields and status.spend, Ready, Reconciling and
Stalled, the plan.

Where it sits: decide, the last step of every branch of rpp/decide/pool.py (the acting
steps, a deletion, a loop blind to RunPod's list, a rebuild, a pool that may not act).
It turns the loop's working state into the `Decision` the controller carries out: the
status with its write-ahead intents (Manage), the plan (DryRun) or nothing to do
(Observe), the conditions' Events, the finalizer's bookkeeping, and what the controller
needs to act without deciding again (`needs_write_ahead`, `acts`).
"""

from __future__ import annotations

from dataclasses import dataclass

from rpp.decide import progress, spend
from rpp.decide.capacity import prices, unconfirmed
from rpp.decide.ledger import intents
from rpp.decide.nginx_slots import RenderedSlots
from rpp.decide.state.loop_state import LoopState, Note, Transition
from rpp.machines.signals import fails_hard
from rpp.model.effects import (
    AddFinalizer,
    Effect,
    Finalizer,
    RecordEvent,
    RemoveFinalizer,
)
from rpp.model.members import Phase
from rpp.model.spec import Mode
from rpp.model.status import PoolStatus


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
    must be stored before act carries anything out (rpp/decide/ledger/intents.py)."""
    acts: tuple[Effect, ...] = ()
    """The effects that change something besides the status (every one but the Events):
    a loop that carried one out may not be decided again on a re-read pool."""


def finish(loop: LoopState, *, generation: int, desired: int) -> Decision:
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
        spend=spend.next_spend(
            loop.status.current, billing=loop.obs.billing, owned=(p.id for p in loop.owned)
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
        # Stored before act carries them out (rpp/decide/ledger/intents.py).
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
