"""Profiles as checked-in evidence: cProfile's stats as a text file, and the shares a doc quotes.

Not a benchmark: bench_fleet.py (--profile/--memory with --write-profile) and
bench_simulate.py (--profile --write-profile) use it to write
benchmarks/results/profiles/*.txt, each headed by the command, the date, the machine and
its load, so a profile is re-run, not hand-pasted. The profilers time CPU (the main
thread's, `time.thread_time`), not wall time: on a shared machine a wall-clock profile
charges whatever function was running when the process was descheduled.

`areas` sums each function's own time by where its code lives (a package, an `rpp`
subpackage, a standard library module); a C function (a socket send, json's decoder) is
charged to the areas of the Python functions that called it, in proportion to the calls.
Its shares (of the profiled CPU) are what docs/install.md's "What the goals cost" quotes,
through the `figures` of a results file (tests/architecture/test_docs_truth.py).
"""

from __future__ import annotations

import collections
import pstats
import re
import sys
import sysconfig
from collections.abc import Sequence
from io import StringIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
PROFILES = Path(__file__).parent / "results" / "profiles"
TOP = 40

_SITE = sysconfig.get_paths()["purelib"] + "/"
_STDLIB = sysconfig.get_paths()["stdlib"] + "/"


def area(filename: str) -> str | None:
    """Where a profiled function's code lives; None for C functions."""
    if filename == "~":
        return None
    if filename.startswith(_SITE):
        return filename[len(_SITE) :].split("/", 1)[0].removesuffix(".py")
    rel = filename.removeprefix(str(ROOT) + "/")
    if rel.startswith("rpp/"):
        parts = rel.split("/")
        return "rpp." + parts[1].removesuffix(".py") if len(parts) > 2 else "rpp"
    if filename.startswith(_STDLIB):
        return "stdlib " + filename[len(_STDLIB) :].split("/", 1)[0].removesuffix(".py")
    return Path(filename).stem


def areas(stats: pstats.Stats) -> list[tuple[str, float]]:
    """(area, own CPU seconds), largest first."""
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    own: dict[str, float] = collections.defaultdict(float)
    for (filename, _line, _name), (_cc, _nc, tottime, _ct, callers) in table.items():
        where = area(filename)
        if where is not None:
            own[where] += tottime
            continue
        # A C function: its time goes to its callers' areas, by their share of the calls.
        calls = {caller: value[1] for caller, value in callers.items()}
        total = sum(calls.values())
        if not total:
            own["C functions"] += tottime
            continue
        for caller, count in calls.items():
            own[area(caller[0]) or "C functions"] += tottime * count / total
    return sorted(own.items(), key=lambda item: -item[1])


def total_s(stats: pstats.Stats) -> float:
    return float(stats.total_tt)  # type: ignore[attr-defined]


def render(stats: pstats.Stats, *, header: Sequence[str], extra: Sequence[str] = ()) -> str:
    """The profile as text: the header, CPU by area, then the top functions by own time
    and by cumulative time."""
    total = total_s(stats)
    out = [*header, "", f"profiled CPU: {total:.2f} s", "", "CPU by area (own time):"]
    for where, seconds in areas(stats)[:20]:
        out.append(f"  {100 * seconds / total:5.1f}%  {seconds:8.2f} s  {where}")
    out += [*extra, ""]
    for order in ("tottime", "cumulative"):
        buffer = StringIO()
        copy = pstats.Stats(stream=buffer)
        copy.add(stats)
        copy.sort_stats(order).print_stats(TOP)
        out.append(_short_paths(buffer.getvalue().split("\n", 2)[-1]))
    return "\n".join(out).rstrip() + "\n"


def shares(stats: pstats.Stats, *, top: int = 8) -> dict[str, str]:
    """The largest areas' shares, as a results file's `figures` ("26%")."""
    total = total_s(stats)
    return {
        f"cpu_share_{re.sub(r'[^a-z0-9]+', '_', where.lower()).strip('_')}": (
            f"{100 * seconds / total:.0f}%"
        )
        for where, seconds in areas(stats)[:top]
    }


def write(name: str, text: str) -> Path:
    PROFILES.mkdir(parents=True, exist_ok=True)
    path = PROFILES / name
    path.write_text(text)
    return path


def command_line() -> str:
    return " ".join([".venv/bin/python", *sys.argv])


def _short_paths(text: str) -> str:
    return text.replace(_SITE, "").replace(_STDLIB, "stdlib/").replace(str(ROOT) + "/", "")
