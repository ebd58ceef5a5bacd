"""The soak: many generated scenarios under the invariant checker, one summary line.

Where it sits: `rpp simulate --soak N --seed S` (rpp/commands/simulate.py), the test
suite's bounded soak and the nightly workflow. Scenario i of seed S is generated
(rpp/sim/generate.py), checked by the scenario reader like a file, and run on its own
virtual-time loop with every invariant checked every loop and at the end
(rpp/sim/check/). Scenarios are independent, so `jobs` worker processes may run them;
the result is the same whatever the number of jobs.

The summary line counts what was exercised (scenarios, loops, creates, controller
crashes, faults dealt) and what broke (violations, leaked pods). Each violation is
reported with its scenario, and the failing scenarios can be written out as files
to replay with `rpp simulate --scenario FILE --check`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from rpp.sim.check.checker import Violation, count_leaks
from rpp.sim.generate import generate
from rpp.sim.run import run_scenario
from rpp.sim.scenario import parse_scenario


@dataclass(frozen=True)
class CaseResult:
    """One generated scenario's run: what it exercised and what it broke."""

    index: int
    loops: int
    creates: int
    crashes: int
    faults: int
    violations: tuple[Violation, ...]
    document: str = field(repr=False)  # the scenario as YAML, to replay it
    points: tuple[str, ...] = ()  # the kinds of crash point that fired

    @property
    def leaks(self) -> int:
        return count_leaks(self.violations)


@dataclass
class SoakSummary:
    """The whole soak, added up in scenario order."""

    seed: int
    scenarios: int = 0
    loops: int = 0
    creates: int = 0
    crashes: int = 0
    faults: int = 0
    violations: int = 0
    leaks: int = 0
    points: set[str] = field(default_factory=set)  # every kind of crash point that fired

    def add(self, case: CaseResult) -> None:
        self.scenarios += 1
        self.loops += case.loops
        self.creates += case.creates
        self.crashes += case.crashes
        self.faults += case.faults
        self.violations += len(case.violations)
        self.leaks += case.leaks
        self.points.update(case.points)

    def line(self) -> str:
        return (
            f"soak: {self.scenarios} scenarios (seed {self.seed}), {self.loops} loops, "
            f"{self.creates} creates, {self.crashes} crashes, {self.faults} faults, "
            f"{self.violations} violations, {self.leaks} leaks"
        )


def run_case(seed: int, index: int, duration: float | None = None) -> CaseResult:
    """Generate scenario `index` of `seed` and run it under the checker."""
    logging.getLogger().addHandler(logging.NullHandler())
    document = generate(seed, index, duration=duration)
    scenario = parse_scenario(document, source=f"soak-{seed}-{index}")
    run = run_scenario(scenario, out=None, check_invariants=True)
    checker = run.checker
    assert checker is not None
    return CaseResult(
        index=index,
        loops=checker.loops,
        creates=checker.creates,
        crashes=run.crashes,
        faults=run.faults,
        violations=tuple(checker.violations),
        document=yaml.safe_dump(document, sort_keys=False),
        points=tuple(f"{p.when} {p.target}" for p in run.points),
    )


def _cases(seed: int, count: int, duration: float | None, jobs: int) -> Iterator[CaseResult]:
    if jobs <= 1:
        for index in range(count):
            yield run_case(seed, index, duration)
        return
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(
            run_case, [seed] * count, range(count), [duration] * count, chunksize=1
        )


def soak(
    *,
    seed: int,
    count: int,
    duration: float | None = None,
    jobs: int = 1,
    keep: Path | None = None,
    report: Callable[[str], None] = print,
    progress: Callable[[SoakSummary], None] | None = None,
) -> SoakSummary:
    """Run `count` generated scenarios; `report` hears each violation as a line,
    `progress` the summary so far after each scenario."""
    summary = SoakSummary(seed=seed)
    for case in _cases(seed, count, duration, jobs):
        summary.add(case)
        if progress is not None:
            progress(summary)
        for violation in case.violations:
            report(f"soak: scenario {case.index} of seed {seed}: {violation.text()}")
        if case.violations and keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            path = keep / f"soak-{seed}-{case.index}.yaml"
            path.write_text(case.document, encoding="utf-8")
            report(f"soak: scenario {case.index} written to {path}")
    return summary


def progress_line(summary: SoakSummary, *, total: int, elapsed_s: float) -> str:
    """`soak: 37/100 scenarios, 0 violations, about 2m10s left`: the line a terminal shows
    while a soak runs (time left at the pace so far)."""
    done = summary.scenarios
    left = "" if done == 0 else f", about {_minutes(elapsed_s / done * (total - done))} left"
    return f"soak: {done}/{total} scenarios, {summary.violations} violations{left}"


def _minutes(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60}m{whole % 60:02d}s" if whole >= 60 else f"{whole}s"
