"""A scenario's knobs: what each `events:` entry does to the simulated world.

Where it sits: between the scenario file (rpp/sim/scenario.py) and the world
(rpp/sim/world.py), outside observe -> decide -> act. Each event turns one knob of the
fake cloud (stock, a machine note, a pod terminated in the console), of one fake pod
(die, hang, slow, errors, recover, restart), of the fake Prometheus (load), of the
in-memory Kubernetes (apply: a human's merge patch, or the pool created again when it was
deleted; delete: `kubectl delete rpp`), of the API itself (fault: the next calls of an
operation fail) or of the controller (controller-restart: killed now, or armed to die at
a crash point, rpp/sim/crash_points.py; clock-step: its host's wall clock steps), and says
in words what happened for the timeline.

`pod: N` is the Nth pool pod by creation, counting pods already gone, so a scenario can
name a replacement before it exists; an event for a pod that does not exist (yet, or any
more) changes nothing and says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rpp.adapters.clock import step_text, to_rfc3339
from rpp.sim.crossings import KubeFault
from rpp.sim.scenario import ScenarioEvent
from rpp.sim.world import CloudChange, World

CLOUD_EVENTS = frozenset(
    {"die", "hang", "slow", "errors", "note", "recover", "restart", "terminate", "stock"}
)
"""Events that change the cloud's ground truth (a `cloud` fault); the others are not."""


@dataclass(frozen=True)
class Turned:
    """What one event did: in words, and as a cloud fault when the cloud changed."""

    detail: str
    fault: CloudChange | None = None


async def turn(world: World, event: ScenarioEvent, *, pool: str) -> Turned:
    """Apply one scenario event to the world, now."""
    pod_id = world.pool_pod(pool, event.pod) if event.pod is not None else None
    fake = world.cloud.pods.get(pod_id) if pod_id else None
    info = fake.info if fake is not None else None  # read before a terminate removes it
    detail = await _turn(world, event, pool=pool)
    if event.do not in CLOUD_EVENTS:
        return Turned(detail)
    return Turned(
        detail,
        CloudChange(
            kind="fault",
            pod_id=pod_id if info else None,
            name=info.name if info else None,
            datacenter=info.datacenter if info else event.datacenter,
            gpu_type=info.gpu_type if info else event.gpu_type,
            image=info.image if info else None,
            detail=detail,
        ),
    )


async def _turn(world: World, event: ScenarioEvent, *, pool: str) -> str:
    """Knobs of the cloud, Prometheus, Kubernetes and the controller; pods below."""
    if event.do == "stock":
        assert event.datacenter
        assert event.gpu_type
        assert event.count is not None
        world.cloud.set_stock(
            event.datacenter, event.gpu_type, event.cloud, event.count, event.cost_per_hr
        )
        level = "out of stock" if event.count == 0 else f"{event.count} free GPUs"
        return f"{event.gpu_type} in {event.datacenter} ({event.cloud}): {level}"
    if event.do == "load":
        assert event.value is not None
        if world.prometheus is not None:
            world.prometheus.set_load(pool, event.value)
        return f"autoscaling.query now returns {event.value:g}"
    if event.do == "apply":
        assert event.patch is not None
        existed = world.kube.has_pool(pool)
        world.patch_pool(pool, event.patch["spec"])
        if existed:
            return f"kubectl patch: spec {_flat(event.patch['spec'])}"
        return (
            f"kubectl apply: the pool was deleted, so it is created again from the "
            f"scenario's manifest with every apply so far (spec {_flat(event.patch['spec'])})"
        )
    if event.do == "controller-restart":
        if event.point is not None:
            world.crossings.crashes.arm(event.point)
            return f"armed: the controller process will be killed {event.point.describe()}"
        world.kill_controller("the controller process is killed by the scenario")
        return "the controller process is replaced by a new one"
    if event.do == "delete":
        return _delete(world, pool)
    if event.do == "fault":
        return _fault_knob(world, event)
    if event.do == "edit-status":
        return await _edit_status(world, pool, event.status)
    if event.do == "clock-step":
        return _clock_step(world, event)
    return _pod_knob(world, event, pool=pool)


