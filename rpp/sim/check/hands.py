"""Hands off other pods: the controller never changes a pod the pool does not own.

Where it sits: an invariant group of the simulator's checker (rpp/sim/check/checker.py).
It hears every RunPod request the controller sends, before RunPod sees it
(rpp/sim/crossings.py), and checks the writes: a delete, an update or an action may
only name a pod of the pool (namePrefix plus the generated suffix, or spec.adopt), and
a create may only ask for a name the pool owns (any other name would leak a pod the
pool could never find again). Reads of any pod are fine.
"""

from __future__ import annotations

import json

import httpx

from rpp.decide.ownership import owns, owns_name
from rpp.model.runpod_operations import WRITES, RunPodOperation
from rpp.sim.check.checker import Checker, NoChecks, as_listed

_WRITES = WRITES - {RunPodOperation.CREATE_POD}  # the writes that name a pod by its id


class HandsOff(NoChecks):
    """No write to a pod the pool does not own."""

    def on_call(self, checker: Checker, operation: str, request: httpx.Request) -> None:
        spec = checker.spec()
        if operation == RunPodOperation.CREATE_POD:
            try:
                name = json.loads(request.content or b"{}").get("name")
            except ValueError:
                name = None
            if not isinstance(name, str) or not owns_name(spec, name):
                checker.violate(
                    "non-owned pod touched",
                    f"createPod asked for the name {name!r}, not one of the pool's "
                    f"(namePrefix {spec.name_prefix})",
                )
            return
        if operation not in _WRITES:
            return
        parts = request.url.path.strip("/").split("/")
        pod_id = parts[2] if len(parts) >= 3 else ""
        pod = checker.world.cloud.pods.get(pod_id)
        if pod is not None and not owns(spec, as_listed(pod)):
            checker.violate(
                "non-owned pod touched",
                f"{operation} on pod {pod_id} named {pod.info.name!r}, which the pool does "
                f"not own (namePrefix {spec.name_prefix}, adopt {list(spec.adopt)})",
            )
