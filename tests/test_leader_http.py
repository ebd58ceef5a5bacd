"""Leader election over real HTTP: two electors, the official client, one API emulator.

kmock (made strict by tests/kmock_strict.py: resourceVersion conflicts, PUT, 201) serves
the coordination.k8s.io Lease on 127.0.0.1; each replica talks to it through its own
`RealKubeApi`. The lease is 2 s here, so a take-over happens within a few seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kmock_strict import LEASES, StrictKubernetesEmulator

from rpp.adapters.clock import SystemClock
from rpp.adapters.kube.api import KubeSettings
from rpp.adapters.kube.real import RealKubeApi
from rpp.controller.leader import LEASE_NAME, LeaderElector, LeaseTiming

pytestmark = pytest.mark.kmock(cls=StrictKubernetesEmulator)

NS = "runpod"
TIMING = LeaseTiming(lease_duration=2.0, renew_deadline=1.2, retry_period=0.2)


class Replica:
    def __init__(self, url: str, name: str) -> None:
        self.kube = RealKubeApi.for_host(
            host=url, settings=KubeSettings(namespace=NS, request_timeout=2.0), token="t"
        )
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


async def wait_leading(replica: Replica, timeout: float) -> float:
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with asyncio.timeout(timeout):
        await replica.elector.wait_leading()
    return loop.time() - started


async def test_the_standby_takes_over_over_http_when_the_leader_dies(
    kmock: StrictKubernetesEmulator, replicas: list[Replica]
) -> None:
    a = Replica(str(kmock.url), "replica-a")
    replicas.append(a)
    await wait_leading(a, timeout=2)
    b = Replica(str(kmock.url), "replica-b")
    replicas.append(b)
    await asyncio.sleep(1.0)
    assert not b.elector.is_leader

    await a.stop()  # killed: no release
    waited = await wait_leading(b, timeout=5)

    # Not before the record stood still for the lease duration; soon after it.
    assert TIMING.lease_duration - 0.5 <= waited <= TIMING.lease_duration + 1.5
    stored = kmock.objects[LEASES, NS, LEASE_NAME]["spec"]
    assert stored["holderIdentity"] == "replica-b"
    assert stored["leaseTransitions"] == 1


async def test_a_released_lease_goes_to_the_standby_at_once_over_http(
    kmock: StrictKubernetesEmulator, replicas: list[Replica]
) -> None:
    a = Replica(str(kmock.url), "replica-a")
    replicas.append(a)
    await wait_leading(a, timeout=2)
    b = Replica(str(kmock.url), "replica-b")
    replicas.append(b)
    await asyncio.sleep(0.5)

    await a.stop()
    await a.elector.release()
    waited = await wait_leading(b, timeout=2)

    assert waited < 1.0  # a retry period or so, not a whole lease
    assert kmock.objects[LEASES, NS, LEASE_NAME]["spec"]["holderIdentity"] == "replica-b"
