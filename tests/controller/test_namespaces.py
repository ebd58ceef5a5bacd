"""One controller serving pools in two namespaces (NAMESPACES=runpod,team-b).

Every test assembles the process `rpp run` builds (rpp/controller/assembly.py) with one
in-memory Kubernetes namespace per served namespace, and runs its real loop against the
simulated world on virtual time: each pool is known by (namespace, name), acts on its own
pods, and writes its status, Events and slots ConfigMap in its own namespace.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry

from rpp.adapters.kube.api import Forbidden, KubeApi, KubeSettings
from rpp.controller.assembly import ControllerCore, assemble
from rpp.controller.config import Config
from rpp.model.status import PoolStatus
from rpp.sim.kube_memory import MemoryKubeApi
from rpp.sim.process import API_URL
from rpp.sim.virtual_time import VirtualClock, run_virtual
from rpp.sim.world import World
from tests.controller_kit import manifest, raised, world

OTHER = "team-b"
T = TypeVar("T")


def virtual(body: Callable[[VirtualClock], Awaitable[T]]) -> T:
    return run_virtual(body)


def second_namespace(w: World, *pools: dict[str, Any]) -> MemoryKubeApi:
    """Namespace team-b of the same cluster, with `pools` and their env Secrets applied."""
    other = MemoryKubeApi(KubeSettings(namespace=OTHER), clock=w.clock)
    for pool in pools:
        other.apply_pool(pool)
        secret = pool["spec"].get("envFromSecret")
        if secret:
            other.put_secret(secret, {"HF_TOKEN": "hf", "METRICS_TOKEN": "metrics-token"})
    return other


@asynccontextmanager
async def controller(w: World, other: MemoryKubeApi) -> AsyncIterator[ControllerCore]:
    """The process `rpp run` builds for NAMESPACES=runpod,team-b."""
    kubes: dict[str, KubeApi] = {w.kube.settings.namespace: w.kube, OTHER: other}
    config = Config(runpod_api_key=w.api_key, namespace=None, runpod_api_url=API_URL)
    core = assemble(
        config,
        kube=w.kube,
        clock=w.clock,
        runpod_transport=w.transport,
        pod_client=w.pod_client,
        prometheus_transport=None,
        registry=CollectorRegistry(),
        identity="namespaces-test",
        listers=tuple(kubes.values()),
        kube_for=kubes.__getitem__,
    )
    try:
        yield core
    finally:
        await core.close()


async def loops(w: World, core: ControllerCore, count: int) -> None:
    for _ in range(count):
        w.cloud.tick()
        await core.loop.loop_once()
        await asyncio.sleep(30)


def stored_status(kube: MemoryKubeApi, pool: str = "inference") -> PoolStatus:
    return PoolStatus.from_stored(kube.pool(pool).get("status") or {})


def pod_names(w: World, s: PoolStatus) -> set[str]:
    names = dict(w.created)
    return {names[m.pod_id] for m in s.members}


def test_pools_of_one_name_in_two_namespaces_each_act_on_their_own_pods() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"))
        other = second_namespace(w, manifest("inference", namePrefix="rpp-team-b-inference-"))
        async with controller(w, other) as core:
            await loops(w, core, 3)

            mine, theirs = stored_status(w.kube), stored_status(other)
            assert len(mine.members) == len(theirs.members) == 2
            assert all(n.startswith("rpp-inference-") for n in pod_names(w, mine))
            assert all(n.startswith("rpp-team-b-inference-") for n in pod_names(w, theirs))
            assert raised(mine, "InvalidSpec") is None
            assert raised(theirs, "InvalidSpec") is None
            # Each pool's slots ConfigMap and Events are in its own namespace.
            assert w.kube.config_map("inference-nginx-slots") is not None
            assert other.config_map("inference-nginx-slots") is not None
            assert {e["involvedObject"]["namespace"] for e in other.events} == {OTHER}
            # Their series stay apart: `pool_namespace` beside `pool`.
            for namespace in (w.kube.settings.namespace, OTHER):
                labels = {"pool_namespace": namespace, "pool": "inference"}
                assert core.registry.get_sample_value("runpod_pool_desired", labels) == 2
        await w.close()

    virtual(body)


def test_one_name_in_two_namespaces_with_one_prefix_is_a_clash_and_the_newer_pool_waits() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"))
        await asyncio.sleep(60)  # team-b's pool is applied a minute later
        other = second_namespace(w, manifest("inference"))
        async with controller(w, other) as core:
            await loops(w, core, 3)

            mine, theirs = stored_status(w.kube), stored_status(other)
            held = raised(theirs, "InvalidSpec")
            assert held is not None
            assert "namePrefix rpp-inference- is also pool inference" in held
            assert "namespace runpod" in held
            assert f"namespace {OTHER}" in held
            assert theirs.members == ()
            assert raised(mine, "InvalidSpec") is None
            assert len(mine.members) == 2
            # The pods are the older pool's alone: two created, none twice driven.
            assert len(w.created) == 2
        await w.close()

    virtual(body)


def test_a_namespace_that_cannot_be_listed_keeps_only_its_own_pools_waiting() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"))
        other = second_namespace(w, manifest("batch"))
        other.fail_next("list", "runpodpools", Forbidden("list", "runpodpools", namespace=OTHER))
        async with controller(w, other) as core:
            w.cloud.tick()
            results = await core.loop.loop_once()

            assert [r.pool for r in results] == ["inference"]
            error = core.loop.progress.last_error or ""
            assert f"cannot list runpodpools in namespace {OTHER}" in error
            assert "forbidden" in error
        await w.close()

    virtual(body)


def test_an_env_secret_the_controller_may_not_read_says_which_permission_and_how_to_grant_it() -> (
    None
):
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"))
        other = second_namespace(w, manifest("batch"))
        refused = Forbidden("get", "secrets", "inference-env", namespace="runpod")
        w.kube.fail_next("get", "secrets", refused)
        async with controller(w, other) as core:
            w.cloud.tick()
            await core.loop.loop_once()

            message = raised(stored_status(w.kube), "NotActing") or ""
            assert "may not get secrets 'inference-env' in namespace runpod" in message
            assert "RBAC verb get, resource secrets" in message
            assert "rbac.extraEnvSecrets" in message
            assert "rbac.mode: namespace" in message
            written = json.dumps(w.kube.pool("inference"))
            assert "rbac.extraEnvSecrets" in written  # in the status, not a log line only
        await w.close()

    virtual(body)
