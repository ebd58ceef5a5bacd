"""A clock that only waiting moves, for the Kubernetes adapter's patience in tests.

The adapter waits out an API server's passing refusals (rpp/adapters/kube/transient.py):
seconds of backoff, a 403 retried for 10 s before it counts as missing RBAC. With a
`Stopwatch` as its clock and sleep, a test goes through those windows at once and can
assert the waits the adapter chose (`slept`).
"""

from __future__ import annotations

import asyncio

from rpp.adapters.kube.transient import Patience


class Stopwatch:
    """Monotonic seconds that advance by exactly what is slept."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)

    def patience(self) -> Patience:
        """The adapter's default patience, on this clock."""
        return Patience(clock=self, sleep=self.sleep)
