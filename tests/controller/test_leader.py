"""Leader election on a Lease: two replicas, one leader, and a safe hand-over.

The replicas share one in-memory Kubernetes API and run on a virtual-time loop, so the
15 s lease and its deadlines pass in no wall time. tests/controller/test_leader_http.py runs the
same elector against a Kubernetes API emulator over real HTTP.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from rpp.adapters.kube.api import KubeSettings
from rpp.controller.leader import (
    LEASE_DURATION_S,
    LEASE_NAME,
    RENEW_DEADLINE_S,
    RETRY_PERIOD_S,
    LeaderElector,
    LeaseTiming,
)
from rpp.sim.kube_memory import MemoryKubeApi
from rpp.sim.virtual_time import VirtualClock, run_virtual
from tests.controller_kit import Partitionable

T = TypeVar("T")


class Replica:
    """An elector with a record of when it led, on the loop's clock."""

    def __init__(self, name: str, kube: Any, *, clock: VirtualClock) -> None:
        self.view = kube
        self.changes: list[tuple[float, bool]] = []
        self.elector = LeaderElector(
            kube=kube, identity=name, clock=clock, on_change=self._changed
        )
        self.task: asyncio.Task[None] | None = None

    def _changed(self, leading: bool) -> None:
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:  # the loop is closing: the test is over
            return
        self.changes.append((now, leading))

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run())

    async def kill(self) -> None:
        """The process dies: no release, the Lease just stops being renewed."""
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

    def led_from(self) -> float | None:
        return next((t for t, leading in self.changes if leading), None)

    def stepped_down_at(self) -> float | None:
        led = self.led_from()
        if led is None:
            return None
        return next((t for t, leading in self.changes if not leading and t > led), None)


async def holder_and_standby(
    kube: Any, *, clock: VirtualClock, holder_view: Any = None
) -> tuple[Replica, Replica]:
    """Replica a, started first, takes the Lease; b, half a second later, waits as standby.
    a reaches the API through `holder_view` where given (one a test can cut)."""
    a = Replica("a", kube if holder_view is None else holder_view, clock=clock)
    b = Replica("b", kube, clock=clock)
    a.start()
    await asyncio.sleep(0.5)
    b.start()
    return a, b


def virtual(body: Callable[[VirtualClock, MemoryKubeApi], Awaitable[T]]) -> T:
    async def main(clock: VirtualClock) -> T:
        return await body(clock, MemoryKubeApi(KubeSettings(namespace="runpod"), clock=clock))

    return run_virtual(main)


def test_the_first_replica_creates_the_lease_and_leads() -> None:
    async def body(clock: VirtualClock, kube: MemoryKubeApi) -> None:
        a = Replica("a", kube, clock=clock)
        a.start()
        await asyncio.sleep(1)

        lease = await kube.get_lease(LEASE_NAME)
        assert a.elector.is_leader
        assert a.changes[-1] == (0.0, True)
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == "a"
        assert lease["spec"]["leaseDurationSeconds"] == LEASE_DURATION_S
        assert lease["spec"]["renewTime"].startswith("2026-01-01T00:00:00.")
        await a.kill()

    virtual(body)


def test_the_standby_waits_while_the_holder_renews() -> None:
    async def body(clock: VirtualClock, kube: MemoryKubeApi) -> None:
        a, b = await holder_and_standby(kube, clock=clock)
        renewals = set()
        for _ in range(30):  # two minutes: eight lease durations
            await asyncio.sleep(4)
            lease = await kube.get_lease(LEASE_NAME)
            assert lease is not None
            renewals.add(lease["spec"]["renewTime"])

        assert a.elector.is_leader
        assert not b.elector.is_leader
        assert b.led_from() is None
        assert len(renewals) == 30  # the holder renewed every retry period
        await a.kill()
        await b.kill()

    virtual(body)


def test_the_standby_takes_over_within_the_lease_duration_when_the_holder_dies() -> None:
    async def body(clock: VirtualClock, kube: MemoryKubeApi) -> None:
        a, b = await holder_and_standby(kube, clock=clock)
        await asyncio.sleep(60)
        died = asyncio.get_running_loop().time()
        await a.kill()
        await asyncio.sleep(LEASE_DURATION_S + 2 * RETRY_PERIOD_S)

        took_over = b.led_from()
        assert took_over is not None
        # Not before the record stood still for a whole lease, and within one retry after.
        assert died < took_over <= died + LEASE_DURATION_S + RETRY_PERIOD_S
        lease = await kube.get_lease(LEASE_NAME)
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == "b"
        assert lease["spec"]["leaseTransitions"] == 1
        await b.kill()

    virtual(body)


