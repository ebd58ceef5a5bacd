"""Helpers for the controller-loop tests: pools in a simulated world, on virtual time."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from rpp.adapters.clock import Clock
from rpp.model.status import PoolStatus
from rpp.sim.world import World

ROOT = Path(__file__).parents[1]
GPU = "NVIDIA GeForce RTX 4090"
DATACENTERS = ("EU-RO-1", "EU-SE-1", "EU-CZ-1", "EU-NL-1")
IMAGE = "ghcr.io/example/inference:1.4.2"


def manifest(name: str = "inference", **spec_changes: Any) -> dict[str, Any]:
    """examples/pool.yaml in Manage mode under another name, changed by `spec_changes`."""
    obj = yaml.safe_load((ROOT / "examples" / "pool.yaml").read_text())
    obj["metadata"]["name"] = name
    spec = obj["spec"]
    for derived in ("namePrefix",):
        spec.pop(derived, None)
    spec["nginx"] = {"slotPorts": 4}
    spec.update(
        dryRun=False,
        templateId="tpl-inference",
        gpuTypes=[GPU],
        datacenters={"allow": list(DATACENTERS)},
        limits={
            "maxPods": 4,
            "maxHourlyCostUsd": 10.0,
            "maxCreatesPerHour": 3,
            "estimatedPodCostUsd": 0.7,
        },
        replicas={"min": 2, "max": 2},
        prometheus={"job": f"{name}-pods"},
    )
    spec["probe"].pop("requireMetric", None)
    spec.update(spec_changes)
    return copy.deepcopy(obj)


def world(clock: Clock, *pools: dict[str, Any], **kwargs: Any) -> World:
    """A world with stock in four datacenters and the given pools set up."""
    w = World(clock=clock, **kwargs)
    w.cloud.add_template("tpl-inference", image=IMAGE)
    for dc in DATACENTERS:
        w.cloud.set_stock(dc, GPU, "SECURE", 6, cost_per_hr=0.69)
    for pool in pools or (manifest(),):
        w.setup_pool(pool, default_image=IMAGE)
    return w


def status(w: World, pool: str = "inference") -> PoolStatus:
    """`pool`'s status as stored in the world's Kubernetes (empty before the first write)."""
    return PoolStatus.from_stored(w.kube.pool(pool).get("status") or {})


def raised(s: PoolStatus, type_: str) -> str | None:
    """The message of condition `type_` while it is True; None while it is not raised."""
    cond = s.condition(type_)
    return cond.message if cond is not None and cond.status == "True" else None


def creates(w: World) -> list[str]:
    """The path of every create RunPod received (each is a POST /v2/pods)."""
    return [c.path for c in w.cloud.calls if c.operation == "createPod"]


class Partitionable:
    """One replica's view of the API server's Leases, which a test can cut off."""

    def __init__(self, kube: Any) -> None:
        self.kube = kube
        self.cut: str | None = None  # None, "fail" or "hang"

    @property
    def settings(self) -> Any:
        return self.kube.settings

    async def _gate(self) -> None:
        import asyncio

        from rpp.adapters.kube.api import KubeError

        if self.cut == "fail":
            raise KubeError("get", "leases", namespace="runpod", message="connection refused")
        if self.cut == "hang":
            await asyncio.Event().wait()

    async def get_lease(self, name: str) -> Any:
        await self._gate()
        return await self.kube.get_lease(name)

    async def create_lease(self, name: str, *, spec: Any) -> Any:
        await self._gate()
        return await self.kube.create_lease(name, spec=spec)

    async def replace_lease(self, name: str, *, spec: Any, resource_version: str) -> Any:
        await self._gate()
        return await self.kube.replace_lease(name, spec=spec, resource_version=resource_version)
