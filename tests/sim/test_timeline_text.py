"""The simulator's readable timeline says what a first-time reader can take literally.

The loop line and the final table are the demo's summary of the pool; these tests feed
the timeline records directly (no simulation) and read the text it prints.
"""

from __future__ import annotations

import datetime as dt
import io

from rpp.adapters.clock import UTC, ManualClock
from rpp.sim.timeline import Timeline, member_table

START = dt.datetime(2026, 1, 1, tzinfo=UTC)


def text_of_loop(*, ready: int, wired: list[str], members: dict[str, str]) -> str:
    out = io.StringIO()
    timeline = Timeline(clock=ManualClock(START), out=out)
    timeline.emit(
        "loop",
        pool="inference",
        mode="Manage",
        ready=ready,
        desired=3,
        wired=wired,
        members=members,
        costPerHour=2.12,
    )
    return out.getvalue().strip()


def test_a_flagged_pod_still_in_nginx_is_named_with_its_phase_not_counted_ready() -> None:
    line = text_of_loop(
        ready=2,
        wired=["a1", "b2", "c3"],
        members={"a1": "Flagged", "b2": "Ready", "c3": "Ready", "d4": "Warming"},
    )
    assert line == (
        "+0:00:00  inference  = Manage: 2 Ready of 3 desired; in nginx: a1 (Flagged) b2 c3; "
        "$2.12/h"
    )


def test_every_pod_named_plainly_in_nginx_is_one_the_ready_count_counts() -> None:
    line = text_of_loop(ready=2, wired=["b2", "c3"], members={"b2": "Ready", "c3": "Ready"})
    ready = int(line.split("= Manage: ")[1].split(" Ready")[0])
    listed = line.split("in nginx: ")[1].split(";")[0].split()
    assert ready == len(listed) == 2


def test_a_phase_change_of_a_pod_that_stays_in_nginx_is_printed() -> None:
    out = io.StringIO()
    timeline = Timeline(clock=ManualClock(START), out=out)
    for flagged, ready in (("b2", "a1"), ("a1", "b2")):  # same counts, same slots
        timeline.emit(
            "loop",
            pool="inference",
            mode="Manage",
            ready=1,
            desired=3,
            wired=["a1", "b2"],
            members={flagged: "Flagged", ready: "Ready"},
            costPerHour=1.0,
        )
    first, second = out.getvalue().splitlines()
    assert "a1 b2 (Flagged)" in first
    assert "a1 (Flagged) b2" in second


def test_the_final_table_explains_ready_serving_planned_and_since() -> None:
    table = member_table("inference", {"mode": "DryRun", "planned": 2}, start=START)
    legend = " ".join(line.strip() for line in table.splitlines()[2:8])
    assert "READY: the Ready condition" in legend
    assert "SERVING: members in phase Ready" in legend
    assert "a Flagged pod still in nginx also serves until its replacement does" in legend
    assert "PLANNED: the actions DryRun would take (status.plannedActions)" in legend
    assert "SINCE: when the member entered its phase" in legend


def test_a_condition_is_only_said_cleared_once_it_was_raised() -> None:
    out = io.StringIO()
    timeline = Timeline(clock=ManualClock(START), out=out)
    for kind, status, reason in (
        ("DeletionBlocked", "False", "TerminatingPods"),  # a deletion under way
        ("DeletionBlocked", "True", "TerminateFailed"),
        ("DeletionBlocked", "False", "TerminatingPods"),
        ("Ready", "False", "Deleting"),
        ("Ready", "True", "PodsReady"),
    ):
        timeline.emit(
            "condition", pool="inference", type=kind, status=status, reason=reason, message="m"
        )
        # A loop's news between them, so no line is folded as a repeat of an earlier one.
        timeline.emit(
            "transition", pool="inference", pod="a1", reason="r", **{"from": "A", "to": "B"}
        )
    lines = out.getvalue().splitlines()
    said = [line.split("  ", 2)[2] for line in lines if "a1" not in line]
    assert said == [
        "DeletionBlocked is False (TerminatingPods): m",
        "DeletionBlocked raised (TerminateFailed): m",
        "DeletionBlocked cleared (TerminatingPods): m",
        "Ready is False (Deleting): m",
        "Ready is True (PodsReady): m",
    ]


def test_reconciling_and_stalled_flips_print_no_line_the_json_keeps_them() -> None:
    """They restate Ready and the other conditions for GitOps tools: the demo's reader
    already has that story, so the text stays as quiet as before they existed."""
    out, records = io.StringIO(), io.StringIO()
    text = Timeline(clock=ManualClock(START), out=out)
    as_json = Timeline(clock=ManualClock(START), out=records, as_json=True)
    for timeline in (text, as_json):
        for kind, status, reason in (
            ("Reconciling", "True", "PodsNotReady"),
            ("Stalled", "True", "CapacityUnavailable"),
            ("Ready", "False", "PodsNotReady"),
        ):
            timeline.emit(
                "condition", pool="inference", type=kind, status=status, reason=reason, message="m"
            )
    assert [line.split("  ", 2)[2] for line in out.getvalue().splitlines()] == [
        "Ready is False (PodsNotReady): m"
    ]
    assert len(records.getvalue().splitlines()) == 3
