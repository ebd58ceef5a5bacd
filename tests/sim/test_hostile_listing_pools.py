"""One odd pod in RunPod's answer never stops a pool: the real loop over the simulated world.

Issue 15 measured a foreign pod with `gpu.count: "two"` failing all 20 loops with 0
status writes. Here the real controller loop (listing, reconciler, decide, executor)
runs against the fake cloud, scripted with the hostile fault kinds, on virtual time:

- a foreign pod with odd fields is skipped: every pool writes its status, acts, and
  raises nothing; the unreadable-pods gauge counts it;
- an owned pod with odd fields is held (no transition, no action on it), reported in
  UnreadablePods with an Event, and the other pool does not notice; once its answer
  reads again the condition clears;
- a listing that cannot be read at all is "RunPod unavailable": every pool says so in
  NotActing, and every status is still written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from rpp.sim import faults
from rpp.sim.virtual_time import VirtualClock, run_virtual
from rpp.sim.world import World
from tests.controller_kit import GPU, manifest, raised, status, world

T = TypeVar("T")
UNREADABLE = "runpod_pool_runpod_unreadable_pods"


def virtual(body: Callable[[VirtualClock], Awaitable[T]]) -> T:
    return run_virtual(body)


async def settle(w: World, *, ready: int, limit: int = 30) -> None:
    """Loop every 30 s until every pool has `ready` pods wired."""
    for _ in range(limit):
        await w.loop()
        if all(status(w, p).ready == ready for p in ("inference", "batch")):
            return
        await asyncio.sleep(30)
    raise AssertionError("the pools never settled")


def test_a_foreign_pod_with_odd_fields_stops_no_pool_and_is_counted() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"), manifest("batch"))
        foreign = w.cloud.add_pod(
            name="someone-elses-pod", image="x", gpu_type=GPU, datacenter="EU-RO-1"
        ).info.pod_id
        odd = faults.OddFields(set={"gpu.count": "two", "status": "HIBERNATING"}, pods=(foreign,))
        w.cloud.faults.always("listPods", odd)
        w.cloud.faults.always("hostNotices", faults.RawAnswer(body='{"errors": 5}'))

        await settle(w, ready=2)

        for pool in ("inference", "batch"):
            assert raised(status(w, pool), "NotActing") is None
            assert raised(status(w, pool), "UnreadablePods") is None
            assert len(status(w, pool).members) == 2
        assert w.controller.registry.get_sample_value(UNREADABLE) == 1
        await w.close()

    virtual(body)


def test_an_owned_pod_with_odd_fields_is_held_and_reported_and_the_other_pool_carries_on() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"), manifest("batch"))
        await settle(w, ready=2)
        before = status(w, "inference")
        odd = sorted(m.pod_id for m in before.members)[0]
        w.cloud.faults.always(
            "listPods", faults.OddFields(set={"status": "HIBERNATING", "cost": "inf"}, pods=(odd,))
        )
        w.pods[odd].die()  # its probes fail too: a readable pod would be flagged
        w.cloud.calls.clear()
        for _ in range(8):
            await w.loop()
            await asyncio.sleep(30)

        after = status(w, "inference")
        held = after.member(odd)
        was = before.member(odd)
        assert held is not None
        assert was is not None
        assert held.phase == was.phase == "Ready", "no transition on a pod that does not read"
        assert held.cost_per_hr == was.cost_per_hr, "the record keeps its facts"
        message = raised(status(w, "inference"), "UnreadablePods")
        assert message is not None
        assert odd in message
        assert "'HIBERNATING' is not a status this controller knows" in message
        assert "cost is 'inf'" in message
        assert any(e["reason"] == "UnreadablePods" for e in w.kube.events)
        touched = [c for c in w.cloud.calls if odd in c.path]
        assert touched == [], "nothing is sent about a pod whose answer does not read"
        assert raised(status(w, "batch"), "UnreadablePods") is None
        assert status(w, "batch").ready == 2

        w.cloud.faults.clear("listPods")
        await w.loop()
        cleared = status(w, "inference").condition("UnreadablePods")
        assert cleared is not None
        assert cleared.status == "False"
        await w.close()

    virtual(body)


def test_a_listing_that_does_not_read_at_all_is_runpod_unavailable_for_every_pool() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"), manifest("batch"))
        await settle(w, ready=2)
        w.cloud.faults.always("listPods", faults.RawAnswer(body="[", repeat=100_000))

        results = await w.loop()

        assert sorted(r.pool for r in results) == ["batch", "inference"]
        assert all(r.written for r in results)
        for pool in ("inference", "batch"):
            message = raised(status(w, pool), "NotActing")
            assert message is not None
            assert "nests deeper than a JSON reader follows" in message
            assert status(w, pool).condition("NotActing").reason == "RunPodUnavailable"  # type: ignore[union-attr]
        await w.close()

    virtual(body)
