"""CPU and memory of the controller loop in the simulator, with 20 pools of 10 members.

What it measures: the simulator's process. It runs the real controller (the same loop,
reconciler, decide, clients) on virtual time against 20 pools of 10 pods, reconciled
every 30 s, until every pool is full and steady, then for another simulated hour, and
records in benchmarks/results/footprint.json (median of 3 processes):

- the CPU (user + sys) one loop over all 20 pools costs in steady state, and that as an
  average share of a core at a 30 s interval (millicores);
- the peak resident memory of that process, and its resident memory after the imports,
  before any pool (the difference is the 20 pools' working set);
- in a separate process, the resident memory of the imports of `rpp run` (the real
  controller: the Kubernetes client, uvicorn, httpx...), before any pool.

What it does not measure: the controller as deployed. The simulator's process also runs
the fake RunPod cloud, 200 fake inference pods and the in-memory Kubernetes API, and
serves both ends of every in-process request, but it never imports the Kubernetes
client, never speaks TLS and never waits on a network. So its figures are neither an
upper nor a lower bound for `rpp run`; the deployment's resources (docs/install.md) are
sized from them with headroom, and are to be checked against the running controller.

    .venv/bin/python benchmarks/bench_controller_footprint.py [--pools 20] [--members 10]
        [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import recording
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


async def simulate(clock: VirtualClock, *, pools: int, members: int) -> dict[str, float]:
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


CONTROLLER_IMPORTS = """
import resource
import kubernetes.aio.client
import rpp.adapters.kube.connect
import rpp.adapters.kube.real
import rpp.commands.run
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(*, pools: int, members: int) -> None:
    """One measurement in this process; prints its figures as JSON."""
    after_imports = rss_mib()
    out = run_virtual(lambda clock: simulate(clock, pools=pools, members=members))
    out.update(after_imports_mib=after_imports, peak_mib=rss_mib())
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=20)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    size = ["--pools", str(args.pools), "--members", str(args.members)]
    if args.child:
        child(pools=args.pools, members=args.members)
        return
    started = recording.machine()
    runs: list[dict[str, Any]] = []
    imports: list[float] = []
    for run in range(args.runs):
        done = subprocess.run(
            [sys.executable, __file__, "--child", *size],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        runs.append(json.loads(done.stdout))
        print(f"run {run + 1}: {runs[-1]}", flush=True)
        done = subprocess.run(
            [sys.executable, "-c", CONTROLLER_IMPORTS],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        imports.append(int(done.stdout) / 1024)
        print(f"run {run + 1}: rpp run's imports: {imports[-1]:.0f} MiB", flush=True)
    cpu = recording.spread([r["cpu_per_loop"] for r in runs])
    peak = recording.spread([r["peak_mib"] for r in runs])
    baseline = recording.spread([r["after_imports_mib"] for r in runs])
    working = recording.spread([r["peak_mib"] - r["after_imports_mib"] for r in runs])
    controller = recording.spread(imports)
    measured = {
        "pools": args.pools,
        "members": args.members,
        "runs": runs,
        "cpu_s_per_loop": cpu,
        "simulator_peak_rss_mib": peak,
        "simulator_rss_after_imports_mib": baseline,
        "pools_working_set_mib": working,
        "rpp_run_imports_rss_mib": controller,
    }
    figures = {
        "cpu_per_loop": f"{cpu['median'] * 1000:.0f} ms",
        "millicores": f"{cpu['median'] / 30 * 1000:.0f} millicores",
        "simulator_peak": f"{peak['median']:.0f} MiB",
        "simulator_after_imports": f"{baseline['median']:.0f} MiB",
        "pools_working_set": f"{working['median']:.0f} MiB",
        "rpp_run_imports": f"{controller['median']:.0f} MiB",
    }
    path = recording.write(
        "footprint",
        benchmark="benchmarks/bench_controller_footprint.py",
        what=(
            f"the simulator's process with {args.pools} pools of {args.members} members, "
            f"a loop every 30 s, one simulated hour of steady state, {args.runs} processes; "
            "and the resident memory of `rpp run`'s imports in a separate process"
        ),
        started=started,
        measured=measured,
        figures=figures,
    )
    print(f"figures: {figures}")
    print(f"written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
