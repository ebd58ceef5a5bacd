"""docs/install.md's sizing table, generated from the fleet benchmark's results.

    .venv/bin/python benchmarks/sizing_table.py           # rewrite the table in place
    .venv/bin/python benchmarks/sizing_table.py --check   # exit 1 when it is stale

The table sits between the markers `<!-- sizing:start -->` and `<!-- sizing:end -->` in
docs/install.md. Its rows come from benchmarks/results/fleet.json (and fleet_tls.json
when it exists), one per fleet size measured, each figure quoted exactly as the results
file's `figures` give it (tests/architecture/test_docs_truth.py holds every doc to that).
tests/install/test_sizing_table.py runs `--check`, so a new measurement without a new table fails.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
DOC = ROOT / "docs" / "install.md"
RESULTS = ROOT / "benchmarks" / "results"
START = "<!-- sizing:start -->"
END = "<!-- sizing:end -->"


def rows(name: str) -> list[str]:
    path = RESULTS / name
    if not path.is_file():
        return []
    body: dict[str, Any] = json.loads(path.read_text())
    figures = body["figures"]
    out = []
    for size in body["measured"]["sizes"]:
        n = size["members"]
        calls = size["runpod_calls_per_loop"]["median"]
        out.append(
            f"| {n:,} ({size['pools']} pools) | {size['scheme']} | {figures[f'cpu_per_loop_{n}']} "
            f"| {figures[f'millicores_{n}']} | {figures[f'rss_{n}']} | {figures[f'peak_rss_{n}']} "
            f"| {figures[f'reconcile_wall_{n}']} | {calls:g} |"
        )
    return out


def table() -> str:
    header = [
        "| members | pods over | CPU per 30 s loop | average CPU | resident memory, steady "
        "| peak | longest pool reconcile | RunPod calls per loop |",
        "|---|---|---|---|---|---|---|---|",
    ]
    return "\n".join([START, *header, *rows("fleet.json"), *rows("fleet_tls.json"), END])


def render(text: str) -> str:
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    return before + table() + after


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the table is stale")
    args = parser.parse_args()
    text = DOC.read_text()
    if START not in text or END not in text:
        print(f"{DOC.relative_to(ROOT)} has no {START} ... {END} markers", file=sys.stderr)
        return 1
    new = render(text)
    if args.check:
        if new != text:
            print(
                f"{DOC.relative_to(ROOT)}: the sizing table does not match "
                "benchmarks/results/fleet*.json; run benchmarks/sizing_table.py",
                file=sys.stderr,
            )
            return 1
        return 0
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
