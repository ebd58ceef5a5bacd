"""The only place that reads time.

Decision code never calls this module: it gets `now` as an argument. Adapters and the
loop get a `Clock` injected, so the simulator and the tests can run the real code on
simulated time. Wall time is always an aware UTC `datetime`; durations are seconds as
`float`. Latencies are measured on the running event loop's clock (`loop.time()`),
which the simulator's virtual-time loop advances without sleeping.
"""

from __future__ import annotations

import datetime as dt
from typing import Protocol

# Formatting lives in rpp/model/timestamps.py (pure); these names stay importable from here.
from rpp.model.timestamps import UTC as UTC
from rpp.model.timestamps import from_rfc3339 as from_rfc3339
from rpp.model.timestamps import to_rfc3339 as to_rfc3339


class Clock(Protocol):
    def now(self) -> dt.datetime:
        """The current wall time, timezone-aware UTC."""
        ...


class SystemClock:
    """The real clock of a running controller."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(UTC)


class ManualClock:
    """A clock the caller moves: tests and the simulator advance it explicitly."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        self._now = start or dt.datetime(2026, 1, 1, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start time")

    def now(self) -> dt.datetime:
        return self._now

    def advance(self, seconds: float) -> dt.datetime:
        if seconds < 0:
            raise ValueError(f"cannot move a clock backwards ({seconds}s)")
        self._now += dt.timedelta(seconds=seconds)
        return self._now

    def set(self, when: dt.datetime) -> None:
        if when < self._now:
            raise ValueError(f"cannot move a clock backwards (from {self._now} to {when})")
        self._now = when
