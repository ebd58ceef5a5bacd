"""The mutable model a member machine drives, wrapped around one frozen member record.

python-statemachine reads and writes the current state through an attribute of its
model on every access. Status records are frozen, so the machine gets this small view
instead: `phase` reads and writes the working copy, actions change other fields with
`change` and append effects with `emit`, and at the end `record()` hands back the new
frozen record. The view also stamps `since` whenever the phase changes and keeps the
list of moves taken, which the pool uses for history and the tests for checking that
effects come only from transitions. Decide code; no I/O.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from rpp.model.effects import Effect
from rpp.model.members import MemberRecord, Phase


@dataclass(frozen=True)
class Move:
    """One transition the machine took: `event` moved the member from `source` to `target`.

    A loop where no transition applies takes no move at all. Self-transitions are
    moves with `source == target`; they keep `since`, and three of them act: Flagged ->
    Flagged unwires an unreachable pod, Updating -> Updating rolls a failed update back
    (UpdatePod), and Terminating -> Terminating sends the terminate again.
    """

    event: str
    source: str
    target: str

    @property
    def changed_phase(self) -> bool:
        return self.source != self.target


class MemberView:
    """A working copy of one member record that the machine mutates during one event."""

    def __init__(self, record: MemberRecord) -> None:
        self.load(record)

    def load(self, record: MemberRecord) -> None:
        """Start over on `record`: the machine reading this view is now in its phase."""
        self._record = record
        self.effects: list[Effect] = []
        self.moves: list[Move] = []

    @property
    def phase(self) -> Phase:
        return self._record.phase

    @phase.setter
    def phase(self, value: str) -> None:
        # The library writes the phase on every transition, self-transitions included;
        # rebuilding the record for the same phase would be wasted work.
        if value != self._record.phase:
            self._record = self._record.replace(phase=Phase(value))

    @property
    def current(self) -> MemberRecord:
        return self._record

    def change(self, **changes: Any) -> None:
        self._record = self._record.replace(**changes)

    def emit(self, effect: Effect) -> None:
        self.effects.append(effect)

    def moved(self, move: Move, now: dt.datetime) -> None:
        self.moves.append(move)
        if move.changed_phase:
            self._record = self._record.replace(since=now)

    def record(self) -> MemberRecord:
        return self._record

    def __repr__(self) -> str:
        return f"MemberView({self._record.pod_id}, phase={self._record.phase})"
