"""The controller loop: shared reads, pool isolation, spec changes, stopping, health.

Every test runs the real loop (rpp/controller/loop.py) with the real reconciler against the
simulated world (fake RunPod, fake pods, in-memory Kubernetes) on virtual time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from rpp.adapters.kube.api import KubeApi
from rpp.controller.leader import LeaderElector
from rpp.controller.reconcile import PoolResult
from rpp.controller.reconcile_failed import RECONCILE_FAILED
from rpp.sim.virtual_time import VirtualClock, run_virtual
from rpp.sim.world import World
from tests.controller_kit import GPU, IMAGE, Partitionable, manifest, status, world

T = TypeVar("T")


def virtual(body: Callable[[VirtualClock], Awaitable[T]]) -> T:
    return run_virtual(body)


def break_pool(w: World, pool: str, *, how: str) -> dict[str, bool]:
    """Make `pool`'s reconcile raise (a bug) or hang, while the switch is on."""
    switch = {"on": True}
    original = w.kube.read_config_map

    async def read(name: str) -> Any:
        if name == f"{pool}-nginx-slots" and switch["on"]:
            if how == "raise":
                raise RuntimeError("boom: a bug in this pool's path")
            await asyncio.Event().wait()
        return await original(name)

    w.kube.read_config_map = read  # type: ignore[method-assign]
    return switch


def hung_pod(w: World, pool: str = "inference") -> str:
    """A pool pod already running whose service hangs: every probe waits for its timeout."""
    pod = w.cloud.add_pod(name=f"rpp-{pool}-hung", image=IMAGE, gpu_type=GPU, datacenter="EU-RO-1")
    w.pods[pod.info.pod_id].hang()
    return pod.info.pod_id


def condition(w: World, pool: str, *, type_: str) -> tuple[str, str, str] | None:
    found = status(w, pool).condition(type_)
    return None if found is None else (found.status, found.reason, found.message)


def test_one_pod_listing_and_one_notice_query_serve_every_pool_of_a_loop() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"), manifest("batch"), manifest("embed"))
        results = await w.loop()

        operations = [c.operation for c in w.cloud.calls]
        assert sorted(r.pool for r in results) == ["batch", "embed", "inference"]
        assert all(r.written for r in results)
        assert operations.count("listPods") == 1
        assert operations.count("hostNotices") == 1
        await w.close()

    virtual(body)


def test_an_exception_in_one_pool_becomes_its_condition_and_event_and_the_others_carry_on() -> (
    None
):
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"), manifest("batch"))
        switch = break_pool(w, "inference", how="raise")
        results = {r.pool: r for r in await w.loop()}

        assert results["inference"].error is not None
        assert "RuntimeError: boom" in results["inference"].error
        state, reason, message = condition(w, "inference", type_=RECONCILE_FAILED) or ("", "", "")
        assert (state, reason) == ("True", "RuntimeError")
        assert "boom: a bug in this pool's path" in message
        failed = condition(w, "inference", type_="Ready")
        assert failed is not None
        assert failed[:2] == ("False", RECONCILE_FAILED)
        assert any(
            e["reason"] == RECONCILE_FAILED and e["type"] == "Warning" for e in w.kube.events
        )
        gauge = {"pool_namespace": "runpod", "pool": "inference", "type": RECONCILE_FAILED}
        assert w.controller.registry.get_sample_value("runpod_pool_condition", gauge) == 1
        # The other pool was reconciled as if nothing happened: it created its first pod.
        assert results["batch"].error is None
        assert results["batch"].written
        assert status(w, "batch").observed_generation == 1
        assert condition(w, "batch", type_=RECONCILE_FAILED) is None

        switch["on"] = False
        await asyncio.sleep(30)
        await w.loop()

        assert condition(w, "inference", type_=RECONCILE_FAILED) == (
            "False",
            "Reconciled",
            "the last reconcile completed",
        )
        assert any(e["reason"] == f"{RECONCILE_FAILED}Cleared" for e in w.kube.events)
        ready = condition(w, "inference", type_="Ready")
        assert ready is not None
        assert ready[1] != RECONCILE_FAILED
        assert w.controller.registry.get_sample_value("runpod_pool_condition", gauge) == 0
        await w.close()

    virtual(body)


def test_a_pool_that_overruns_its_time_budget_is_stopped_and_reported() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"), manifest("batch"))
        w.controller.loop.pool_timeout = 45.0
        break_pool(w, "inference", how="hang")
        loop = asyncio.get_running_loop()

        results = {r.pool: r for r in await w.loop()}

        assert loop.time() == 45.0  # the loop waited for the stuck pool, and no longer
        assert results["batch"].written
        state, reason, message = condition(w, "inference", type_=RECONCILE_FAILED) or ("", "", "")
        assert (state, reason) == ("True", "Timeout")
        assert "longer than 45s" in message
        await w.close()

    virtual(body)


