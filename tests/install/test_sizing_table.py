"""docs/install.md's sizing table is the fleet benchmark's results, not a hand-typed copy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def test_the_sizing_table_matches_the_fleet_benchmarks_results() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "sizing_table.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
