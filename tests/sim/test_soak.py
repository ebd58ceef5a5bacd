"""The bounded soak: 100 generated scenarios under the invariant checker, in the suite.

Each scenario (rpp/sim/generate.py) is an hour of a 3-to-8-pod pool with deaths, hangs,
slow hosts, error bursts, notes, stock outages, spec changes, RunPod faults and
controller crashes at points that cycle over every kind; every loop and the end are
checked (rpp/sim/check/). The nightly workflow runs 1,000 longer ones
(.github/workflows/soak.yml). The soak's duration is printed, never asserted: speed is
measured, not tested, on a shared machine.
"""

from __future__ import annotations

import time

from rpp.sim.crash_points import EFFECTS, TARGETS, WHENS
from rpp.sim.soak import soak

SEED = 14
SCENARIOS = 100


def test_a_bounded_soak_with_faults_and_crashes_breaks_no_invariant() -> None:
    started = time.perf_counter()
    reported: list[str] = []
    summary = soak(seed=SEED, count=SCENARIOS, duration=3600.0, jobs=2, report=reported.append)
    print(f"\n{summary.line()} in {time.perf_counter() - started:.0f}s")
    assert reported == [], "\n".join(reported)
    assert (summary.violations, summary.leaks) == (0, 0)
    assert summary.scenarios == SCENARIOS
    # It exercised what it claims: creates, faults, and crashes of every kind.
    assert summary.creates > SCENARIOS
    assert summary.faults > 10 * SCENARIOS
    assert summary.crashes > 2 * SCENARIOS
    # Every crash point fired except around listDataCenters: the controller never lists
    # datacenters (RunPod's client has the call; only its own tests use it).
    called = [target for target in TARGETS if target != "listDataCenters"]
    kinds = {f"{when} {target}" for when in WHENS for target in called}
    assert summary.points == kinds | {f"before {EFFECTS}"}
