"""Leader election over real HTTP: two electors, the official client, one API emulator.

kmock (made strict by tests/kmock_strict.py: resourceVersion conflicts, PUT, 201) serves
the coordination.k8s.io Lease on 127.0.0.1; each replica talks to it through its own
`RealKubeApi`. The lease is 2 s here, so a take-over happens within a few seconds.

Real sockets mean real time, so nothing here waits a fixed time or bounds a wall-clock
duration: the tests wait for what the standby has read (each replica counts its Lease
reads), and check the take-over against the Lease records themselves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from rpp.adapters.clock import SystemClock
from rpp.adapters.kube.api import KubeSettings
from rpp.adapters.kube.real import RealKubeApi
from rpp.adapters.kube.transient import Patience
from rpp.controller.leader import LEASE_NAME, LeaderElector, LeaseTiming
from tests.kmock_strict import LEASES, StrictKubernetesEmulator
from tests.stopwatch import Stopwatch

pytestmark = pytest.mark.kmock(cls=StrictKubernetesEmulator)

NS = "runpod"
TIMING = LeaseTiming(lease_duration=2.0, renew_deadline=1.2, retry_period=0.2)
SOON = 30.0  # a bound for "it happens", not for how fast: the machine may be loaded


class WatchedKube(RealKubeApi):
    """The real adapter, noting on the loop's clock when each Lease version was first read
    and when each replace was sent."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reads = 0
        self.first_seen: dict[str, float] = {}  # resourceVersion -> loop time
        self.replaced: list[tuple[float, str, dict[str, Any]]] = []  # (sent, version, spec)
        self.read_happened = asyncio.Condition()

    async def get_lease(self, name: str) -> dict[str, Any] | None:
        lease = await super().get_lease(name)
        if lease is not None:
            version = lease["metadata"]["resourceVersion"]
            self.first_seen.setdefault(version, asyncio.get_running_loop().time())
        self.reads += 1
        async with self.read_happened:
            self.read_happened.notify_all()
        return lease

    async def replace_lease(
        self, name: str, *, spec: Mapping[str, Any], resource_version: str
    ) -> dict[str, Any]:
        sent = asyncio.get_running_loop().time()
        self.replaced.append((sent, resource_version, dict(spec)))
        return await super().replace_lease(name, spec=spec, resource_version=resource_version)

    async def wait_reads(self, count: int) -> None:
        """Until the Lease was read `count` times in all."""
        async with asyncio.timeout(SOON), self.read_happened:
            await self.read_happened.wait_for(lambda: self.reads >= count)


class Replica:
    def __init__(self, url: str, name: str, *, patience: Patience | None = None) -> None:
        kube = WatchedKube.for_host(
            host=url,
            settings=KubeSettings(namespace=NS, request_timeout=2.0),
            token="t",
            patience=patience,
        )
        assert isinstance(kube, WatchedKube)
        self.kube = kube
        self.elector = LeaderElector(
            kube=self.kube, identity=name, clock=SystemClock(), timing=TIMING
        )
        self.task = asyncio.create_task(self.elector.run())

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


@pytest.fixture
async def replicas(kmock: StrictKubernetesEmulator) -> AsyncIterator[list[Replica]]:
    made: list[Replica] = []
    yield made
    for replica in made:
        await replica.stop()
        await replica.kube.close()


async def wait_leading(replica: Replica) -> None:
    async with asyncio.timeout(SOON):
        await replica.elector.wait_leading()


async def test_the_standby_takes_over_over_http_when_the_leader_dies(
    kmock: StrictKubernetesEmulator, replicas: list[Replica]
) -> None:
    a = Replica(str(kmock.url), "replica-a")
    replicas.append(a)
    await wait_leading(a)
    b = Replica(str(kmock.url), "replica-b")
    replicas.append(b)
    await b.kube.wait_reads(3)  # it has seen a's Lease three times, and left it alone
    assert not b.elector.is_leader

    await a.stop()  # killed: no release
    await wait_leading(b)

    stored = kmock.objects[LEASES, NS, LEASE_NAME]["spec"]
    assert stored["holderIdentity"] == "replica-b"
    assert stored["leaseTransitions"] == 1
    # b sent its take-over only once a's final record had stood still, as b saw it, for a
    # whole lease (times on b's own loop clock, never the holder's).
    sent, version, spec = b.kube.replaced[0]  # its first write: later ones are renewals
    assert spec["holderIdentity"] == "replica-b"
    assert sent - b.kube.first_seen[version] >= TIMING.lease_duration


async def test_a_released_lease_goes_to_the_standby_at_once_over_http(
    kmock: StrictKubernetesEmulator, replicas: list[Replica]
) -> None:
    a = Replica(str(kmock.url), "replica-a")
    replicas.append(a)
    await wait_leading(a)
    b = Replica(str(kmock.url), "replica-b")
    replicas.append(b)
    await b.kube.wait_reads(2)

    await a.stop()
    await a.elector.release()
    reads_at_release = b.kube.reads
    await wait_leading(b)

    # At its next read or the one after (one may have been under way), not after a whole
    # lease of reads (2 s / 0.2 s = 10).
    assert b.kube.reads - reads_at_release <= 2
    assert kmock.objects[LEASES, NS, LEASE_NAME]["spec"]["holderIdentity"] == "replica-b"


async def test_the_holder_rides_out_an_api_server_restart_without_rbac_advice(
    kmock: StrictKubernetesEmulator,
    replicas: list[Replica],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Right after it starts, an API server refuses everything (403) for a few seconds,
    then answers 429 while its storage fills. The holder's renewals wait that out (on a
    stopwatch here, so within the 1.2 s renew deadline) and keep the Lease; nothing tells
    the operator to fix a Role that lacks nothing."""
    stopwatch = Stopwatch()
    a = Replica(str(kmock.url), "replica-a", patience=stopwatch.patience())
    replicas.append(a)
    await wait_leading(a)

    with caplog.at_level(logging.INFO):
        await kmock.restart(forbidden=3, busy=2)
        await a.kube.wait_reads(a.kube.reads + 3)  # renewed through the window and after

    assert a.elector.is_leader
    stored = kmock.objects[LEASES, NS, LEASE_NAME]["spec"]
    assert (stored["holderIdentity"], stored["leaseTransitions"]) == ("replica-a", 0)
    assert stopwatch.slept == [0.5, 1.0, 2.0, 1.0, 1.0], "the whole window was waited out"
    said = [(r.levelno, r.getMessage()) for r in caplog.records if r.name.startswith("rpp")]
    assert [level for level, _ in said] == [logging.INFO] * 2
    assert not any("rbac" in text.lower() or "Role lacks" in text for _, text in said)