@pytest.mark.parametrize("how", ["fail", "hang"])
def test_a_partitioned_holder_stops_acting_before_anyone_else_starts(how: str) -> None:
    async def body(clock: VirtualClock, kube: MemoryKubeApi) -> None:
        a, b = await holder_and_standby(kube, clock=clock, holder_view=Partitionable(kube))
        await asyncio.sleep(30)
        lease = await kube.get_lease(LEASE_NAME)
        assert lease is not None
        last_renew = asyncio.get_running_loop().time()
        a.view.cut = how  # A still runs, but cannot reach the API server any more
        await asyncio.sleep(LEASE_DURATION_S + 3 * RETRY_PERIOD_S)

        down, up = a.stepped_down_at(), b.led_from()
        assert down is not None
        assert up is not None
        assert down <= last_renew + RENEW_DEADLINE_S  # stopped at its renew deadline...
        assert up - down >= LEASE_DURATION_S - RENEW_DEADLINE_S - RETRY_PERIOD_S
        assert down < up  # ...so the two never led at once
        await a.kill()
        await b.kill()

    virtual(body)


def test_a_released_lease_is_taken_over_at_the_standbys_next_try() -> None:
    async def body(clock: VirtualClock, kube: MemoryKubeApi) -> None:
        a, b = await holder_and_standby(kube, clock=clock)
        await asyncio.sleep(20)
        await a.kill()  # as on SIGTERM: the elector stops, then the process releases
        released = asyncio.get_running_loop().time()
        await a.elector.release()
        await asyncio.sleep(2 * RETRY_PERIOD_S)

        took_over = b.led_from()
        assert took_over is not None
        assert took_over - released <= RETRY_PERIOD_S
        await b.kill()

    virtual(body)


def test_release_never_clears_a_lease_another_replica_holds() -> None:
    async def body(clock: VirtualClock, kube: MemoryKubeApi) -> None:
        a, b = await holder_and_standby(kube, clock=clock)
        await asyncio.sleep(5)

        await b.elector.release()  # the standby shuts down

        lease = await kube.get_lease(LEASE_NAME)
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == "a"
        assert a.elector.is_leader
        await a.kill()

    virtual(body)


def test_two_replicas_starting_together_elect_exactly_one() -> None:
    async def body(clock: VirtualClock, kube: MemoryKubeApi) -> None:
        replicas = [Replica(name, kube, clock=clock) for name in ("a", "b", "c")]
        for r in replicas:
            r.start()
        await asyncio.sleep(60)

        assert sum(r.elector.is_leader for r in replicas) == 1
        assert sum(r.led_from() is not None for r in replicas) == 1
        for r in replicas:
            await r.kill()

    virtual(body)


def test_lease_timing_must_let_a_holder_stop_before_a_take_over() -> None:
    with pytest.raises(ValueError, match="renew deadline < lease duration"):
        LeaseTiming(lease_duration=10, renew_deadline=15, retry_period=2)
    with pytest.raises(ValueError, match="retry period < renew deadline"):
        LeaseTiming(lease_duration=15, renew_deadline=2, retry_period=2)


@pytest.mark.parametrize(("window", "keeps"), [(3.0 + 1.0, True), (9.0 + 3.0, False)])
def test_an_api_server_restart_shorter_than_the_renew_deadline_keeps_the_holder(
    window: float, keeps: bool
) -> None:
    """A restart's refusals (403 for about 3 s, then 429), waited out by the adapter, delay
    the renewals: within the renew deadline the holder keeps leading and no standby takes
    over; past it, the holder steps down, as for any API server it cannot reach (and
    takes its own Lease again once the server answers)."""

    async def body(clock: VirtualClock, kube: MemoryKubeApi) -> None:
        a, b = await holder_and_standby(kube, clock=clock)
        await asyncio.sleep(10)
        kube.restart(forbidden_s=window * 3 / 4, busy_s=window / 4)
        await asyncio.sleep(window + LEASE_DURATION_S)

        assert (a.stepped_down_at() is None) is keeps
        if keeps:
            assert a.elector.is_leader
            assert b.led_from() is None
        await a.kill()
        await b.kill()

    virtual(body)
