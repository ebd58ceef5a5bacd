"""Crash points enumerated over the example scenarios, under the invariant checker.

Not a speed benchmark: a sweep that records what it found in
benchmarks/results/crash_points.json. For every example scenario (examples/scenarios/)
and every kind of crash point (before and after each RunPod operation, the status
write and the slots write, and between two effects: rpp/sim/crash_points.py), the
scenario runs once per arm time: with `--arm all` the start and the time of each of its
own events (so a point also lands after a death, a spec change, a stock outage...);
with `--arm first` (the default, a third of the runs) the time of its first event, so
the point lands in the trouble the scenario is about. Each run adds one
`do: controller-restart` with that `point` and runs under `--check` (every invariant of
rpp/sim/check/ every loop and at the end). A point the run never crosses after its arm
time is counted as never reached, not as a crash.

It then runs `--random` runs with several crash points each, at random kinds and
times (seeded), over the same scenarios.

    .venv/bin/python benchmarks/bench_crash_points.py [--jobs 2] [--arm first|all]
        [--random 60] [--seed 14]

Exit 1 when any run broke an invariant; each such run is printed with its violations.
"""

from __future__ import annotations

import argparse
import copy
import io
import logging
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import recording
import yaml

from rpp.model.durations import parse_duration
from rpp.sim.crash_points import EVERY_POINT
from rpp.sim.run import run_scenario
from rpp.sim.scenario import parse_scenario

ROOT = Path(__file__).parents[1]
SCENARIOS = ROOT / "examples" / "scenarios"


def documents() -> dict[str, dict[str, Any]]:
    return {p.stem: yaml.safe_load(p.read_text()) for p in sorted(SCENARIOS.glob("*.yaml"))}


def arm_times(document: dict[str, Any], arm: str) -> list[Any]:
    """`all`: the start, then each distinct time one of the scenario's events happens;
    `first`: the first event's time (the start when it has none)."""
    times: list[Any] = [0]
    for event in document.get("events") or []:
        if event["at"] not in times:
            times.append(event["at"])
    if arm == "first":
        return [times[1] if len(times) > 1 else 0]
    return times


def run_case(case: tuple[str, dict[str, Any], list[tuple[Any, Any]]]) -> dict[str, Any]:
    """One run of `document` with a crash `point` armed at each (at, point)."""
    logging.disable(logging.CRITICAL)
    name, document, crashes = case
    document = copy.deepcopy(document)
    events = list(document.get("events") or [])
    events += [{"at": at, "do": "controller-restart", "point": point} for at, point in crashes]
    document["events"] = events
    scenario = parse_scenario(document)
    run = run_scenario(scenario, out=io.StringIO(), as_json=True, check_invariants=True)
    assert run.checker is not None
    return {
        "scenario": name,
        "crashes": [[str(at), point] for at, point in crashes],
        "fired": len(run.points),
        "loops": run.checker.loops,
        "violations": [v.text() for v in run.checker.violations],
    }


def cases(*, random_runs: int, seed: int, arm: str) -> tuple[list[Any], list[Any]]:
    docs = documents()
    enumerated = [
        (name, doc, [(at, point)])
        for name, doc in docs.items()
        for point in EVERY_POINT
        for at in arm_times(doc, arm)
    ]
    rng = random.Random(seed)
    names = sorted(docs)
    randomised = []
    for _ in range(random_runs):
        name = rng.choice(names)
        doc = docs[name]
        length = int(min(parse_duration(str(doc.get("duration", "1h"))), 3600.0))
        crashes = [
            (f"{rng.randrange(0, length)}s", rng.choice(EVERY_POINT))
            for _ in range(rng.randint(3, 8))
        ]
        randomised.append((name, doc, sorted(crashes, key=lambda c: int(c[0][:-1]))))
    return enumerated, randomised


def sweep(batch: list[Any], jobs: int) -> list[dict[str, Any]]:
    done: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for result in pool.map(run_case, batch, chunksize=1):
            done.append(result)
            if result["violations"] or len(done) % 50 == 0:
                print(f"  {len(done)} of {len(batch)} runs", flush=True)
            for text in result["violations"]:
                print(f"  {result['scenario']} {result['crashes']}: {text}", flush=True)
    return done


def tally(results: list[dict[str, Any]]) -> dict[str, Any]:
    broken = [r for r in results if r["violations"]]
    return {
        "runs": len(results),
        "crash_points_armed": sum(len(r["crashes"]) for r in results),
        "crashes_fired": sum(r["fired"] for r in results),
        "loops": sum(r["loops"] for r in results),
        "runs_with_violations": len(broken),
        "violations": sum(len(r["violations"]) for r in results),
        "broken": broken,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--random", type=int, default=60, dest="random_runs")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--arm", choices=("first", "all"), default="first")
    args = parser.parse_args()
    started = recording.machine()
    enumerated, randomised = cases(random_runs=args.random_runs, seed=args.seed, arm=args.arm)
    clock = time.perf_counter()
    first = tally(sweep(enumerated, args.jobs))
    second = tally(sweep(randomised, args.jobs))
    wall = time.perf_counter() - clock
    for label, found in (("enumerated", first), ("random", second)):
        print(
            f"{label}: {found['runs']} runs, {found['crash_points_armed']} crash points armed, "
            f"{found['crashes_fired']} fired, {found['loops']} loops, "
            f"{found['violations']} violations in {found['runs_with_violations']} runs"
        )
        for run in found["broken"]:
            print(f"  {run['scenario']} crashes {run['crashes']}:")
            for text in run["violations"]:
                print(f"    {text}")
    print(f"wall {wall:.0f} s with {args.jobs} jobs")
    recording.write(
        "crash_points",
        benchmark="benchmarks/bench_crash_points.py",
        what=(
            "Every kind of crash point armed at the start and at each event time of every "
            "example scenario, then random multi-crash runs, all under --check"
        ),
        started=started,
        measured={
            "jobs": args.jobs,
            "arm": args.arm,
            "seed": args.seed,
            "wall_s": round(wall, 1),
            "enumerated": first,
            "random": second,
        },
        figures={
            "enumerated_runs": str(first["runs"]),
            "enumerated_fired": str(first["crashes_fired"]),
            "random_runs": str(second["runs"]),
            "random_fired": str(second["crashes_fired"]),
            "violations": str(first["violations"] + second["violations"]),
        },
    )
    return 1 if first["broken"] or second["broken"] else 0


if __name__ == "__main__":
    sys.exit(main())
