"""How long `rpp simulate` takes for 24 hours of a 10-pod pool (issue 7: "seconds").

Measured 2026-11-29 on 2 cores: about 31 s (median of 3), from about 58 s before the
prober, status and in-process transport work.

Runs the real controller loop (every 30 s of simulated time: 2,880 loops) against the
fake cloud, 10 fake pods with app traffic, the fake Prometheus and the in-memory
Kubernetes, with a few failures on the way, and prints the wall time. Run it with
`.venv/bin/python benchmarks/bench_simulate.py [HOURS]`; add `--profile` for cProfile's
top entries.
"""

from __future__ import annotations

import cProfile
import logging
import pstats
import sys
import time

from rpp.commands.simulate import simulate_to
from rpp.sim.scenario import parse_scenario

GPU = "NVIDIA GeForce RTX 4090"
DATACENTERS = ["EU-RO-1", "EU-SE-1", "EU-CZ-1", "EU-NL-1", "US-TX-3", "US-GA-1"]


def scenario(hours: float) -> dict:
    return {
        "duration": f"{hours:g}h",
        "pool": {
            "apiVersion": "runpodpool.ownego.com/v1alpha1",
            "kind": "RunPodPool",
            "metadata": {"name": "bench"},
            "spec": {
                "dryRun": False,
                "templateId": "tpl",
                "image": "ghcr.io/example/inference:1.0",
                "gpuTypes": [GPU],
                "replicas": {"min": 10, "max": 10},
                "maxPerDatacenter": 3,
                "datacenters": {"allow": DATACENTERS},
                "limits": {
                    "maxPods": 14,
                    "maxHourlyCostUsd": 20.0,
                    "maxCreatesPerHour": 20,
                    "estimatedPodCostUsd": 0.7,
                },
                "nginx": {"slotPorts": 14},
                "envFromSecret": "bench-env",
                "metricsTokenKey": "METRICS_TOKEN",
                "prometheus": {
                    "job": "bench-pods",
                    "latencyQuery": 'avg by (runpod_pod) (rate(x{job="$job"}[5m]))',
                    "errorRatioQuery": 'avg by (runpod_pod) (rate(y{job="$job"}[5m]))',
                },
            },
        },
        "cloud": {
            "seed": 1,
            "bootTime": "2m",
            "stock": [
                {"datacenter": dc, "gpuType": GPU, "count": 10, "costPerHr": 0.69}
                for dc in DATACENTERS
            ],
        },
        "events": [
            {"at": f"{h}h", **event}
            for h, event in (
                (2, {"do": "hang", "pod": 3}),
                (6, {"do": "die", "pod": 5}),
                (10, {"do": "slow", "pod": 7, "latency": "3s"}),
                (14, {"do": "errors", "pod": 8, "ratio": 0.3}),
            )
            if h < hours
        ],
    }


def main() -> None:
    logging.getLogger().addHandler(logging.NullHandler())
    hours = float(next((a for a in sys.argv[1:] if not a.startswith("-")), "24"))
    loaded = parse_scenario(scenario(hours), source="bench")
    profiler = cProfile.Profile() if "--profile" in sys.argv else None
    started = time.perf_counter()
    if profiler:
        profiler.enable()
    timeline = simulate_to(loaded, out=None)
    if profiler:
        profiler.disable()
    elapsed = time.perf_counter() - started
    loops = sum(1 for r in timeline.records if r["event"] == "loop")
    end = timeline.records[-1]["status"]
    print(
        f"{hours:g}h of a 10-pod pool: {elapsed:.1f}s wall, {loops} reconciles, "
        f"{elapsed / max(loops, 1) * 1000:.1f} ms each; ready {end.get('ready')} of "
        f"{end.get('desired')}"
    )
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
