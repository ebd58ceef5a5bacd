"""The only place that reads time.

Decision code never calls this module: it gets `now` as an argument. Adapters and the
loop get a `Clock` injected, so the simulator and the tests can run the real code on
simulated time. Wall time is always an aware UTC `datetime`; durations are seconds as
`float`. Latencies are measured on the running event loop's clock (`loop.time()`),
which the simulator's virtual-time loop advances without sleeping.

The controller keeps time with a `SteadyClock`: wall time counted on the monotonic clock
from an anchor, so a step of the host's clock (NTP after a suspend, a hand `date -s`)
moves no cap and no rule duration (issue 25: a +1 h step let 4 creates through in one
hour under maxCreatesPerHour 2; a -1 h step kept a dead pod billed an hour longer). The
anchor is the API server's `Date` header, read off answers the controller gets anyway
(rpp/adapters/kube/real.py): the cluster's time, the same for every replica and every
restart, which the timestamps in status are measured against.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import time
from collections.abc import Callable
from typing import Protocol

from rpp.adapters.logs import layer_logger

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


STEP_TOLERANCE_S = 5.0
"""How far the host clock or the API server's Date may disagree with the steady time
before it is called a step and logged. A Date names whole seconds (truncated), so each of
two readings, the anchor's and the one compared, is up to 1 s early, and the anchor also
carries its answer's time in flight; 5 s leaves room for that and for two hosts'
ordinary NTP skew, and is far under the shortest time a rule measures (the 30 s loop, a
dead pod out of nginx within 60 s), so no step too small to log could move a decision."""

log = layer_logger("rpp.adapters.clock")


class ServerDates(Protocol):
    """Where a Kubernetes adapter reports the `Date` of each answer it gets."""

    def elapsed(self) -> float:
        """The monotonic reading to pass as `sent` when the answer arrives."""
        ...

    def server_answered(self, date: str | None, *, sent: float) -> None:
        """An answer sent at `sent` (an `elapsed()` reading) carried this `Date` header."""
        ...


class SteadyClock:
    """Wall time that moves only as the monotonic clock does, anchored on the cluster's.

    `now()` is an anchor plus the monotonic seconds since it. Until an API server's Date
    has been seen the anchor is the host clock; the first Date moves it only when the host
    clock falls outside what that Date allows (its second, plus the answer's time in
    flight), so a host in sync keeps its sub-second reading. After that nothing moves it:
    - a host clock step is logged once, with its size, and otherwise ignored;
    - a Date that disagrees (the cluster's clock stepped) is logged once too, and is not
      followed. A step of the cluster's clock moves durations as much as the host's would,
      and an HA control plane has several API servers behind one address, each answering
      with its own clock: following every Date could swing the controller between them.
      A new process (a restart, the standby taking over) anchors on the cluster's time
      again, as it must to agree with what is in status.
    """

    def __init__(
        self,
        *,
        host: Clock | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        tolerance: float = STEP_TOLERANCE_S,
    ) -> None:
        self._host = host or SystemClock()
        self._monotonic = monotonic
        self._tolerance = tolerance
        # now() = base + monotonic(): timedelta arithmetic, exact to the microsecond.
        self._base = self._host.now() - dt.timedelta(seconds=monotonic())
        self._host_offset = 0.0  # host - steady seconds, as last logged (or anchored)
        self._date_offset = 0.0  # Date - steady seconds, as last logged
        self.anchored = False  # whether an API server's Date anchored the time

    def now(self) -> dt.datetime:
        steady = self._at(self._monotonic())
        self._check_host(steady)
        return steady

    def elapsed(self) -> float:
        return self._monotonic()

    def server_answered(self, date: str | None, *, sent: float) -> None:
        server = _http_date(date)
        if server is None:
            return
        answered = self._monotonic()
        in_flight = max(0.0, answered - sent)
        # The server stamped its Date between `sent` and `answered`, its clock then
        # reading within the second the Date names: compare middles, allow the spread.
        server_mid = server + dt.timedelta(seconds=0.5)
        ours_mid = self._at(sent + in_flight / 2)
        offset = (server_mid - ours_mid).total_seconds()
        slack = 0.5 + in_flight / 2
        if not self.anchored:
            self.anchored = True
            if abs(offset) > slack:  # the host is off the cluster: take the cluster's time
                self._base += dt.timedelta(seconds=offset)
                self._host_offset -= offset
                if abs(offset) > self._tolerance:
                    log.warning(
                        "the host clock is %s off the API server's (its Date header: %s; "
                        "the host: %s): the controller takes the API server's time and keeps "
                        "it by its monotonic clock; check the host's time synchronisation",
                        step_text(-offset),
                        to_rfc3339(server),
                        to_rfc3339(self._host.now()),
                    )
            return
        if abs(offset - self._date_offset) > self._tolerance + slack:
            log.warning(
                "the API server's clock stepped %s (its Date header reads %s, the "
                "controller's clock %s): the controller keeps its own time by its monotonic "
                "clock (a restart takes the API server's); check the cluster's time "
                "synchronisation",
                step_text(offset - self._date_offset),
                to_rfc3339(server),
                to_rfc3339(self._at(answered)),
            )
            self._date_offset = offset

    def _at(self, monotonic: float) -> dt.datetime:
        return self._base + dt.timedelta(seconds=monotonic)

    def _check_host(self, steady: dt.datetime) -> None:
        host = self._host.now()
        offset = (host - steady).total_seconds()
        if abs(offset - self._host_offset) > self._tolerance:
            log.warning(
                "the host clock stepped %s (it reads %s, the controller's clock %s): the "
                "controller keeps time by its monotonic clock, so no cap or rule duration "
                "moves; check the host's time synchronisation",
                step_text(offset - self._host_offset),
                to_rfc3339(host),
                to_rfc3339(steady),
            )
            self._host_offset = offset


def step_text(seconds: float) -> str:
    """A clock step, signed, to the second: +1h00m00s, -59m58s, +7s."""
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(round(abs(seconds)), 3600)
    minutes, whole = divmod(rest, 60)
    if hours:
        return f"{sign}{hours}h{minutes:02d}m{whole:02d}s"
    if minutes:
        return f"{sign}{minutes}m{whole:02d}s"
    return f"{sign}{whole}s"


def http_date(when: dt.datetime) -> str:
    """`when` as an HTTP Date header (whole seconds, truncated, as servers send it)."""
    return email.utils.format_datetime(when.astimezone(UTC).replace(microsecond=0), usegmt=True)


def _http_date(text: str | None) -> dt.datetime | None:
    """An HTTP Date header as an aware UTC datetime; None when absent or not a date."""
    if not text:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.astimezone(UTC)