async def _edit_status(world: World, pool: str, status: Any) -> str:
    """`kubectl edit --subresource=status`, or a restore from a backup without status:
    the stored status becomes `status` whatever it holds."""
    current = world.kube.pool(pool)
    version = str(current["metadata"]["resourceVersion"])
    stored = dict(status) if isinstance(status, Mapping) else {}
    await world.kube.replace_pool_status(pool, status=stored, resource_version=version)
    what = f"replaced by {json.dumps(stored)[:80]}" if stored else "emptied"
    return f"the pool's status is {what} (a hand edit, or a restore without status)"


def _clock_step(world: World, event: ScenarioEvent) -> str:
    """The controller host's wall clock steps; true time and the API server's Date do not."""
    assert event.by is not None
    world.host_clock.step(event.by)
    return (
        f"the controller host's wall clock steps {step_text(event.by)} (it reads "
        f"{to_rfc3339(world.host_clock.now())}); true time and the API server's Date go on"
    )


def _delete(world: World, pool: str) -> str:
    """`kubectl delete rpp <pool>`: the API server marks a pool with finalizers, and
    deletes one without at once."""
    if not world.kube.has_pool(pool):
        return f"kubectl delete rpp {pool}: it is already gone"
    world.kube.delete_pool(pool)
    if world.kube.has_pool(pool):
        return (
            f"kubectl delete rpp {pool}: marked for deletion; the controller's finalizer "
            "holds it until the pool's deletionPolicy is carried out"
        )
    return f"kubectl delete rpp {pool}: deleted at once (no finalizer held it)"


def _fault_knob(world: World, event: ScenarioEvent) -> str:
    assert event.operation is not None
    assert event.fault is not None
    if isinstance(event.fault, KubeFault) and event.fault.seconds is not None:
        world.crossings.fault_next(event.operation, event.fault)
        return f"every {event.operation} for {event.fault.seconds:g}s answers 409 (a storm)"
    calls = "call" if event.times == 1 else f"{event.times} calls"
    if isinstance(event.fault, KubeFault):
        world.crossings.fault_next(event.operation, event.fault, times=event.times)
    else:
        world.cloud.faults.next(event.operation, event.fault, times=event.times)
    return f"the next {calls} of {event.operation} suffer {event.fault.kind}"


def _pod_knob(world: World, event: ScenarioEvent, *, pool: str) -> str:
    """Knobs of one pool pod: its machine, or its service."""
    assert event.pod is not None
    pod_id = world.pool_pod(pool, event.pod)
    if pod_id is None or pod_id not in world.cloud.pods:
        return f"pod {event.pod} does not exist (any more); nothing happens"
    server = world.pods.get(pod_id)
    label = f"pod {event.pod} ({pod_id})"
    if event.do == "terminate":
        world.cloud.remove_pod(pod_id)
        return f"{label} is terminated outside the controller (the RunPod console)"
    if event.do == "note":
        world.cloud.set_machine_note(pod_id, event.text)
        return f"{label}: machine note " + (repr(event.text) if event.text else "cleared")
    if server is None:
        return f"{label} has no service to change"
    if event.do == "die":
        server.die()
        return f"{label}: its service dies; the proxy answers 502"
    if event.do == "hang":
        server.hang()
        return f"{label}: its service hangs; requests never answer"
    if event.do == "slow":
        assert event.latency is not None
        server.slow(event.latency)
        return f"{label}: every answer now takes {event.latency:g}s more"
    if event.do == "errors":
        assert event.ratio is not None
        server.errors(event.ratio)
        return f"{label}: {event.ratio:.0%} of its app requests answer 500"
    if event.do == "recover":
        server.recover()
        return f"{label} recovers"
    if event.do == "restart":
        server.restart(world.clock.now())
        return f"{label}: its process restarts"
    raise ValueError(f"unknown scenario event {event.do!r}")


def _flat(patch: Mapping[str, Any], prefix: str = "") -> str:
    """{replicas: {min: 3}} -> "replicas.min=3", for one-line descriptions."""
    parts = []
    for key, value in patch.items():
        if isinstance(value, Mapping):
            parts.append(_flat(value, f"{prefix}{key}."))
        else:
            parts.append(f"{prefix}{key}={value}")
    return ", ".join(parts)
