"""How long a release of a new image takes on a 20-pod pool, one pod at a time and four.

Runs `rpp simulate --json` (the real controller against the fake cloud, on simulated time)
on the same scenario twice, with `rollout.maxParallel` 1 and 4, and reads from its JSON
records the simulated time from the `apply` of the new image to the release's `Done`, and
from the canary's verdict to `Done`. The simulation is deterministic for a seed, so one
run of each gives the figure; the CPU and wall time of each process are recorded beside
it. Results: benchmarks/results/rollout.json (with the date and the machine: see
recording.py); docs/operating.md quotes them.

The pool: 20 pods on RTX 4090s in five datacenters, autoscaled between replicas.min 16
and max 20 (the load first asks for 20, then falls to what 10 pods serve, and a 12-hour
scale-down window keeps the 20), so the Ready floor of a parallel roll is replicas.min,
16. The release is a good one, with the default 10-minute canary bake; drain.period is the
default 150 s, a pod boots in 2 minutes and needs 3 passing probes 30 s apart.

    .venv/bin/python benchmarks/bench_rollout.py
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import recording
import yaml

ROOT = Path(__file__).parents[1]
GPU = "NVIDIA GeForce RTX 4090"
DATACENTERS = ["EU-RO-1", "EU-SE-1", "EU-CZ-1", "EU-NL-1", "US-TX-3"]
OLD = "ghcr.io/example/inference:1.4.2"
NEW = "ghcr.io/example/inference:1.5.0"
APPLY_AT_S = 40 * 60


def scenario(parallel: int) -> dict[str, Any]:
    return {
        "description": f"A good release on 20 pods, rollout.maxParallel {parallel}.",
        "duration": "4h",
        "pool": {
            "apiVersion": "runpodpool.ownego.com/v1alpha1",
            "kind": "RunPodPool",
            "metadata": {"name": "bench", "namespace": "runpod"},
            "spec": {
                "dryRun": False,
                "templateId": "tpl",
                "image": OLD,
                "gpuTypes": [GPU],
                "replicas": {"min": 16, "max": 20},
                "maxPerDatacenter": 4,
                "datacenters": {"allow": DATACENTERS},
                "autoscaling": {
                    "enabled": True,
                    "query": 'avg(app_queue_length{job="$job"})',
                    "target": 1,
                    "scaleDownStabilization": "12h",
                },
                "limits": {
                    "maxPods": 24,
                    "maxHourlyCostUsd": 30.0,
                    "maxCreatesPerHour": 40,
                    "estimatedPodCostUsd": 0.7,
                },
                "nginx": {"slotPorts": 21},
                "envFromSecret": "bench-env",
                "metricsTokenKey": "METRICS_TOKEN",
                "prometheus": {
                    "job": "bench-pods",
                    "latencyQuery": (
                        'sum by (runpod_pod) (rate(app_request_duration_seconds_sum{job="$job"}'
                        "[5m])) / sum by (runpod_pod) "
                        '(rate(app_request_duration_seconds_count{job="$job"}[5m]))'
                    ),
                    "errorRatioQuery": (
                        'sum by (runpod_pod) (rate(app_requests_failed_total{job="$job"}[5m]))'
                        ' / sum by (runpod_pod) (rate(app_requests_total{job="$job"}[5m]))'
                    ),
                    "requestRateQuery": (
                        'sum by (runpod_pod) (rate(app_requests_total{job="$job"}[5m]))'
                    ),
                },
                "rollout": {"canary": {"minRequests": 5}, "maxParallel": parallel},
            },
        },
        "cloud": {
            "seed": 3,
            "bootTime": "2m",
            "stock": [
                {"datacenter": dc, "gpuType": GPU, "count": 8, "costPerHr": 0.69}
                for dc in DATACENTERS
            ],
        },
        "events": [
            {"at": "0s", "do": "load", "value": 2.0},
            {"at": f"{APPLY_AT_S - 60}s", "do": "load", "value": 0.5},
            {"at": f"{APPLY_AT_S}s", "do": "apply", "patch": {"spec": {"image": NEW}}},
        ],
    }


def run(parallel: int) -> dict[str, Any]:
    """One `rpp simulate --json` process; the roll's simulated times and its CPU."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"roll-{parallel}.yaml"
        path.write_text(yaml.safe_dump(scenario(parallel), sort_keys=False))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "rpp", "simulate", "--scenario", str(path), "--json"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    records = [json.loads(line) for line in done.stdout.splitlines()]
    applied = next(r["t"] for r in records if r["event"] == "scenario" and r["do"] == "apply")
    releases = [r for r in records if r["event"] == "rollout" and r["image"] == NEW]
    passed = next(r["t"] for r in releases if r["verdict"] == "Passed")
    finished = next(r["t"] for r in releases if r["phase"] == "Done")
    before_apply = [r for r in records if r["event"] == "loop" and r["t"] < applied]
    during = [r for r in records if r["event"] == "loop" and applied <= r["t"] <= finished]
    updates = [r for r in records if r["event"] == "cloud" and r["kind"] == "updated"]
    return {
        "max_parallel": parallel,
        "pods": before_apply[-1]["ready"],
        "updated_in_place": len(updates),
        "created_during_the_roll": sum(
            1
            for r in records
            if r["event"] == "cloud" and r["kind"] == "created" and applied <= r["t"] <= finished
        ),
        "lowest_ready_during_the_roll": min(r["ready"] for r in during),
        "roll_s": finished - applied,
        "after_the_canary_s": finished - passed,
        "process_cpu_s": round(
            (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 3
        ),
        "process_wall_s": round(wall, 3),
    }


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    started = recording.machine()
    runs = []
    for parallel in (1, 4):
        runs.append(run(parallel))
        print(f"maxParallel {parallel}: {runs[-1]}", flush=True)
    one, four = runs
    figures = {
        "roll_20_pods_parallel_1": minutes(one["roll_s"]),
        "roll_20_pods_parallel_4": minutes(four["roll_s"]),
        "after_canary_parallel_1": minutes(one["after_the_canary_s"]),
        "after_canary_parallel_4": minutes(four["after_the_canary_s"]),
        "lowest_ready_parallel_1": f"{one['lowest_ready_during_the_roll']} Ready",
        "lowest_ready_parallel_4": f"{four['lowest_ready_during_the_roll']} Ready",
    }
    path = recording.write(
        "rollout",
        benchmark="benchmarks/bench_rollout.py",
        what=(
            "simulated time of a good release on a 20-pod pool, from the apply of the new "
            "image to Done and from the canary's verdict to Done, with rollout.maxParallel "
            "1 and 4 (`rpp simulate --json`, deterministic for its seed; one run each)"
        ),
        started=started,
        measured={"runs": runs},
        figures=figures,
    )
    print(f"wrote {path.relative_to(ROOT)}: {figures}")


if __name__ == "__main__":
    main()
