"""`rpp simulate`: the real controller against a simulated RunPod, on simulated time.

Runs one scenario (docs/simulator.md; the embedded default without --scenario): the
real controller loop, decide, member machines, RunPod client, prober, Prometheus client
and executor, against the fake RunPod cloud, fake inference pods, the in-memory
Kubernetes and a fake Prometheus, on a virtual-time event loop. A day of a pool takes
seconds; the same scenario and seed give the same output, byte for byte.

Prints a readable timeline (what happened, what the controller did and why) and the
final member table, or with --json one JSON object per line (rpp/sim/timeline.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import random
import sys
from importlib import resources
from pathlib import Path
from typing import TextIO

from rpp.model.documents import clip
from rpp.model.durations import DurationError, format_duration, parse_duration
from rpp.sim.cloud_scenario import ScenarioError
from rpp.sim.knobs import turn
from rpp.sim.scenario import MAX_DURATION_S, Scenario, load_scenario, parse_scenario_text
from rpp.sim.timeline import Timeline
from rpp.sim.virtual_time import VirtualClock, run_virtual
from rpp.sim.world import World

DEFAULT_SCENARIO = "default_scenario.yaml"
DEFAULT_IMAGE = "ghcr.io/example/inference:1.0.0"
TRAFFIC_OFFSET_S = 5.0  # traffic runs between loops, as users do not wait for them
# One request per wired pod every 30 s: a [5m] window holds 10 answers, so an error
# share a scenario sets in tenths (`errors` ratio 0.3) reads exactly once the window is
# all failing (one a minute gave 5 answers: 30% read as 20% or 40%).
TRAFFIC_PERIOD_S = 30.0
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
    parser.set_defaults(func=run)


def default_scenario() -> Scenario:
    text = resources.files("rpp.sim").joinpath(DEFAULT_SCENARIO).read_text(encoding="utf-8")
    return parse_scenario_text(text, source=f"(embedded {DEFAULT_SCENARIO})")


def run(args: argparse.Namespace) -> int:
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
    simulate_to(scenario, out=sys.stdout, as_json=args.json, until=duration, seed=args.seed)
    return 0


def until_seconds(text: str, *, scenario: Scenario) -> float:
    """--until as seconds: at least 1s (0s would simulate nothing), at most 30 days."""
    seconds = parse_duration(text)
    if seconds < 1:
        raise DurationError(
            f"{text!r} simulates nothing; give at least 1s, or leave --until out to run the "
            f"scenario's {format_duration(scenario.duration)}"
        )
    if seconds > MAX_DURATION_S:
        raise DurationError(
            f"{text!r} is past the limit of {format_duration(MAX_DURATION_S)} of simulated time"
        )
    return seconds


def simulate_to(
    scenario: Scenario,
    *,
    out: TextIO | None,
    as_json: bool = False,
    until: float | None = None,
    seed: int | None = None,
) -> Timeline:
    """Run a scenario on a fresh virtual-time loop; returns the whole timeline."""
    if seed is not None:
        scenario = dataclasses.replace(
            scenario, cloud=dataclasses.replace(scenario.cloud, seed=seed)
        )
    # RunPod retries jitter with `random`: seeded, a run replays exactly.
    random.seed(scenario.cloud.seed)

    async def main(clock: VirtualClock) -> Timeline:
        return await simulate(
            scenario,
            clock=clock,
            out=out,
            as_json=as_json,
            until=scenario.duration if until is None else until,
        )

    return run_virtual(main)


async def simulate(
    scenario: Scenario, *, clock: VirtualClock, out: TextIO | None, as_json: bool, until: float
) -> Timeline:
    """The scenario's world, its events at their times, the controller running throughout."""
    if out is not None and not as_json:
        out.write(_header(scenario, until))
    timeline = Timeline(clock=clock, out=out, as_json=as_json)
    world = World(
        clock=clock,
        namespace=scenario.namespace,
        cloud=scenario.cloud,
        interval=scenario.interval,
        fake_prometheus=True,
        on_cloud=timeline.cloud,
        on_result=timeline.result,
    )
    world.setup_pool(scenario.pool, default_image=DEFAULT_IMAGE)
    loop = asyncio.get_running_loop()
    start = loop.time()
    stop = asyncio.Event()
    running = asyncio.create_task(world.controller.loop.run(stop=stop))
    traffic = asyncio.create_task(_traffic(world, TRAFFIC_PERIOD_S))
    try:
        for event in scenario.events:
            if event.at > until:
                break
            await asyncio.sleep(max(0.0, start + event.at - loop.time()))
            if event.do == "controller-restart":
                running.cancel()  # discarded mid-whatever, as a killed process is
                with contextlib.suppress(asyncio.CancelledError):
                    await running
            turned = await turn(world, event, pool=scenario.name)
            if turned.fault is not None:
                timeline.cloud(turned.fault)
            else:
                timeline.scenario(event.do, turned.detail)
            if event.do == "controller-restart":
                running = asyncio.create_task(world.controller.loop.run(stop=stop))
        await asyncio.sleep(max(0.0, start + until - loop.time()))
        stop.set()  # as SIGTERM: the loop under way finishes
        await running
    finally:
        traffic.cancel()
        running.cancel()
        await asyncio.gather(traffic, running, return_exceptions=True)
        if world.kube.has_pool(scenario.name):
            final = world.kube.pool(scenario.name)
            timeline.end(scenario.name, final.get("status") or {})
        else:  # `do: delete` and the finalizer let it go
            timeline.end(scenario.name, None)
        await world.close()
    return timeline


async def _traffic(world: World, period: float) -> None:
    await asyncio.sleep(TRAFFIC_OFFSET_S)
    while True:
        world.send_traffic()
        await asyncio.sleep(period)


def _header(scenario: Scenario, until: float) -> str:
    length = format_duration(until)
    if until != scenario.duration:
        # --until: say that this is not the scenario's own length, so no one waits for
        # the events the description promises after the end.
        own = format_duration(scenario.duration)
        length = f"{length} (--until; the scenario runs {own})"
    lines = [f"Scenario {scenario.source}: pool {scenario.name}, {length}"]
    if scenario.description:
        lines += [f"  {line}" for line in scenario.description.splitlines()]
    lines.append("")
    return "\n".join(lines) + "\n"
