"""The pool status one decide call builds: one owner, a few named ways to change it.

Where it sits: decide. rpp/decide/pool.py (and rpp/decide/invalid_spec.py) wrap the
stored status in one `WorkingStatus` per call; `LoopState.status` is it, and
`Conditions` writes its conditions through it, so every step reads `current` and
changes the status only by the methods below, never by assigning a field of a helper.
PoolStatus stays frozen: each change takes the next value from its pure `with_*` and
`replace` helpers (rpp/model/status.py). Nothing here does I/O.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from rpp.model.members import MemberRecord
from rpp.model.records import ConditionStatus, HistoryEntry
from rpp.model.status import PoolStatus


class WorkingStatus:
    """This loop's status so far, on top of the stored one."""

    def __init__(self, stored: PoolStatus) -> None:
        self._current = stored

    @property
    def current(self) -> PoolStatus:
        """The status as the steps so far left it."""
        return self._current

    def adopt(self, status: PoolStatus) -> None:
        """Take a status a pure helper derived from `current` (intents, autoscaling...)."""
        self._current = status

    def replace(self, **changes: Any) -> None:
        """Change top-level fields (PoolStatus.replace)."""
        self._current = self._current.replace(**changes)

    def with_member(self, record: MemberRecord) -> None:
        """Add or update one member (PoolStatus.with_member)."""
        self._current = self._current.with_member(record)

    def with_history(self, *entries: HistoryEntry) -> None:
        """Append history entries, keeping the newest (PoolStatus.with_history)."""
        self._current = self._current.with_history(*entries)

    def with_datacenter_replacement(self, datacenter: str, now: dt.datetime) -> None:
        """Log a replacement in `datacenter` (PoolStatus.with_datacenter_replacement)."""
        self._current = self._current.with_datacenter_replacement(datacenter, now)

    def set_condition(
        self,
        *,
        type: str,
        status: ConditionStatus,
        reason: str,
        message: str,
        now: dt.datetime,
        generation: int | None = None,
    ) -> None:
        """Set one condition as given (PoolStatus.with_condition); `Conditions` decides
        when to set or clear the pool's named conditions."""
        self._current = self._current.with_condition(
            type=type,
            status=status,
            reason=reason,
            message=message,
            now=now,
            generation=generation,
        )
