"""An asyncio event loop on virtual time, and a wall clock that follows it.

Where it sits: under the simulator and the story tests. The real controller code
(prober timeouts with asyncio.timeout, fake pods that answer slowly with
asyncio.sleep, the loop's interval) runs unchanged; only time is simulated. When
every task is waiting on a timer, the loop jumps its clock to the next timer instead
of sleeping, so 24 hours of a 10-pod pool take about 30 s. It works because everything
in the simulator talks through in-process transports: there are no sockets to wait on. A
real socket still works (select() is polled without blocking), but waiting on one
would spin: the simulator never opens any.

`VirtualClock` is the `rpp.adapters.clock.Clock` of that world: wall time = a fixed start plus
the loop's virtual seconds, so decide's `now`, the fake cloud's lifecycle and the
fake pods' process start times all agree with the loop's timers. `SteppedClock` is the
controller host's wall clock: true time plus the steps a scenario made to it
(`do: clock-step`), which the controller's steady clock must not follow.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import selectors
from collections.abc import Awaitable, Callable
from typing import TypeVar

from rpp.adapters.clock import UTC, Clock

T = TypeVar("T")


class _ClockworkSelector(selectors.DefaultSelector):
    """A selector that never blocks: an idle wait advances the loop's virtual clock."""

    def __init__(self) -> None:
        super().__init__()
        self.advance: Callable[[float], None] = lambda seconds: None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if not ready and timeout is not None and timeout > 0:
            self.advance(timeout)
        return ready


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose `time()` only moves when every task waits on a timer."""

    def __init__(self) -> None:
        selector = _ClockworkSelector()
        super().__init__(selector)
        self._virtual = 0.0
        selector.advance = self._advance

    def _advance(self, seconds: float) -> None:
        self._virtual += seconds

    def time(self) -> float:
        return self._virtual


class VirtualClock:
    """Wall time that follows the running virtual loop: start + loop.time()."""

    def __init__(self, loop: VirtualTimeLoop, start: dt.datetime | None = None) -> None:
        self.loop = loop
        self.start = start or dt.datetime(2026, 1, 1, tzinfo=UTC)
        if self.start.tzinfo is None:
            raise ValueError("VirtualClock needs a timezone-aware start time")

    def now(self) -> dt.datetime:
        return self.start + dt.timedelta(seconds=self.loop.time())


class SteppedClock:
    """A host's wall clock: another clock plus the steps made to it (NTP, `date -s`)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.offset = dt.timedelta()

    def now(self) -> dt.datetime:
        return self.clock.now() + self.offset

    def step(self, seconds: float) -> None:
        self.offset += dt.timedelta(seconds=seconds)


def run_virtual(
    main: Callable[[VirtualClock], Awaitable[T]], *, start: dt.datetime | None = None
) -> T:
    """Run `main(clock)` to completion on a fresh virtual-time loop."""
    loop = VirtualTimeLoop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(_call(main, VirtualClock(loop, start)))
    finally:
        try:
            _finish_tasks(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def _finish_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is still pending and let it finish, as `asyncio.run` does.

    A task left pending when the loop closes (a request a fault still holds, a
    controller process killed mid-call) would be destroyed pending, and Python warns
    "Task was destroyed but it is pending!" at exit.
    """
    pending = asyncio.all_tasks(loop)
    if not pending:
        return
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


async def _call(main: Callable[[VirtualClock], Awaitable[T]], clock: VirtualClock) -> T:
    return await main(clock)
