"""How long `rpp simulate` takes: a day of a 10-pod pool, and the default scenario.

Runs each as its own process, three times, and records the CPU time (user + sys) and the
wall time of each whole process, imports included, in benchmarks/results/simulate.json
(with the date and the machine: see recording.py). The docs quote the medians from there.

- A day of a 10-pod pool: the real controller loop every 30 s of simulated time (2,880
  loops) against the fake cloud, 10 fake pods with app traffic, the fake Prometheus and
  the in-memory Kubernetes, with four failures on the way. The child process also
  reports the CPU of the simulation alone (without interpreter start and imports).
- The default scenario: `rpp simulate` exactly as `scripts/demo` runs it (4 hours of a
  3-pod pool), its output thrown away.

    .venv/bin/python benchmarks/bench_simulate.py [--runs 3] [--hours 24]
    .venv/bin/python benchmarks/bench_simulate.py --profile [--write-profile]

--profile runs the day once under cProfile (the CPU of the simulation alone, main
thread) and prints it; with --write-profile it also writes
benchmarks/results/profiles/simulate_cpu.txt and the shares by area to
benchmarks/results/simulate_profile.json (benchmarks/profile_text.py). Neither touches
simulate.json: the profiler's own cost is in its figures.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import profile_text
import recording

from rpp.sim.run import run_scenario
from rpp.sim.scenario import parse_scenario

ROOT = Path(__file__).parents[1]


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


def child(hours: float, *, profile: str) -> None:
    """One simulation in this process; prints its own figures as JSON, and with `profile`
    writes cProfile's stats (the main thread's CPU) there."""
    logging.getLogger().addHandler(logging.NullHandler())
    loaded = parse_scenario(scenario(hours), source="bench")
    profiler = cProfile.Profile(time.thread_time) if profile else None
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if profiler:
        profiler.enable()
    timeline = run_scenario(loaded, out=None).timeline
    if profiler:
        profiler.disable()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    loops = sum(1 for r in timeline.records if r["event"] == "loop")
    end = timeline.records[-1]["status"]
    print(
        json.dumps(
            {
                "simulation_cpu_s": round(cpu, 3),
                "simulation_wall_s": round(wall, 3),
                "loops": loops,
                "ready": end.get("ready"),
                "desired": end.get("desired"),
            }
        )
    )
    if profiler:
        profiler.dump_stats(profile)


def profiled(hours: float, *, write: bool) -> None:
    """The day once under cProfile, printed, and with `write` checked in as evidence."""
    started = recording.machine()
    with tempfile.TemporaryDirectory(prefix="rpp-simulate-profile-") as tmp:
        path = str(Path(tmp) / "simulate.prof")
        argv = [sys.executable, __file__, "--child", f"{hours:g}", "--profile-out", path]
        out = timed(argv)
        figures = json.loads(out["stdout"])
        stats = pstats.Stats(path)
    header = [
        f"# benchmarks/bench_simulate.py --profile: {hours:g}h of a 10-pod pool in rpp simulate",
        f"command: {profile_text.command_line()}",
        f"date: {started['date']}; machine: {started['cpu']}, {started['cpus']} CPUs, "
        f"Python {started['python']}",
        f"load average at start: {started['load_average_at_start']}, "
        f"at end: {[round(x, 2) for x in os.getloadavg()]}",
        f"{figures['loops']} loops; the simulation's CPU while profiled: "
        f"{figures['simulation_cpu_s']:.1f} s (the profiler's own cost included; "
        f"without it: benchmarks/results/simulate.json), process {out['process_cpu_s']:.1f} s",
    ]
    text = profile_text.render(stats, header=header)
    print(text)
    if not write:
        return
    written = profile_text.write("simulate_cpu.txt", text)
    results = recording.write(
        "simulate_profile",
        benchmark="benchmarks/bench_simulate.py",
        what=(
            f"cProfile (main thread's CPU) of {hours:g}h of a 10-pod pool in rpp simulate, "
            "as bench_simulate.py --profile --write-profile runs it; shares of the profiled "
            f"CPU by area; the text is {written.relative_to(ROOT)}"
        ),
        started=started,
        measured={
            "profiled_cpu_s": profile_text.total_s(stats),
            "areas": profile_text.areas(stats)[:20],
            "child": figures,
        },
        figures=profile_text.shares(stats),
    )
    print(f"written to {written.relative_to(ROOT)} and {results.relative_to(ROOT)}")


def timed(argv: list[str]) -> dict[str, Any]:
    """Run one child process; its CPU (user + sys, from the kernel) and wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "process_cpu_s": round(cpu, 3),
        "process_wall_s": round(wall, 3),
        "stdout": done.stdout,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--profile-out", default="", help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help="one day under cProfile")
    parser.add_argument(
        "--write-profile", action="store_true", help="with --profile: check the profile in"
    )
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, profile=args.profile_out)
        return
    if args.profile:
        profiled(args.hours, write=args.write_profile)
        return
    started = recording.machine()
    day: list[dict[str, Any]] = []
    default: list[dict[str, Any]] = []
    for run in range(args.runs):
        out = timed([sys.executable, __file__, "--child", f"{args.hours:g}"])
        day.append({**json.loads(out.pop("stdout")), **out})
        print(f"run {run + 1}: {args.hours:g}h of a 10-pod pool: {day[-1]}", flush=True)
        out = timed([sys.executable, "-m", "rpp", "simulate"])
        out.pop("stdout")
        default.append(out)
        print(f"run {run + 1}: the default scenario: {default[-1]}", flush=True)
    day_cpu = recording.spread([r["process_cpu_s"] for r in day])
    sim_cpu = recording.spread([r["simulation_cpu_s"] for r in day])
    per_loop_ms = recording.spread(
        [1000 * r["simulation_cpu_s"] / max(r["loops"], 1) for r in day]
    )
    default_cpu = recording.spread([r["process_cpu_s"] for r in default])
    measured = {
        "day_of_10_pods": {
            "hours": args.hours,
            "runs": day,
            "process_cpu_s": day_cpu,
            "simulation_cpu_s": sim_cpu,
            "simulation_cpu_ms_per_loop": per_loop_ms,
            "process_wall_s": recording.spread([r["process_wall_s"] for r in day]),
        },
        "default_scenario": {
            "runs": default,
            "process_cpu_s": default_cpu,
            "process_wall_s": recording.spread([r["process_wall_s"] for r in default]),
        },
    }
    figures = {
        "day_cpu_median": f"{day_cpu['median']:.0f} s",
        "day_cpu_min": f"{day_cpu['min']:.0f} s",
        "day_cpu_max": f"{day_cpu['max']:.0f} s",
        "day_cpu_per_loop_median": f"{per_loop_ms['median']:.0f} ms",
        "default_cpu_median": f"{default_cpu['median']:.1f} s",
        "default_cpu_min": f"{default_cpu['min']:.1f} s",
        "default_cpu_max": f"{default_cpu['max']:.1f} s",
    }
    path = recording.write(
        "simulate",
        benchmark="benchmarks/bench_simulate.py",
        what=(
            f"CPU (user + sys) and wall time of whole processes, {args.runs} runs each: "
            f"{args.hours:g}h of a 10-pod pool (a loop every 30 s), and "
            "`rpp simulate` on the embedded default scenario (4h, 3 pods)"
        ),
        started=started,
        measured=measured,
        figures=figures,
    )
    print(f"figures: {figures}")
    print(f"written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
