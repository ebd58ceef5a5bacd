"""No create while a pod the pool created is not listed yet: one pod RunPod hides at a time.

Where it sits: an invariant group of the simulator's checker (rpp/sim/check/checker.py),
checked at each createPod the controller sends. RunPod may answer a create with the new
pod's id and list the pod only later (the fake cloud's listingLag). A controller that
reads the missing pod as gone creates it again, and the pool ends with two pods for one
need, past maxPods and the cost cap (rpp/decide/capacity/unconfirmed.py is the rule it follows).

The violation: a createPod sent while a pool pod exists that RunPod does not list yet
(ground truth: the fake cloud), that the pool's stored status holds as a member (the
controller read its 201 and kept it: a create whose answer was lost to a crash or a 5xx
is the write-ahead intents' case, rpp/decide/ledger/intents.py), and whose create is less than
health.createListingGrace old.
"""

from __future__ import annotations

import httpx

from rpp.model.runpod_operations import RunPodOperation
from rpp.sim.check.checker import Checker, NoChecks


class NoCreateWhileUnconfirmed(NoChecks):
    """No create while a created pod the status holds is not listed, within the grace."""

    def on_call(self, checker: Checker, operation: str, request: httpx.Request) -> None:
        if operation != RunPodOperation.CREATE_POD:
            return
        status = checker.status()
        if status is None or status.mode != "Manage":
            return
        spec = checker.spec()
        members = {m.pod_id for m in status.members}
        cloud = checker.world.cloud
        for pod in checker.owned(spec):
            age = (checker.now - pod.info.created_at).total_seconds()
            if cloud.listed(pod) or pod.info.pod_id not in members:
                continue
            if age < spec.health.create_listing_grace:
                checker.violate(
                    "create while a created pod is unconfirmed",
                    f"createPod sent while pod {pod.info.pod_id} ({pod.info.name}), created "
                    f"{age:g}s ago, is not listed by RunPod yet; health.createListingGrace "
                    f"is {spec.health.create_listing_grace:g}s",
                )
                return
