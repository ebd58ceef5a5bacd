"""Two controller replicas, one Kubernetes API, one RunPod: only the leader ever acts.

Each replica is a whole controller (its own RunPod client, prober, reconciler, loop and
leader elector) against the same in-memory Kubernetes API and the same fake RunPod, on
virtual time. The fake cloud's own record of API calls is the judge: a double action
would show as a second create, update or delete RunPod received.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from rpp.controller.leader import LEASE_DURATION_S, RENEW_DEADLINE_S, RETRY_PERIOD_S, LeaderElector
from rpp.controller.reconcile import PoolResult
from rpp.model import metric_names as names
from rpp.model.status import PoolStatus
from rpp.sim.faults import Timeout
from rpp.sim.virtual_time import VirtualClock, run_virtual
from rpp.sim.world import World
from tests.controller_kit import Partitionable, creates, manifest, status, world

T = TypeVar("T")


class Replica:
    """One controller process: its parts, its elector, and when it acted."""

    def __init__(self, w: World, name: str, *, clock: VirtualClock, lease_view: Any) -> None:
        self.name = name
        self.acted: list[float] = []  # loop times of reconciles that carried something out
        self.reconciled: list[float] = []
        self.statuses: list[PoolStatus] = []  # every status a reconcile of it decided
        self.parts = w.new_controller(on_result=self._note, identity=name)
        self.elector = LeaderElector(kube=lease_view, identity=name, clock=clock)
        self.stop = asyncio.Event()
        self.tasks = [
            asyncio.create_task(self.elector.run()),
            asyncio.create_task(self.parts.loop.run(stop=self.stop, elector=self.elector)),
        ]

    def _note(self, result: PoolResult) -> None:
        now = asyncio.get_running_loop().time()
        self.reconciled.append(now)
        if result.status is not None:
            self.statuses.append(result.status)
        if any(r.effect.action != "event" for r in result.results):
            self.acted.append(now)

    async def kill(self) -> None:
        """SIGKILL: everything stops where it is; nothing is released."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.parts.close()


def virtual(body: Callable[[VirtualClock], Awaitable[T]]) -> T:
    return run_virtual(body)


def test_the_leader_killed_mid_create_the_standby_takes_over_without_a_second_create() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"))
        loop = asyncio.get_running_loop()
        a = Replica(w, "a", clock=clock, lease_view=w.kube)
        await asyncio.sleep(0.5)
        b = Replica(w, "b", clock=clock, lease_view=w.kube)
        await asyncio.sleep(20)
        assert len(creates(w)) == 1  # A created the first pod; B did nothing
        # A's next create reaches RunPod, which makes the pod but never answers...
        w.cloud.faults.next("createPod", Timeout(applied=True))
        await asyncio.sleep(15)
        assert len(w.cloud.pods) == 2
        killed_at = loop.time()
        await a.kill()  # ...and A dies waiting for the answer, its status never written

        await asyncio.sleep(600)

        assert b.reconciled
        assert killed_at < b.reconciled[0] <= killed_at + LEASE_DURATION_S + RETRY_PERIOD_S
        assert len(creates(w)) == 2  # B adopted A's orphan by its name: no second create
        assert len(w.cloud.pods) == 2
        final = status(w)
        assert {m.pod_id for m in final.members} == set(w.cloud.pods)
        assert final.ready == 2
        assert not [c for c in w.cloud.write_calls if c.operation != "createPod"]
        await b.kill()
        await w.close()

    virtual(body)


def test_a_partitioned_leader_stops_acting_before_the_standby_starts() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"))
        loop = asyncio.get_running_loop()
        view = Partitionable(w.kube)
        a = Replica(w, "a", clock=clock, lease_view=view)
        await asyncio.sleep(0.5)
        b = Replica(w, "b", clock=clock, lease_view=w.kube)
        await asyncio.sleep(40)
        cut_at = loop.time()
        # A can still reach RunPod and every other API, just not renew its Lease.
        view.cut = "hang"

        await asyncio.sleep(600)

        lost = a.elector.is_leader is False
        assert lost
        assert a.acted
        assert b.acted
        assert max(a.reconciled) <= cut_at + RENEW_DEADLINE_S
        assert max(a.acted) < min(b.reconciled)  # never two leaders at once
        assert min(b.reconciled) >= cut_at + LEASE_DURATION_S - RETRY_PERIOD_S
        assert len(creates(w)) == 2
        assert status(w).ready == 2
        await a.kill()
        await b.kill()
        await w.close()

    virtual(body)


def pool_gauge_series(replica: Replica) -> set[tuple[str, str]]:
    """(metric, pool) of every pool gauge sample the replica's /metrics would show."""
    gauges = {spec.name for spec in POOL_GAUGES}
    return {
        (sample.name, sample.labels["pool"])
        for family in replica.parts.registry.collect()
        if family.name in gauges
        for sample in family.samples
    }


POOL_GAUGES = [
    names.BY_NAME[n]
    for n in (
        names.MEMBERS,
        names.READY,
        names.DESIRED,
        names.DESIRED_MIN,
        names.COST_PER_HOUR,
        names.CONDITION,
    )
]


def test_a_replica_that_loses_leadership_exports_no_pool_gauges() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"))
        view = Partitionable(w.kube)
        a = Replica(w, "a", clock=clock, lease_view=view)
        await asyncio.sleep(0.5)
        b = Replica(w, "b", clock=clock, lease_view=w.kube)
        await asyncio.sleep(40)
        assert ("runpod_pool_ready", "inference") in pool_gauge_series(a)
        assert pool_gauge_series(b) == set()  # the standby never reported a pool

        view.cut = "hang"  # A cannot renew: it steps down, and B takes over
        await asyncio.sleep(120)

        assert not a.elector.is_leader
        assert b.elector.is_leader
        assert pool_gauge_series(a) == set()
        assert ("runpod_pool_ready", "inference") in pool_gauge_series(b)
        await a.kill()
        await b.kill()
        await w.close()

    virtual(body)
