"""Advice on a valid spec: limits that leave no room for a surge pod.

Where it sits: beside the spec model, read by `rpp validate` (rpp/commands/validate.py),
which prints each as a warning line and still exits 0. A flagged pod is replaced
surge-first: its replacement is created before it leaves, so at full size the pool
briefly needs one pod more than replicas.max. When limits.maxPods, the allowed
datacenters times maxPerDatacenter, or the cost cap leave no room for that pod, a
flagged pod that still serves cannot be replaced until it stops serving (one that
serves nothing is terminated first instead, rpp/decide/steps.py), and the pool runs
with it. Not an error: some pools choose that; the warning makes it a choice.
"""

from __future__ import annotations

from rpp.model.spec import RunPodPoolSpec


def surge_room_warnings(spec: RunPodPoolSpec) -> list[tuple[str, str]]:
    """(spec path, message) for each limit that leaves no room for one surge pod."""
    size = spec.replicas.max if spec.autoscaling.enabled else spec.replicas.min
    need = size + 1
    at = f"{size} pods (replicas.{'max' if spec.autoscaling.enabled else 'min'})"
    tail = "a flagged pod that still serves then stays until it stops serving"
    out: list[tuple[str, str]] = []
    limits = spec.limits
    if limits.max_pods < need:
        out.append(
            (
                "spec.limits.maxPods",
                f"{limits.max_pods} leaves no room for a surge pod at {at}: {tail}; "
                f"use {need} or more",
            )
        )
    places = [dc for dc in spec.datacenters.allow if dc not in spec.datacenters.deny]
    if places and len(places) * spec.max_per_datacenter < need:
        out.append(
            (
                "spec.maxPerDatacenter",
                f"{len(places)} allowed datacenter(s) x maxPerDatacenter "
                f"{spec.max_per_datacenter} = {len(places) * spec.max_per_datacenter} pods "
                f"leave no room for a surge pod at {at}: {tail}; allow another datacenter "
                "or raise maxPerDatacenter",
            )
        )
    estimate = limits.estimated_pod_cost_usd
    if 0 < limits.max_hourly_cost_usd < need * estimate:
        out.append(
            (
                "spec.limits.maxHourlyCostUsd",
                f"${limits.max_hourly_cost_usd:g}/h leaves no room for a surge pod at {at} "
                f"priced at limits.estimatedPodCostUsd ${estimate:g}/h (${need * estimate:g}/h "
                f"for {need}; the cap is checked at RunPod's prices): {tail}",
            )
        )
    return out
