"""The serving path keeps clients served while pods die, fail, get terminated or rolled.

Each test runs one scenario of tests/serving/scenarios.py, shortened (`TEST`), on its own
rig: real nginx with the rendered slots and examples/nginx.yaml's static config, `rpp
fake-runpod` as RunPod's proxy and pods, `rpp run` driving the pool through a Kubernetes
API stand-in, `rpp nginx-reloader` as nginx's sidecar, and inference-shaped traffic
(POSTs with bodies, GETs, streams). The targets, on every kind of request:

- no failed request that was not already in flight on the failing pod when it failed;
- no stream cut by a slot change, a roll or a scale-down (nginx reloads under them);
- work started twice only for requests whose first pod failed within nginx's 2 s
  retry window.

benchmarks/bench_serving.py runs every scenario at full length and writes the figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.serving.scenarios import SCENARIOS, TEST, run

# The failure modes that differ in how nginx learns of them, and the slot changes.
NAMES = ["dies", "fails-1.5s", "console", "roll"]


def problems(result: dict[str, Any]) -> list[str]:
    summary = result["summary"]
    found = [f"unexpected failure: {line}" for line in summary["unexpected_examples"]]
    if summary["unexpected"] and not found:
        found.append(f"{summary['unexpected']} unexpected failures")
    if summary["duplicated_late"]:
        found.append(f"{summary['duplicated_late']} requests started twice past the window")
    return found


@pytest.mark.parametrize("name", NAMES)
async def test_clients_lose_only_what_the_failing_pod_had_in_flight(
    name: str, tmp_path: Path
) -> None:
    scenario = SCENARIOS[name]
    result = await run(scenario, scale=TEST, workdir=tmp_path)
    summary = result["summary"]
    assert problems(result) == [], summary
    for kind, counts in summary["kinds"].items():
        assert counts["total"] > 0, f"no {kind} request was sent"
    if scenario.changes_slots:
        # The slots changed while the traffic ran: nginx reloaded under it.
        assert len(result["slot_versions_loaded"]) >= 2, result["slot_versions_loaded"]
    for fault in result["faults"]:
        victim = [m for m in result["members_after"] if m["podId"] == fault["pod"]]
        assert all(m["slot"] is None for m in victim), f"{fault['pod']} still serves"
    if scenario.quarantines:
        # Out of nginx by the quarantine, before the Unreachable rule's duration.
        [out] = result["failing_pods_out"]
        assert out.get("quarantine"), out
