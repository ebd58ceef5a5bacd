"""Decide for a pool whose spec cannot be acted on: InvalidSpec, and nothing else done.

Where it sits: decide, beside the pool decision (rpp/decide/pool.py), for the pools it
never sees. A spec that does not load, or that would fight an older pool over the same
pods or ConfigMaps (rpp/model/clashes.py), is not observed, decided or acted on: the
controller (rpp/controller/pool_specs.py `report_invalid`) asks here for the status to
write instead, records its Events and writes it like any other status.

The status is the stored one with InvalidSpec True, every problem listed, and Ready and
the progress conditions following from it. A pool being deleted waits here too: its
pods are terminated by its deletionPolicy only once the spec reads again, and the
message says so, with the way out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from rpp.decide.progress import set_progress
from rpp.decide.state.conditions import Cond, Conditions
from rpp.decide.state.working_status import WorkingStatus
from rpp.model.effects import RecordEvent
from rpp.model.spec import Mode
from rpp.model.status import PoolStatus


@dataclass(frozen=True)
class InvalidSpec:
    """The status to write for a pool whose spec is refused, and its Events."""

    status: PoolStatus
    events: tuple[RecordEvent, ...]
    problems: str  # every problem, in one line, for the log


def decide_invalid(
    *,
    status: PoolStatus,
    problems: Sequence[object],
    reason: str,
    generation: int,
    deleting: bool,
    now: dt.datetime,
) -> InvalidSpec:
    """InvalidSpec (`reason`: ValidationFailed, or the clash) over the stored `status`;
    `deleting`: the pool object has a deletionTimestamp."""
    working = WorkingStatus(status)
    conds = Conditions(working, now=now, generation=generation)
    listing = "; ".join(str(p) for p in problems)
    waiting = ""
    if deleting:
        waiting = (
            "the pool is being deleted, and its pods are terminated only once the spec "
            "is fixed (or remove the finalizer to leave them: docs/operating.md); "
        )
    conds.set(
        Cond.INVALID_SPEC,
        true=True,
        reason=reason,
        message=f"{waiting}the spec has {len(problems)} problem(s), nothing is done until "
        f"they are fixed: {listing}",
    )
    working.replace(observed_generation=generation)
    conds.set_ready(mode=Mode(status.mode), deleting=deleting)
    set_progress(conds, mode=Mode(status.mode), deleting=deleting)
    return InvalidSpec(status=working.current, events=tuple(conds.events()), problems=listing)
