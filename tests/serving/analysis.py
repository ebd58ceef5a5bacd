"""What a serving run's clients saw, judged against the targets.

Each failed request is put in one class, from the fake pods' work log (which pod started
work for which request id, and when) and the scenario's faults (which pod broke when):

- `in_flight`: its work was on the failing pod when the pod failed. Nothing can save it:
  the pod had it, and a stream's headers were out. Allowed.
- `unknowable`: its work started on the failing pod after the pod failed, but sooner
  than the failure could show: a hung pod gives no sign until RunPod's CDN gives up
  (the scaled 100 s), and a pod that fails N s into each request none for N s (a
  stream's headers are out by then). Allowed, and counted apart so it is seen.
- `unexpected`: everything else. The targets say there are none.

Work started twice (`duplicated`): a request id whose work began on two pods (or twice on
one). Allowed only when the first attempt failed within nginx's retry window (2 s):
nginx resends a request only then. `duplicated_late` counts the others; the targets say
there are none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.serving.load import Record

KINDS = ("post", "get", "stream", "long")
RETRY_WINDOW_S = 2.0  # examples/nginx.yaml: proxy_next_upstream_timeout
SLACK_S = 0.05  # clocks of two processes on one machine, and the log's rounding


@dataclass(frozen=True)
class Fault:
    """A pod broke at `at` (epoch seconds); a request fails `delay_s` after it reaches it."""

    pod: str
    at: float
    delay_s: float = 0.0


def classify(
    record: Record, *, works: Sequence[Mapping[str, Any]], faults: Mapping[str, Fault]
) -> str:
    for work in works:
        fault = faults.get(str(work["pod_id"]))
        if fault is None:
            continue
        started = float(work["started"])
        ended = work["ended"]
        end = float(ended) if ended is not None else float("inf")
        if started <= fault.at + SLACK_S and end >= fault.at - SLACK_S:
            return "in_flight"
        if fault.at < started <= fault.at + fault.delay_s + SLACK_S:
            return "unknowable"
    return "unexpected"


def summarize(
    records: Iterable[Record], work: Iterable[Mapping[str, Any]], faults: Iterable[Fault]
) -> dict[str, Any]:
    """Failed/total and the failure classes per kind, and work started twice."""
    by_rid: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for item in work:
        if item.get("request_id"):
            by_rid[str(item["request_id"])].append(item)
    broken = {f.pod: f for f in faults}
    kinds: dict[str, dict[str, Any]] = {}
    duplicated = late = 0
    longest_first = 0.0
    examples: list[str] = []
    for kind in KINDS:
        mine = [r for r in records if r.kind == kind]
        counts: dict[str, Any] = {"total": len(mine), "failed": 0, "duplicated": 0}
        for cls in ("in_flight", "unknowable", "unexpected"):
            counts[cls] = 0
        for record in mine:
            works = sorted(by_rid.get(record.rid, []), key=lambda w: float(w["started"]))
            if len(works) > 1:
                counts["duplicated"] += 1
                first = works[0]
                ran = float(first["ended"] or works[1]["started"]) - float(first["started"])
                longest_first = max(longest_first, ran)
                duplicated += 1
                late += ran > RETRY_WINDOW_S + SLACK_S
            if record.ok:
                continue
            counts["failed"] += 1
            cls = classify(record, works=works, faults=broken)
            counts[cls] += 1
            if cls == "unexpected" and len(examples) < 5:
                examples.append(f"{record.rid}: {record.error} (pod {record.pod})")
        kinds[kind] = counts
    return {
        "kinds": kinds,
        "unexpected": sum(k["unexpected"] for k in kinds.values()),
        "duplicated": duplicated,
        "duplicated_late": late,
        "longest_first_attempt_s": round(longest_first, 3),
        "unexpected_examples": examples,
    }


def cell(counts: Mapping[str, Any]) -> str:
    """`failed/total`, with the allowed classes named: `3/1200 (3 in flight)`."""
    text = f"{counts['failed']}/{counts['total']}"
    named = [
        f"{counts[cls]} {label}"
        for cls, label in (
            ("in_flight", "in flight"),
            ("unknowable", "before the failure could show"),
            ("unexpected", "UNEXPECTED"),
        )
        if counts[cls]
    ]
    return f"{text} ({', '.join(named)})" if named else text


def way_out(result: Mapping[str, Any]) -> str:
    """How each failing pod left nginx: `2.3 s, quarantined (HTTP 502)`; `-` when none."""
    texts = []
    for out in result.get("failing_pods_out", []):
        if out.get("unwired_after_s") is not None:
            how = (
                f"quarantined ({out['quarantine']})"
                if out.get("quarantine")
                else f"flagged {out.get('flagged')}"
            )
            texts.append(f"{out['unwired_after_s']:g} s, {how}")
        elif out.get("gone_after_s") is not None:
            texts.append(f"{out['gone_after_s']:g} s, gone")
        else:
            texts.append("still wired")
    return "; ".join(texts) or "-"


def table(results: Sequence[Mapping[str, Any]]) -> str:
    """The markdown table bench_serving.py prints, one row per scenario."""
    head = (
        "| scenario | POST | GET | stream 20 s | stream > 30 s | work started twice "
        "| failing pod out of nginx after |"
    )
    lines = [head, "|" + "---|" * 7]
    for result in results:
        kinds = result["summary"]["kinds"]
        dup = result["summary"]["duplicated"]
        late = result["summary"]["duplicated_late"]
        twice = f"{dup}" + (f" ({late} past the retry window)" if late else "")
        lines.append(
            f"| {result['scenario']} | {cell(kinds['post'])} | {cell(kinds['get'])} | "
            f"{cell(kinds['stream'])} | {cell(kinds['long'])} | {twice} | {way_out(result)} |"
        )
    return "\n".join(lines)
