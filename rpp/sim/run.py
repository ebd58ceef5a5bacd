"""Run one scenario: the world, its events at their times, the controller throughout.

Where it sits: the simulator's driver, under `rpp simulate` (rpp/commands/simulate.py),
the soak (rpp/sim/soak.py), the tests and the benchmarks. It builds the world from the
scenario (rpp/sim/world.py), runs controller processes on it one after the other
(a killed one is replaced at once), turns the scenario's knobs at their times
(rpp/sim/knobs.py), sends nginx's traffic between loops, and feeds the timeline
(rpp/sim/timeline.py) and, when asked, the invariant checker (rpp/sim/check/).

Everything runs on a fresh virtual-time loop seeded by the scenario, so the same
scenario and seed replay byte for byte.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from dataclasses import dataclass
from typing import Any, TextIO

from rpp.model.durations import format_duration
from rpp.sim.check import Checker, check
from rpp.sim.crash_points import CrashPoint
from rpp.sim.knobs import turn
from rpp.sim.scenario import Scenario
from rpp.sim.timeline import Timeline
from rpp.sim.virtual_time import VirtualClock, run_virtual
from rpp.sim.world import World

DEFAULT_IMAGE = "ghcr.io/example/inference:1.0.0"
TRAFFIC_OFFSET_S = 5.0  # traffic runs between loops, as users do not wait for them
# One request per wired pod every 30 s: a [5m] window holds 10 answers, so an error
# share a scenario sets in tenths (`errors` ratio 0.3) reads exactly once the window is
# all failing (one a minute gave 5 answers: 30% read as 20% or 40%).
TRAFFIC_PERIOD_S = 30.0


@dataclass(frozen=True)
class Run:
    """What one simulation produced: its timeline and, when checked, the verdict."""

    timeline: Timeline
    checker: Checker | None
    crashes: int  # controller processes killed (scripted or at a crash point)
    faults: int  # RunPod calls and status writes that suffered a fault
    points: tuple[CrashPoint, ...] = ()  # the crash points that fired, in order
    events: tuple[dict[str, Any], ...] = ()  # the pool's Events, as the API server keeps them


def run_scenario(
    scenario: Scenario,
    *,
    out: TextIO | None,
    as_json: bool = False,
    until: float | None = None,
    seed: int | None = None,
    check_invariants: bool = False,
) -> Run:
    """Run a scenario on a fresh virtual-time loop; returns the whole run."""
    if seed is not None:
        scenario = dataclasses.replace(
            scenario, cloud=dataclasses.replace(scenario.cloud, seed=seed)
        )
    # RunPod retries jitter with `random`: seeded, a run replays exactly.
    random.seed(scenario.cloud.seed)

    async def main(clock: VirtualClock) -> Run:
        return await simulate(
            scenario,
            clock=clock,
            out=out,
            as_json=as_json,
            until=scenario.duration if until is None else until,
            check_invariants=check_invariants,
        )

    return run_virtual(main)


async def simulate(
    scenario: Scenario,
    *,
    clock: VirtualClock,
    out: TextIO | None,
    as_json: bool,
    until: float,
    check_invariants: bool = False,
) -> Run:
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
    # What the simulator prints leaves the process as its log would: scrubbed by its redactor.
    timeline.scrub = world.scrub
    world.setup_pool(scenario.pool, default_image=DEFAULT_IMAGE)
    checker = check(world, scenario.name) if check_invariants else None
    world.crossings.crash_listeners.append(
        lambda cause: timeline.scenario("controller-restart", f"{cause}; a new one starts")
    )
    loop = asyncio.get_running_loop()
    start = loop.time()
    stop = asyncio.Event()
    running = asyncio.create_task(world.run_controller(stop=stop))
    traffic = asyncio.create_task(_traffic(world, TRAFFIC_PERIOD_S))
    try:
        for event in scenario.events:
            if event.at > until:
                break
            await asyncio.sleep(max(0.0, start + event.at - loop.time()))
            turned = await turn(world, event, pool=scenario.name)
            if turned.fault is not None:
                timeline.cloud(turned.fault)
            else:
                timeline.scenario(event.do, turned.detail)
        await asyncio.sleep(max(0.0, start + until - loop.time()))
        stop.set()  # as SIGTERM: the loop under way finishes
        await running
    finally:
        traffic.cancel()
        running.cancel()
        await asyncio.gather(traffic, running, return_exceptions=True)
        for point in world.crossings.crashes.armed:
            timeline.scenario(
                "controller-restart", f"never reached: the crash point {point.describe()}"
            )
        if checker is not None:
            checker.finish()
            for violation in checker.violations:
                timeline.violation(violation)
        if world.kube.has_pool(scenario.name):
            final = world.kube.pool(scenario.name)
            timeline.end(scenario.name, final.get("status") or {})
        else:  # `do: delete` and the finalizer let it go
            timeline.end(scenario.name, None)
        await world.close()
    faults = world.cloud.faults.struck.total() + world.crossings.kube_faults_struck
    points = tuple(world.crossings.crashes.fired)
    return Run(
        timeline=timeline,
        checker=checker,
        crashes=world.restarts,
        faults=faults,
        points=points,
        events=tuple(world.kube.events),
    )


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