def test_a_spec_change_is_reconciled_within_two_seconds_not_at_the_next_interval() -> None:
    async def body(clock: VirtualClock) -> None:
        seen: list[tuple[float, str, int | None]] = []
        loop = asyncio.get_running_loop()

        def note(result: PoolResult) -> None:
            generation = result.status.observed_generation if result.status else None
            seen.append((loop.time(), result.pool, generation))

        w = world(clock, manifest("inference"), manifest("batch"), on_result=note)
        stop = asyncio.Event()
        running = asyncio.create_task(w.controller.loop.run(stop=stop))
        await asyncio.sleep(10)
        changed_at = loop.time()
        w.patch_pool("inference", {"paused": True})
        await asyncio.sleep(2)

        after = [(t, pool, g) for t, pool, g in seen if t >= changed_at]
        assert after, "nothing was reconciled after the spec change"
        assert after[0][1:] == ("inference", 2)
        assert after[0][0] - changed_at <= 2.0
        assert status(w, "inference").mode == "Observe"
        # Only that pool, and status writes (same generation) trigger nothing more.
        await asyncio.sleep(17)
        assert [pool for t, pool, _ in seen if t >= changed_at] == ["inference"]
        stop.set()
        await running
        await w.close()

    virtual(body)


def test_the_after_loop_hook_runs_once_a_loop_after_its_status_writes() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"))
        loop = asyncio.get_running_loop()
        calls: list[tuple[float, int]] = []

        def after() -> None:
            writes = [c for c in w.kube.calls if c.resource == "runpodpools/status"]
            calls.append((loop.time(), len(writes)))

        w.controller.loop.after_loop = after
        stop = asyncio.Event()
        running = asyncio.create_task(w.controller.loop.run(stop=stop))
        await asyncio.sleep(75)  # loops at 0, 30 and 60 s
        stop.set()
        await running
        await w.close()
        assert [int(t // 30) for t, _ in calls] == [0, 1, 2]
        assert all(writes >= n + 1 for n, (_, writes) in enumerate(calls))

    virtual(body)


def test_stop_lets_the_loop_under_way_finish_and_write_status_then_returns() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"))
        hung = hung_pod(w)
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        running = asyncio.create_task(w.controller.loop.run(stop=stop))
        await asyncio.sleep(2)  # the loop is waiting for the hung pod's probe (10 s)
        assert not w.kube.calls or ("update", "runpodpools/status", "inference") not in [
            tuple(c) for c in w.kube.calls
        ]

        stop.set()
        await running

        assert loop.time() >= 10.0  # it waited for the probe instead of dropping the loop
        assert loop.time() < 30.0  # and started no other loop
        writes = [c for c in w.kube.calls if c.resource == "runpodpools/status"]
        assert len(writes) == 2  # its intents before acting, then the loop's status
        assert hung in {m.pod_id for m in status(w, "inference").members}
        assert status(w, "inference").intents == ()  # every action's outcome is known
        await w.close()

    virtual(body)


def test_stop_during_the_shared_runpod_read_reconciles_no_pool_and_writes_no_status() -> None:
    """docs/rehearsal.md: a SIGTERM that lands before any pool's reconcile started ends the
    loop after the shared read, with nothing decided, done or written."""

    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"))
        reading = asyncio.Event()
        original = w.controller.runpod.list_pods

        async def slow_listing() -> Any:
            reading.set()
            await asyncio.sleep(5)  # virtual time: RunPod answers slowly
            return await original()

        w.controller.runpod.list_pods = slow_listing  # type: ignore[method-assign]
        stop = asyncio.Event()
        running = asyncio.create_task(w.controller.loop.run(stop=stop))
        await reading.wait()
        stop.set()  # SIGTERM while the shared listing is under way
        await running

        assert [c for c in w.kube.calls if c.resource == "runpodpools/status"] == []
        assert w.kube.pool("inference").get("status") in (None, {})
        assert not [c for c in w.cloud.calls if c.operation == "createPod"]
        await w.close()

    virtual(body)


def test_losing_leadership_cancels_the_loop_at_once_and_nothing_more_is_written() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference", probe={"timeout": "40s"}))
        hung_pod(w)
        view = Partitionable(w.kube)
        # Only its Lease calls are used: the view has just those.
        elector = LeaderElector(kube=cast(KubeApi, view), identity="a", clock=clock)
        electing = asyncio.create_task(elector.run())
        stop = asyncio.Event()
        running = asyncio.create_task(w.controller.loop.run(stop=stop, elector=elector))
        loop = asyncio.get_running_loop()
        await asyncio.sleep(1)
        assert elector.is_leader
        view.cut = "fail"  # partitioned from the API server: renewals fail from now on

        await asyncio.wait_for(elector.wait_lost(), timeout=15)
        lost_at = loop.time()
        await asyncio.sleep(60)

        assert lost_at <= 10.0  # the renew deadline, long before the 40 s probe ends
        assert not [c for c in w.kube.calls if c.resource == "runpodpools/status"]
        assert not running.done()  # standby now, waiting to lead again
        assert w.controller.loop.health() is None  # a standby is healthy
        stop.set()
        await running
        electing.cancel()
        await asyncio.gather(electing, return_exceptions=True)
        await w.close()

    virtual(body)


def test_health_says_why_when_the_loop_stops_completing() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"))
        controller = w.controller.loop
        controller.stall_after = 60.0
        switch = break_pool(w, "inference", how="hang")
        stop = asyncio.Event()
        running = asyncio.create_task(controller.run(stop=stop))

        await asyncio.sleep(59)
        assert controller.health() is None
        await asyncio.sleep(31)
        problem = controller.health()

        assert problem is not None
        assert "has not completed for 90s (interval 30s, allowed 60s)" in problem
        assert "still reconciling inference for 90s" in problem
        switch["on"] = False
        await asyncio.sleep(60)  # the stuck pool hits its time budget; the loop goes on
        assert controller.health() is None
        stop.set()
        await running
        await w.close()

    virtual(body)
