"""How much CPU and memory the controller needs for 20 pools of 10 members.

Runs the real controller (the same loop, reconciler, decide, clients) in the
simulator on virtual time: 20 pools of 10 pods each, reconciled every 30 s, until every
pool is full and steady, then for another simulated hour. Prints:

- the peak resident memory of the process (ru_maxrss), and
- the CPU seconds one loop over all 20 pools costs in steady state, and what that is
  as an average CPU share at a 30 s interval.

These are upper bounds for the controller alone: the same process also runs the fake
RunPod cloud, 200 fake inference pods and the in-memory Kubernetes API, and serves
both ends of every in-process request. Real probes go over TLS to RunPod's proxy,
which costs more CPU per request than an in-process call, so the deployment's numbers
(deploy/controller.yaml, docs/install.md) add headroom to these.

    .venv/bin/python benchmarks/bench_controller_footprint.py [--pools 20] [--members 10]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import resource
import time
from pathlib import Path
from typing import Any

import yaml

from rpp.sim.virtual_time import VirtualClock, run_virtual
from rpp.sim.world import World

ROOT = Path(__file__).parents[1]
DATACENTERS = ["EU-RO-1", "EU-SE-1", "EU-CZ-1", "EU-NL-1", "US-TX-3"]
GPU = "NVIDIA GeForce RTX 4090"


def manifest(index: int, members: int) -> dict[str, Any]:
    obj = yaml.safe_load((ROOT / "examples" / "pool.yaml").read_text())
    name = f"pool{index:02d}"
    obj["metadata"]["name"] = name
    spec = obj["spec"]
    spec.update(
        dryRun=False,
        templateId="tpl-bench",
        gpuTypes=[GPU],
        namePrefix=f"rpp-{name}-",
        replicas={"min": members, "max": members},
        maxPerDatacenter=members,
        datacenters={"allow": DATACENTERS, "deny": []},
        limits={
            "maxPods": 2 * members,
            "maxHourlyCostUsd": 100.0,
            "maxCreatesPerHour": 2 * members,
            "estimatedPodCostUsd": 0.7,
        },
        envFromSecret=f"{name}-env",
        nginx={"slotPorts": members + 1},
    )
    spec["probe"].pop("requireMetric", None)
    return copy.deepcopy(obj)


async def main(clock: VirtualClock, *, pools: int, members: int) -> dict[str, float]:
    world = World(clock=clock, boot_time=60.0, fake_prometheus=True)
    for dc in DATACENTERS:
        world.cloud.set_stock(dc, GPU, "SECURE", pools * members, cost_per_hr=0.69)
    for i in range(pools):
        world.setup_pool(manifest(i, members), default_image="ghcr.io/example/inference:1.4.2")
    loops_to_fill = 0
    while True:
        results = await world.loop()
        world.send_traffic()
        await asyncio.sleep(30)
        loops_to_fill += 1
        if all(r.status is not None and r.status.ready == members for r in results):
            break
        if loops_to_fill > 400:
            raise SystemExit("the pools did not fill in 400 loops")
    steady = 120  # one simulated hour
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for _ in range(steady):
        await world.loop()
        world.send_traffic()
        await asyncio.sleep(30)
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    await world.close()
    return {"fill_loops": loops_to_fill, "cpu_per_loop": cpu / steady, "wall": wall}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=20)
    parser.add_argument("--members", type=int, default=10)
    args = parser.parse_args()
    out = run_virtual(lambda clock: main(clock, pools=args.pools, members=args.members))
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cpu = out["cpu_per_loop"]
    print(f"pools={args.pools} members={args.members} filled after {out['fill_loops']:.0f} loops")
    print(f"peak RSS: {rss_mib:.0f} MiB")
    print(f"CPU per loop over all pools (steady state): {cpu * 1000:.0f} ms")
    print(f"average CPU at a 30 s interval: {cpu / 30 * 1000:.0f} millicores")
    print(f"simulated hour of steady state took {out['wall']:.1f} s")
