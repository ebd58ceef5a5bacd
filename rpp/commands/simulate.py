"""`rpp simulate`: the real controller against a simulated RunPod, on simulated time.

Runs one scenario (docs/simulator.md; the embedded default without --scenario): the
real controller loop, decide, member machines, RunPod client, prober, Prometheus client
and executor, against the fake RunPod cloud, fake inference pods, the in-memory
Kubernetes and a fake Prometheus, on a virtual-time event loop. A day of a 10-pod pool
takes about 36 s of CPU (benchmarks/results/simulate.json); the same scenario and seed
give the same output, byte for byte.

Prints a readable timeline (what happened, what the controller did and why) and the
final member table, or with --json one JSON object per line (rpp/sim/timeline.py).
With --check, every loop and the end are checked against the invariants
(rpp/sim/check/): each violation is printed with its loop and numbers, and the exit
code is 1. With --soak N, N generated scenarios run under --check and one summary line
is printed (rpp/sim/soak.py); on a terminal, a line on stderr says how far it is
(scenarios done, violations so far, time left).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from importlib import resources
from pathlib import Path

from rpp.model.documents import clip
from rpp.model.durations import DurationError, format_duration, parse_duration
from rpp.sim.cloud_scenario import ScenarioError
from rpp.sim.run import run_scenario
from rpp.sim.scenario import MAX_DURATION_S, Scenario, load_scenario, parse_scenario_text
from rpp.sim.soak import SoakSummary, progress_line, soak

DEFAULT_SCENARIO = "default_scenario.yaml"
CLIP_LINE = 400  # an error line: the field's path and sentence, and a clipped value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "simulate",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument(
        "--scenario", type=Path, metavar="FILE", help="scenario YAML (default: the embedded one)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument(
        "--until", metavar="DURATION", help="simulate this long instead (e.g. 30m, 24h)"
    )
    parser.add_argument("--seed", type=int, metavar="N", help="seed (default: the scenario's)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the invariants every loop; exit 1 on a violation",
    )
    parser.add_argument(
        "--soak", type=int, metavar="N", help="run N generated scenarios under --check"
    )
    parser.add_argument(
        "--jobs", type=int, default=1, metavar="N", help="with --soak: worker processes"
    )
    parser.add_argument(
        "--keep", type=Path, metavar="DIR", help="with --soak: write failing scenarios here"
    )
    parser.set_defaults(func=run)


def default_scenario() -> Scenario:
    text = resources.files("rpp.sim").joinpath(DEFAULT_SCENARIO).read_text(encoding="utf-8")
    return parse_scenario_text(text, source=f"(embedded {DEFAULT_SCENARIO})")


def run(args: argparse.Namespace) -> int:
    if args.soak is not None:
        return run_soak(args)
    try:
        scenario = load_scenario(args.scenario) if args.scenario else default_scenario()
    except ScenarioError as error:
        for line in str(error).splitlines():
            print(clip(line, CLIP_LINE), file=sys.stderr)
        return 2
    duration = scenario.duration
    if args.until is not None:
        try:
            duration = until_seconds(args.until, scenario=scenario)
        except DurationError as error:
            print(clip(f"rpp simulate: --until: {error}", CLIP_LINE), file=sys.stderr)
            return 2
    # The controller's own log lines would drown the timeline; the timeline says it all.
    logging.getLogger().addHandler(logging.NullHandler())
    done = run_scenario(
        scenario,
        out=sys.stdout,
        as_json=args.json,
        until=duration,
        seed=args.seed,
        check_invariants=args.check,
    )
    if done.checker is None:
        return 0
    checker = done.checker
    line = (
        f"check: {checker.loops} loops, {checker.creates} creates, {done.crashes} crashes, "
        f"{done.faults} faults, {len(checker.violations)} violations, {checker.leaks} leaks"
    )
    print(line, file=sys.stderr)
    return 1 if checker.violations else 0


def run_soak(args: argparse.Namespace) -> int:
    """`--soak N`: generated scenarios under the checker; one summary line on stdout."""
    if args.scenario is not None or args.json:
        print(
            "rpp simulate: --soak generates its scenarios; drop --scenario and --json",
            file=sys.stderr,
        )
        return 2
    if args.soak < 1 or args.jobs < 1:
        print("rpp simulate: --soak and --jobs take a whole number >= 1", file=sys.stderr)
        return 2
    duration = None
    if args.until is not None:
        try:
            duration = until_seconds(args.until)
        except DurationError as error:
            print(clip(f"rpp simulate: --until: {error}", CLIP_LINE), file=sys.stderr)
            return 2
    # On a terminal, one line on stderr kept up to date (scenarios done, violations so
    # far, time left); in a log or a pipe, nothing but the violations and the summary.
    live = sys.stderr.isatty()
    started = time.monotonic()

    def show(line: str) -> None:
        print(("\r\033[K" if live else "") + line, file=sys.stderr)

    def progress(summary: SoakSummary) -> None:
        line = progress_line(summary, total=args.soak, elapsed_s=time.monotonic() - started)
        print("\r\033[K" + line, end="", file=sys.stderr, flush=True)

    summary = soak(
        seed=args.seed if args.seed is not None else 0,
        count=args.soak,
        duration=duration,
        jobs=args.jobs,
        keep=args.keep,
        report=show,
        progress=progress if live else None,
    )
    if live:
        print("\r\033[K", end="", file=sys.stderr, flush=True)
    print(summary.line())
    return 1 if summary.violations else 0


def until_seconds(text: str, *, scenario: Scenario | None = None) -> float:
    """--until as seconds: at least 1s (0s would simulate nothing), at most 30 days."""
    seconds = parse_duration(text)
    if seconds < 1:
        own = f"the scenario's {format_duration(scenario.duration)}" if scenario else "each"
        raise DurationError(
            f"{text!r} simulates nothing; give at least 1s, or leave --until out to run {own}"
        )
    if seconds > MAX_DURATION_S:
        raise DurationError(
            f"{text!r} is past the limit of {format_duration(MAX_DURATION_S)} of simulated time"
        )
    return seconds
