"""Driving one member for one loop: the functions the pool calls, and their result.

The pool never builds a `MemberMachine` itself. Once per loop it calls `observe` for
every member (which folds the loop's facts into the record with `refresh`, then sends
the machine's `observe` event; `observe_unlisted` when RunPod's listing could not be
read), and it may then send its own orders with `drain` and
`replacement_wired`. Each returns a `MemberStep`: the new frozen record, the effects to
carry out, and the moves taken (for history). New pods get their record from
`new_member`. Decide code: pure functions of (record, signals, now).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from rpp.machines.member import MemberMachine
from rpp.machines.member_view import MemberView, Move
from rpp.machines.signals import MemberSignals, refresh
from rpp.model.effects import Effect
from rpp.model.members import MemberRecord, Phase
from rpp.model.observations import RunPodPod


@dataclass(frozen=True)
class MemberStep:
    """The outcome of driving one member for one event: its new record and effects."""

    record: MemberRecord
    effects: tuple[Effect, ...]
    moves: tuple[Move, ...]

    @property
    def gone(self) -> bool:
        return self.record.phase == Phase.GONE


# The events a quiet loop sends: taking no transition is their usual outcome, not a bug.
_OBSERVING = frozenset({"observe", "observe_unlisted"})


class _Cache:
    """One machine, rehydrated for each member: building one (callback resolution) costs
    ~7x more than driving one. A plain module-level slot, not a thread-local: decide runs
    synchronously on the controller's one event-loop thread (the simulator and the soak's
    worker processes likewise), so no two members are ever driven at once."""

    machine: MemberMachine | None = None


def _machine(record: MemberRecord) -> MemberMachine:
    machine = _Cache.machine
    if machine is None:
        machine = MemberMachine(MemberView(record))
        _Cache.machine = machine
    else:
        machine.rehydrate(record)
    return machine


def _run(
    record: MemberRecord,
    event: str,
    *,
    signals: MemberSignals,
    now: dt.datetime,
    reason: str | None = None,
    image: str | None = None,
) -> MemberStep:
    machine = _machine(record)
    # Every event gets the same kwargs, so no callback ever misses one it names.
    kwargs: dict[str, Any] = {"signals": signals, "now": now, "reason": reason, "image": image}
    if event in _OBSERVING and not machine.may_move(event, **kwargs):
        # No transition's guards pass: sending would change nothing (a quiet loop).
        return MemberStep(record=record, effects=(), moves=())
    try:
        machine.send(event, **kwargs)
    except BaseException:
        _Cache.machine = None  # never reuse an engine that raised mid-event
        raise
    view = machine.view
    if event not in _OBSERVING and not view.moves:
        # The pool's orders have no guards: one that moved nothing was sent to a member
        # in a phase it does not leave from, which is a bug in the pool.
        raise ValueError(
            f"member {record.pod_id} is {record.phase}; {event} does not apply to that phase"
        )
    if view.current.phase == Phase.GONE:
        _Cache.machine = None  # the engine stops for good once it enters a final state
    return MemberStep(record=view.record(), effects=tuple(view.effects), moves=tuple(view.moves))


def observe(record: MemberRecord, *, signals: MemberSignals, now: dt.datetime) -> MemberStep:
    """One loop for one member: fold in this loop's facts, then let the machine decide."""
    return _run(refresh(record, signals, now), "observe", signals=signals, now=now)


def observe_unlisted(
    record: MemberRecord, *, signals: MemberSignals, now: dt.datetime
) -> MemberStep:
    """One loop whose RunPod listing could not be read: fold in the probe only (no
    missing listing is counted, no RunPod field read), then let the machine quarantine
    a wired member whose probes fail hard, the one move that needs no word from RunPod."""
    return _run(
        refresh(record, signals, now, listing=False),
        "observe_unlisted",
        signals=signals,
        now=now,
    )


def drain(
    record: MemberRecord,
    *,
    reason: str,
    image: str | None,
    signals: MemberSignals,
    now: dt.datetime,
) -> MemberStep:
    """The pool's order to take a Ready member out for an update (to `image`) or scale-down."""
    return _run(record, "drain", signals=signals, now=now, reason=reason, image=image)


def replacement_wired(
    record: MemberRecord, *, signals: MemberSignals, now: dt.datetime
) -> MemberStep:
    """The pool reports a Flagged member's replacement is wired: drain it."""
    return _run(record, "replacement_wired", signals=signals, now=now)


def retire(record: MemberRecord, *, signals: MemberSignals, now: dt.datetime) -> MemberStep:
    """The pool shrinks and this warming member is not serving yet: terminate it."""
    return _run(record, "retire", signals=signals, now=now)


def delete(record: MemberRecord, *, signals: MemberSignals, now: dt.datetime) -> MemberStep:
    """The pool is being deleted: drain the member if it serves, else terminate it."""
    return _run(record, "delete", signals=signals, now=now)


def let_go(
    record: MemberRecord, *, reason: str, signals: MemberSignals, now: dt.datetime
) -> MemberStep:
    """The pool will not replace this Flagged member first (`reason` says why): out of
    nginx it is terminated at once, still serving it drains."""
    return _run(record, "let_go", signals=signals, now=now, reason=reason)


def new_member(
    pod: RunPodPod,
    *,
    now: dt.datetime,
    slot: int | None = None,
    replacement_for: str | None = None,
    adopted: bool = False,
) -> MemberRecord:
    """A record for a pod the pool just found: Warming, or Ready if already in a slot."""
    return MemberRecord(
        pod_id=pod.id,
        name=pod.name,
        phase=Phase.WARMING if slot is None else Phase.READY,
        since=now,
        slot=slot,
        datacenter=pod.datacenter,
        gpu_type=pod.gpu_type,
        image=pod.image,
        cost_per_hr=pod.cost_per_hr,
        created_at=pod.created_at,
        replacement_for=replacement_for,
        adopted=adopted,
    )
