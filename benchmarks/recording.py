"""Where benchmark figures go: one JSON file per benchmark in benchmarks/results/.

Not a benchmark itself: the benchmarks import it. A doc may quote a speed or memory
figure only from one of these files, and tests/test_docs_measured.py fails when README.md
or a page in docs/ states a figure that no results file holds. Each file records when
and where it was measured (date, CPU model and count, Python version, the load on the
machine when the run started), the raw runs, and `figures`: the exact texts a doc may
quote ("41 s", "53 MiB"), rounded as the doc states them.

CPU time is user + sys of the measured process (or child process), which a loaded or
shared machine disturbs far less than wall time; wall time is recorded beside it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def machine() -> dict[str, Any]:
    """The date and the machine, as a results file records them."""
    return {
        "date": dt.datetime.now(dt.UTC).date().isoformat(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max of repeated runs."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
    }


def write(
    name: str,
    *,
    benchmark: str,
    what: str,
    started: Mapping[str, Any],
    measured: Mapping[str, Any],
    figures: Mapping[str, str],
) -> Path:
    """Write benchmarks/results/NAME.json and return its path."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    body = {
        "benchmark": benchmark,
        "what": what,
        "machine": dict(started),
        "measured": dict(measured),
        "figures": dict(figures),
    }
    path.write_text(json.dumps(body, indent=2, sort_keys=False) + "\n")
    return path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
