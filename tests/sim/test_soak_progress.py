"""`rpp simulate --soak` says how far it is on a terminal, and only its summary elsewhere."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

from rpp.sim.soak import SoakSummary, progress_line, soak

SOAK = [sys.executable, "-m", "rpp", "simulate", "--soak", "2", "--seed", "3", "--until", "10m"]


def test_progress_line_counts_scenarios_violations_and_time_left() -> None:
    summary = SoakSummary(seed=1, scenarios=25, violations=2)
    line = progress_line(summary, total=100, elapsed_s=50.0)
    assert line == "soak: 25/100 scenarios, 2 violations, about 2m30s left"
    assert progress_line(SoakSummary(seed=1), total=4, elapsed_s=0.0) == (
        "soak: 0/4 scenarios, 0 violations"
    )


def test_soak_reports_its_progress_after_every_scenario() -> None:
    seen: list[int] = []
    soak(
        seed=3,
        count=2,
        duration=600.0,
        report=lambda line: None,
        progress=lambda s: seen.append(s.scenarios),
    )
    assert seen == [1, 2]


def test_a_terminal_sees_progress_and_a_pipe_only_the_summary() -> None:
    piped = subprocess.run(SOAK, capture_output=True, text=True, timeout=300, check=False)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith("soak: 2 scenarios (seed 3)")
    assert piped.stderr == ""

    leader, follower = pty.openpty()
    with subprocess.Popen(SOAK, stdout=subprocess.PIPE, stderr=follower) as process:
        os.close(follower)
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            seen += chunk
        out, _ = process.communicate(timeout=300)
    os.close(leader)
    assert process.returncode == 0
    assert out.decode().startswith("soak: 2 scenarios (seed 3)")
    assert b"soak: 1/2 scenarios, 0 violations, about " in seen
    assert b"soak: 2/2 scenarios, 0 violations" in seen
