"""The docs tell measured truth, and only point at what a user has.

Every speed or memory figure in README.md and docs/ must be one a benchmark measured and
checked in under benchmarks/results/ (with the date and the machine), quoted as the
results file's `figures` give it, in a page that names that file. A hand-typed or stale
figure fails here. Figures are recognised by their units (ms, µs, MiB, millicores...)
or by the way estimates are stated ("about 3 s", "~15%"); configured values ("a 30 s
interval", "cpu: 500m") are neither.

The docs also must not send a reader to documents that ship with no clone: the product
brief and design notes this project was planned from, or its issue tracker.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rpp.controller import leader
from rpp.sim.faults import check_operation, fault_from_dict

ROOT = Path(__file__).parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RESULTS = ROOT / "benchmarks" / "results"

NUMBER = r"\d+(?:[.,]\d+)*"
# Units only a measurement gives, in these docs.
MEASURED = re.compile(rf"(?<![\w.])({NUMBER})\s?(ms|µs|us|KiB|MiB|GiB|kB|MB|GB|millicores)\b")
# Times and shares stated as estimates.
ESTIMATE = re.compile(
    rf"\b(?:about|around|approximately|roughly|nearly|almost)\s+({NUMBER})\s?"
    r"(s|seconds?|minutes?|%)(?!\w)|~\s?(" + NUMBER + r")\s?(s|seconds?|%)(?!\w)"
)
UNITS = {"seconds": "s", "second": "s", "minute": "min", "minutes": "min", "us": "µs"}

# Documents a user does not have: the planning brief, design notes, the issue tracker.
ELSEWHERE = re.compile(
    r"seed README|\bthe seed'?s?\b|\b(?:target|planned) architecture\b|planned against"
    r"|\bdesign (?:doc|notes?)\b|\bissue #?\d+\b|testing-notes|style-anchors"
    r"|statemachine-guide|\bshared/(?:design|seed|runpod)\b"
)


def figure(number: str, unit: str) -> tuple[str, str]:
    return number.replace(",", ""), UNITS.get(unit, unit)


def claims(text: str) -> list[tuple[str, str]]:
    """Every (number, unit) the text states as a measured speed or memory figure."""
    found = [figure(*m.groups()) for m in MEASURED.finditer(text)]
    for m in ESTIMATE.finditer(text):
        number, unit = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        found.append(figure(number, unit))
    return found


def results() -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))}


def sources() -> dict[tuple[str, str], set[str]]:
    """(number, unit) -> the results files whose `figures` hold it."""
    out: dict[tuple[str, str], set[str]] = {}
    for name, body in results().items():
        for text in body["figures"].values():
            for claim in claims(text) or [plain(text)]:
                out.setdefault(claim, set()).add(name)
    return out


def plain(text: str) -> tuple[str, str]:
    """A results figure stated bare: "2 members", "26%"."""
    if text.endswith("%") and " " not in text:
        return figure(text[:-1], "%")
    number, _, unit = text.partition(" ")
    return figure(number, unit)


# The shares of CPU a profile gives, where the docs say what the goals cost.
SHARE = re.compile(rf"(?<![\w.])({NUMBER})\s?%")
COSTS = (ROOT / "docs" / "install.md", "## What the goals cost")


def test_what_the_goals_cost_quotes_its_shares_from_checked_in_profiles() -> None:
    doc, title = COSTS
    text = doc.read_text()
    assert title in text, f"{doc.relative_to(ROOT)} has no {title!r} section"
    body = text.split(title, 1)[1].split("\n## ", 1)[0]
    known = sources()
    shares = [figure(n, "%") for n in SHARE.findall(body)]
    assert shares, "the section names no share of a profile"
    unsourced = [f"{n}%" for n, u in shares if (n, u) not in known]
    assert not unsourced, f"{title!r} states {unsourced}, which no results file holds"
    unnamed = {
        f"{n}%": sorted(known[(n, u)])
        for n, u in shares
        if not any(f"benchmarks/results/{f}" in body for f in known[(n, u)])
    }
    assert not unnamed, f"{title!r} quotes {unnamed} without naming the file"


def test_the_scanner_finds_speed_and_memory_claims_and_skips_settings() -> None:
    text = (
        "A day takes about 31 s, about 11 ms per loop, in about 30 seconds; peak 53 MiB, "
        "9 millicores, ~15% of the CPU. Settings: a 30 s interval, cpu: 500m, 256Mi, "
        "app requests in 0.25 s, the 15 s Lease, 2 minutes of Unreachable."
    )
    assert sorted(claims(text)) == sorted(
        [("31", "s"), ("11", "ms"), ("30", "s"), ("53", "MiB"), ("9", "millicores"), ("15", "%")]
    )


@pytest.mark.parametrize("name", sorted(results()))
def test_every_results_file_says_when_and_where_it_was_measured(name: str) -> None:
    body = results()[name]
    machine = body["machine"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", machine["date"])
    assert machine["cpu"]
    assert machine["cpus"] >= 1
    assert re.fullmatch(r"3\.\d+\.\d+", machine["python"])
    assert (ROOT / body["benchmark"]).is_file()
    assert body["figures"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_speed_or_memory_figure_in_the_docs_comes_from_a_checked_in_result(
    doc: Path,
) -> None:
    text = doc.read_text()
    known = sources()
    unsourced = [f"{n} {u}" for n, u in claims(text) if (n, u) not in known]
    assert not unsourced, (
        f"{doc.relative_to(ROOT)} states {unsourced}, which no file in benchmarks/results/ "
        "holds: run the benchmark that measures it and quote its results file"
    )
    unnamed = {
        f"{n} {u}": sorted(known[(n, u)])
        for n, u in claims(text)
        if not any(f"benchmarks/results/{f}" in text for f in known[(n, u)])
    }
    assert not unnamed, f"{doc.relative_to(ROOT)} quotes {unnamed} without naming the file"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_doc_points_at_documents_a_user_does_not_have(doc: Path) -> None:
    found = [
        f"line {n}: {m.group(0)!r}"
        for n, line in enumerate(doc.read_text().splitlines(), start=1)
        for m in ELSEWHERE.finditer(line)
    ]
    assert not found, f"{doc.relative_to(ROOT)} refers to what a clone does not hold: {found}"


def test_the_rehearsal_states_the_takeover_bounds_that_leader_py_gives() -> None:
    """A standby takes over after the Lease, counted from the last renewal it saw, which
    it reads every retry period: between LEASE - RETRY and LEASE + 2 RETRY after a kill."""
    text = " ".join((ROOT / "docs" / "rehearsal.md").read_text().split())
    lease, retry = leader.LEASE_DURATION_S, leader.RETRY_PERIOD_S
    assert f"`LEASE_DURATION_S` ({lease:g} s)" in text
    assert f"`RETRY_PERIOD_S` ({retry:g} s)" in text
    assert f"no sooner than {lease - retry:g} s" in text
    assert f"no later than {lease + 2 * retry:g} s" in text


def test_every_fault_the_rehearsal_scripts_is_one_the_fake_accepts() -> None:
    """Each `curl ... /_fake/faults -d '...'` in rehearsal.md, as the fake's control API
    reads it: a known operation and a fault kind with its fields."""
    text = (ROOT / "docs" / "rehearsal.md").read_text()
    bodies = re.findall(r"/_fake/faults\s*\\?\s*-d '(.*?)'(?=\s*\n)", text, flags=re.S)
    bodies = [body.replace("'$POD'", "POD1") for body in bodies]
    assert len(bodies) >= 7
    kinds = set()
    for body in bodies:
        request = json.loads(body)
        check_operation(request["operation"])
        kinds.add(fault_from_dict(request["fault"]).kind)
    assert {"RawAnswer", "OddFields", "ExtraPods", "EchoingRefusal"} <= kinds
