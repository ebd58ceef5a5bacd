"""Helpers for the story tests: a pool in a simulated world, driven loop by loop.

Each story runs on a virtual-time event loop (rpp/sim/virtual_time.py): a loop of the
controller every `interval` seconds of simulated time, hours in a fraction of a second.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

from rpp.controller.reconcile import PoolResult
from rpp.model.status import PoolStatus
from rpp.sim.crash_points import CrashPoint
from rpp.sim.process import ControllerKilled
from rpp.sim.virtual_time import VirtualClock, run_virtual
from rpp.sim.world import World

ROOT = Path(__file__).parents[2]
T = TypeVar("T")
DATACENTERS = ["EU-RO-1", "EU-SE-1", "EU-CZ-1"]
GPU = "NVIDIA GeForce RTX 4090"
# The stories' budget (pool_manifest's): a story that needs another states only what differs.
LIMITS = {
    "maxPods": 4,
    "maxHourlyCostUsd": 10.0,
    "maxCreatesPerHour": 3,
    "estimatedPodCostUsd": 0.7,
}


def pool_manifest(**spec_changes: Any) -> dict[str, Any]:
    """examples/pool.yaml in Manage mode with a budget, changed by `spec_changes`."""
    obj = yaml.safe_load((ROOT / "examples" / "pool.yaml").read_text())
    spec = obj["spec"]
    spec.update(
        dryRun=False,
        templateId="tpl-inference",
        gpuTypes=[GPU],
        limits=dict(LIMITS),
    )
    spec["prometheus"] = {"job": "inference-pods"}
    spec["probe"].pop("requireMetric", None)
    for key, value in spec_changes.items():
        spec[key] = value
    return copy.deepcopy(obj)


class Story:
    """A world with one pool, and the verbs the story tests speak."""

    def __init__(
        self,
        clock: VirtualClock,
        *,
        manifest: dict[str, Any] | None = None,
        boot_time: float = 60.0,
        stock: int = 5,
        api_key: str | None = None,
        prometheus: Any = None,
    ) -> None:
        self.clock = clock
        extra: dict[str, Any] = {} if api_key is None else {"api_key": api_key}
        if prometheus is not None:
            extra["prometheus_transport"] = prometheus.transport()
            extra["prometheus_url"] = "http://prometheus.fake"
        self.world = World(clock=clock, boot_time=boot_time, **extra)
        self.manifest = manifest or pool_manifest()
        self.name = self.manifest["metadata"]["name"]
        self.world.cloud.add_template("tpl-inference", image="ghcr.io/example/inference:1.4.2")
        for dc in DATACENTERS:
            self.world.cloud.set_stock(dc, GPU, "SECURE", stock, cost_per_hr=0.69)
        self.world.kube.put_secret("inference-env", {"METRICS_TOKEN": "tok-123", "HF_TOKEN": "hf"})
        self.world.kube.apply_pool(self.manifest)
        self.results: list[PoolResult] = []
        self.crashes = 0

    async def loops(self, count: int, *, interval: float = 30.0) -> PoolResult:
        """`count` loops; a controller killed at an armed crash point is replaced at
        once by a new one, which runs the loop again, as Kubernetes restarts it."""
        last = None
        for _ in range(count):
            while True:
                try:
                    results = await self.world.loop()
                    break
                except ControllerKilled:
                    await self.world.restart_controller()
                    self.crashes += 1
            self.results += results
            last = results[0]
            await asyncio.sleep(interval)
        assert last is not None
        return last

    def crash(self, when: str, target: str) -> None:
        """Kill the controller the next time it is `when` ("before"/"after") `target`
        (a RunPod operation, status-write, slots-write; "effects" between two effects)."""
        self.world.crossings.crashes.arm(CrashPoint(when, target))

    async def until(
        self, predicate: Callable[[PoolStatus], bool], *, limit: int = 200, interval: float = 30.0
    ) -> PoolStatus:
        for _ in range(limit):
            result = await self.loops(1, interval=interval)
            if result.status is not None and predicate(result.status):
                return result.status
        raise AssertionError(f"not reached in {limit} loops; last status: {self.status()}")

    def out_of_stock(self, *, gpu: str = GPU) -> None:
        for dc in DATACENTERS:
            self.world.cloud.set_stock(dc, gpu, "SECURE", 0)

    def restock(self, count: int = 5, *, gpu: str = GPU) -> None:
        for dc in DATACENTERS:
            self.world.cloud.set_stock(dc, gpu, "SECURE", count, cost_per_hr=0.69)

    def apply(self, **spec_changes: Any) -> None:
        """`kubectl apply` of the pool with these spec fields changed."""
        obj = self.world.kube.pool(self.name)
        manifest = {k: copy.deepcopy(obj[k]) for k in ("apiVersion", "kind", "metadata", "spec")}
        manifest["spec"].update(spec_changes)
        self.world.kube.apply_pool(manifest)

    def new_pods_die(self) -> None:
        """From now on, every new pod boots but its service never answers (502)."""
        original = self.world._pod_server

        def factory(info: Any) -> Any:
            server = original(info)
            server.die()
            return server

        self.world.cloud.pod_server_factory = factory

    async def set_status(self, status: dict[str, Any]) -> None:
        """A hand edit of the status subresource (or a restore that lost it, or an older
        controller's write): replaces what is stored, at its current resourceVersion."""
        stored = self.world.kube.pool(self.name)
        version = stored["metadata"]["resourceVersion"]
        await self.world.kube.replace_pool_status(
            self.name, status=status, resource_version=version
        )

    def status(self) -> PoolStatus:
        obj = self.world.kube.pool(self.name)
        return PoolStatus.from_stored(obj.get("status") or {})

    def wired(self) -> dict[int, str]:
        from rpp.decide.nginx_slots import wired_pods

        stored = self.world.kube.config_map("inference-nginx-slots")
        return wired_pods(stored.data if stored else None)

    def effects(self, action: str) -> list[Any]:
        return [
            e for r in self.results if r.decision for e in r.decision.effects if e.action == action
        ]


def story(body: Callable[[Story], Awaitable[T]], **kwargs: Any) -> T:
    async def main(clock: VirtualClock) -> T:
        s = Story(clock, **kwargs)
        try:
            return await body(s)
        finally:
            await s.world.close()

    return run_virtual(main)
