"""Benchmark: the instructions one simulated hour costs, counted by callgrind, not timed.

Not a test: run it by hand (valgrind from Debian's package; about a minute a revision):

    .venv/bin/python benchmarks/bench_instructions.py [--against REV] [--until 1h] [--write]

Why instructions: this project's machines are shared, and the same process's CPU time
moves by a third from run to run (benchmarks/results/simulate.json records three runs). An
instruction count is the same for the same code and input whatever else the machine is
doing, so two revisions compare on any day. What runs: `rpp simulate --until 1h` (the
embedded default scenario, 3 pods, 120 loops: the controller's loop, the member machines,
the prober, the RunPod, Prometheus and Kubernetes clients, and the fakes) under
`valgrind --tool=callgrind`, interpreter start and imports included. With `--against
REV`, REV is checked out in a temporary git worktree and counted the same way, with this
checkout's virtualenv, so the figures give the change's ratio. `--write` records them in
benchmarks/results/simulate_instructions.json.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import recording

ROOT = Path(__file__).parents[1]
_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def instructions(source: Path, *, until: str) -> int:
    """Instructions of `rpp simulate --until UNTIL` run from the code at `source`."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    env = {**os.environ, "PYTHONPATH": str(source)}
    done = subprocess.run(
        [
            valgrind,
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-m",
            "rpp",
            "simulate",
            "--until",
            until,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=source,
        check=False,
    )
    found = _COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"callgrind run failed ({done.returncode}): {done.stderr[-2000:]}")
    return int(found.group(1))


def revision(where: Path) -> str:
    out = subprocess.run(
        ["git", "-C", str(where), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", help="also count this git revision")
    parser.add_argument("--until", default="1h", help="simulated time (default 1h)")
    parser.add_argument("--write", action="store_true", help="write the results file")
    args = parser.parse_args()
    started = recording.machine()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--", "rpp"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    counted: list[dict[str, Any]] = []
    if args.against:
        with tempfile.TemporaryDirectory(prefix="rpp-instructions-") as tmp:
            tree = Path(tmp) / "tree"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.against],
                capture_output=True,
                check=True,
            )
            try:
                count = instructions(tree, until=args.until)
                counted.append({"revision": revision(tree), "instructions": count})
            finally:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                    capture_output=True,
                    check=False,
                )
        print(f"{counted[-1]['revision']}: {counted[-1]['instructions']:,} instructions")
    here = revision(ROOT) + ("+changes" if dirty else "")
    counted.append({"revision": here, "instructions": instructions(ROOT, until=args.until)})
    print(f"{here}: {counted[-1]['instructions']:,} instructions")
    figures = {"instructions": f"{counted[-1]['instructions'] / 1e9:.2f} G instructions"}
    if len(counted) == 2:
        ratio = counted[1]["instructions"] / counted[0]["instructions"]
        figures["against"] = f"{counted[0]['instructions'] / 1e9:.2f} G instructions"
        figures["change"] = f"{abs(100 * (ratio - 1)):.0f}%"
        figures["direction"] = "fewer" if ratio < 1 else "more"
        print(f"change: {figures['change']} {figures['direction']}")
    if args.write:
        path = recording.write(
            "simulate_instructions",
            benchmark="benchmarks/bench_instructions.py",
            what=(
                f"instructions (callgrind) of `rpp simulate --until {args.until}` on the "
                "default scenario, interpreter start and imports included, per revision"
            ),
            started=started,
            measured={"until": args.until, "revisions": counted},
            figures=figures,
        )
        print(f"written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
