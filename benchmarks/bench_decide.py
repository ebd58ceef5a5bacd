"""CPU of decide and the status render per member, at 100 and 1,000 members.

What it measures: the pure decision of one loop, the part of the controller whose cost
grows with the members it holds, with no I/O at all. For each size, pools of 20 Ready
members (5 pools for 100 members, 50 pools for 1,000), each pool served from one RunPod
listing of every pool's pods as the controller's loop does. One loop of one pool is
`decide` (rpp/decide/pool.py: ownership, judgement, every member's machine, the pool
steps, the slots) plus `PoolStatus.stored()`, the JSON the status write sends.

The loops are steady and quiet: every pod passes its probes, Prometheus reads fine values
and nginx serves what status says, so no member moves and no effect is planned (checked:
the benchmark stops if one does). Each loop starts from the status the previous loop
returned, 30 s later, as the controller does. That is most loops of most pools.

Records in benchmarks/results/decide.json the CPU (user + sys of this process) per member
per loop at both sizes (median of the runs) and the growth from 100 to 1,000 members.

    .venv/bin/python benchmarks/bench_decide.py [--runs 5] [--loops 20]

`--loops` is for 1,000 members; 100 members run ten times as many loops, so both sizes
are timed over the same number of member-loops (a short timing is the noisier one, and
the growth compares the two).
    .venv/bin/python benchmarks/bench_decide.py --profile 1000   # cProfile's top
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import dataclasses
import datetime as dt
import pstats
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import recording
import yaml

from rpp.decide.nginx_slots import RenderedSlots, render_for
from rpp.decide.ownership import IndexedPods
from rpp.decide.pool import decide
from rpp.machines.member_step import new_member
from rpp.model.observations import (
    PodMetrics,
    PodStatus,
    PoolObject,
    PoolObservation,
    ProbeResult,
    PrometheusReading,
    RunPodPod,
    SecretState,
)
from rpp.model.proxy_hosts import DEFAULT_URL_PATTERN
from rpp.model.spec import RunPodPoolSpec
from rpp.model.spec_load import load_pool
from rpp.model.status import PoolStatus

ROOT = Path(__file__).parents[1]
MEMBERS_PER_POOL = 20
SIZES = (100, 1000)
INTERVAL = dt.timedelta(seconds=30)
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
DATACENTERS = ["EU-RO-1", "EU-SE-1", "EU-CZ-1", "EU-NL-1", "US-TX-3"]
GPU = "NVIDIA GeForce RTX 4090"
GOAL_US = 50.0  # per member per loop
GOAL_GROWTH = 11.0  # 1,000 members against 100


@dataclass
class PoolInputs:
    """One pool's decide arguments; `status` and `slots` are what the previous loop
    returned (the controller keeps the slots render per pool, and so does this)."""

    name: str
    spec: RunPodPoolSpec
    status: PoolStatus
    obs: PoolObservation
    slots: RenderedSlots | None = None


def manifest(name: str) -> dict[str, Any]:
    obj = yaml.safe_load((ROOT / "examples" / "pool.yaml").read_text())
    obj["metadata"]["name"] = name
    obj["spec"].update(
        dryRun=False,
        namePrefix=f"rpp-{name}-",
        replicas={"min": MEMBERS_PER_POOL, "max": MEMBERS_PER_POOL},
        maxPerDatacenter=MEMBERS_PER_POOL,
        datacenters={"allow": DATACENTERS, "deny": []},
        limits={
            "maxPods": 2 * MEMBERS_PER_POOL,
            "maxHourlyCostUsd": 100.0,
            "maxCreatesPerHour": 2 * MEMBERS_PER_POOL,
            "estimatedPodCostUsd": 0.7,
        },
        envFromSecret=f"{name}-env",
        nginx={"slotPorts": MEMBERS_PER_POOL + 1},
    )
    return copy.deepcopy(obj)


def pods_of(pool: int, spec: RunPodPoolSpec) -> list[RunPodPod]:
    return [
        RunPodPod(
            id=f"p{pool:03d}x{j:03d}q7w2k",
            name=f"{spec.name_prefix}t{pool:03d}{j:03d}",
            status=PodStatus.RUNNING,
            image=spec.image,
            gpu_type=GPU,
            gpu_count=1,
            cloud="SECURE",
            datacenter=DATACENTERS[j % len(DATACENTERS)],
            cost_per_hr=0.69,
            created_at=START - dt.timedelta(hours=2),
        )
        for j in range(MEMBERS_PER_POOL)
    ]


def fleet(members: int) -> list[PoolInputs]:
    """Pools of 20 Ready members, settled: their next loop plans nothing."""
    specs = []
    for i in range(members // MEMBERS_PER_POOL):
        pool, problems = load_pool(manifest(f"pool{i:03d}"))
        assert pool is not None, problems
        specs.append(pool)
    pods_by_pool = [pods_of(i, p.spec) for i, p in enumerate(specs)]
    listing = tuple(pod for pods in pods_by_pool for pod in pods)
    fleet = []
    for pool, pods in zip(specs, pods_by_pool, strict=True):
        ports = [pool.spec.nginx.base_port + j for j in range(len(pods))]
        wired = [new_member(p, now=START, slot=s) for p, s in zip(pods, ports, strict=True)]
        slots = render_for(
            pool=pool.name, spec=pool.spec, members=wired, proxy_url=DEFAULT_URL_PATTERN
        )
        obs = PoolObservation(
            pods=listing,
            notices={},
            probes={
                p.id: ProbeResult(
                    passed=True,
                    health_ok=True,
                    metrics_ok=True,
                    health_latency_s=0.04,
                    metrics_latency_s=0.06,
                )
                for p in pods
            },
            prometheus=PrometheusReading(
                per_pod={p.id: PodMetrics(latency_s=0.25, error_ratio=0.0) for p in pods}
            ),
            slots=dict(slots.write.data),
            secret=SecretState(configured=True),
            pool=PoolObject(finalizer=True),
        )
        fleet.append(PoolInputs(pool.name, pool.spec, PoolStatus(), obs))
    now = START
    for _ in range(3):  # adopt the wired pods, then settle the conditions
        now += INTERVAL
        one_loop(fleet, now=now, check=False)
    return fleet


def one_loop(fleet: list[PoolInputs], *, now: dt.datetime, check: bool = True) -> None:
    # Each loop reads a new listing, indexed once for all pools, as the controller does.
    listing = IndexedPods(fleet[0].obs.pods or ())
    for pool in fleet:
        decision = decide(
            pool=pool.name,
            generation=1,
            spec=pool.spec,
            status=pool.status,
            obs=dataclasses.replace(pool.obs, pods=listing),
            now=now,
            proxy_url=DEFAULT_URL_PATTERN,
            last_slots=pool.slots,
        )
        decision.status.stored()
        if check and (decision.effects or decision.transitions):
            raise SystemExit(
                f"{pool.name} is not quiet: {decision.effects} {decision.transitions}"
            )
        pool.status = decision.status
        pool.slots = decision.slots


def measure(members: int, *, loops: int) -> float:
    """CPU seconds per member per loop over `loops` steady loops."""
    pools = fleet(members)
    now = START + 10 * INTERVAL
    cpu0 = time.process_time()
    for _ in range(loops):
        now += INTERVAL
        one_loop(pools, now=now)
    return (time.process_time() - cpu0) / (loops * members)


def profile(members: int, *, loops: int) -> None:
    pools = fleet(members)
    now = START + 10 * INTERVAL
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(loops):
        now += INTERVAL
        one_loop(pools, now=now)
    profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--loops", type=int, default=20)
    parser.add_argument("--profile", type=int, metavar="MEMBERS")
    args = parser.parse_args()
    if args.profile:
        profile(args.profile, loops=args.loops)
        return
    started = recording.machine()
    runs: dict[int, list[float]] = {size: [] for size in SIZES}
    measure(SIZES[0], loops=2)  # warm-up: the first machine, pydantic's and the library's caches
    for run in range(args.runs):
        for size in SIZES:
            loops = args.loops * SIZES[-1] // size  # the same member-loops at each size
            runs[size].append(measure(size, loops=loops) * 1e6)
            print(f"run {run + 1}: {size} members: {runs[size][-1]:.1f} µs per member", flush=True)
    per_member = {size: recording.spread(runs[size]) for size in SIZES}
    small, large = (per_member[size]["median"] for size in SIZES)
    growth = large * SIZES[1] / (small * SIZES[0])
    for size in SIZES:
        median = per_member[size]["median"]
        print(
            f"{size} members: {median:.1f} µs per member per loop, "
            f"{median * size / 1000:.1f} ms per loop "
            f"(goal {GOAL_US:g} µs: {median / GOAL_US:.2f}x)"
        )
    print(
        f"growth from {SIZES[0]} to {SIZES[1]} members: {growth:.1f}x (goal <= {GOAL_GROWTH:g}x)"
    )
    measured = {
        "members_per_pool": MEMBERS_PER_POOL,
        "loops_per_run": {str(size): args.loops * SIZES[-1] // size for size in SIZES},
        "us_per_member": {str(size): per_member[size] for size in SIZES},
        "runs_us_per_member": {str(size): runs[size] for size in SIZES},
        "growth_1000_vs_100": growth,
    }
    figures = {
        "us_per_member_100": f"{small:.0f} µs",
        "us_per_member_1000": f"{large:.0f} µs",
        "ms_per_loop_1000": f"{large * SIZES[1] / 1000:.0f} ms",
        "growth_1000_vs_100": f"{growth:.1f} times",
    }
    path = recording.write(
        "decide",
        benchmark="benchmarks/bench_decide.py",
        what=(
            "CPU (user + sys) of decide plus the status render (PoolStatus.stored) per member "
            f"per steady loop, pools of {MEMBERS_PER_POOL} Ready members served from one "
            f"listing, at {SIZES[0]} and {SIZES[1]} members; median of {args.runs} runs of "
            f"{args.loops} loops each at {SIZES[-1]} members "
            f"({args.loops * SIZES[-1] // SIZES[0]} at {SIZES[0]}: the same member-loops)"
        ),
        started=started,
        measured=measured,
        figures=figures,
    )
    print(f"figures: {figures}")
    print(f"written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
