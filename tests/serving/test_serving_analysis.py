"""How tests/serving/analysis.py judges a serving run: the verdict test_serving relies on.

Pure: hand-made client records, fake pods' work entries and faults, no rig. Each failed
request lands in one class (in flight on the failing pod, started before the failure
could show, unexpected); work started twice is allowed only when the first attempt
failed within nginx's 2 s retry window.
"""

from __future__ import annotations

from typing import Any

from tests.serving.analysis import RETRY_WINDOW_S, Fault, classify, summarize
from tests.serving.load import Record

T = 1_700_000_000.0  # the moment the pod "bad" breaks (epoch seconds)
HUNG = Fault(pod="bad", at=T, delay_s=1.5)  # a request fails 1.5 s after reaching it


def work(rid: str, *, pod: str, started: float, ended: float | None) -> dict[str, Any]:
    """One entry of a fake pod's work log, as the rig reads it."""
    return {"request_id": rid, "pod_id": pod, "started": started, "ended": ended}


def failed(rid: str, kind: str = "post") -> Record:
    return Record(rid=rid, kind=kind, sent=T - 1, ended=T + 1, status=502, error="HTTP 502")


def test_work_on_the_failing_pod_when_it_failed_is_in_flight() -> None:
    works = [work("r", pod="bad", started=T - 0.5, ended=T + 0.1)]
    assert classify(failed("r"), works=works, faults={"bad": HUNG}) == "in_flight"


def test_work_still_open_on_the_failing_pod_is_in_flight() -> None:
    works = [work("r", pod="bad", started=T - 3, ended=None)]
    assert classify(failed("r"), works=works, faults={"bad": HUNG}) == "in_flight"


def test_work_started_before_the_failure_could_show_is_unknowable() -> None:
    works = [work("r", pod="bad", started=T + 1.0, ended=T + 2.5)]
    assert classify(failed("r"), works=works, faults={"bad": HUNG}) == "unknowable"


def test_work_started_after_the_failure_could_show_is_unexpected() -> None:
    works = [work("r", pod="bad", started=T + 1.5 + 0.5, ended=T + 3.5)]
    assert classify(failed("r"), works=works, faults={"bad": HUNG}) == "unexpected"


def test_a_failure_on_a_healthy_pod_is_unexpected() -> None:
    works = [work("r", pod="good", started=T - 0.5, ended=T + 0.1)]
    assert classify(failed("r"), works=works, faults={"bad": HUNG}) == "unexpected"


def test_a_failed_request_no_pod_saw_is_unexpected() -> None:
    assert classify(failed("r"), works=[], faults={"bad": HUNG}) == "unexpected"


def test_summary_counts_each_class_per_kind_and_names_the_unexpected() -> None:
    records = [
        failed("in-flight"),
        failed("unknowable"),
        failed("unexpected"),
        Record(rid="fine", kind="post", sent=T, ended=T + 0.2, status=200, ok=True),
        Record(rid="stream", kind="stream", sent=T, ended=T + 20, status=200, ok=True),
    ]
    log = [
        work("in-flight", pod="bad", started=T - 0.2, ended=T + 0.1),
        work("unknowable", pod="bad", started=T + 0.5, ended=T + 2.0),
        work("unexpected", pod="good", started=T, ended=T + 0.1),
        work("fine", pod="good", started=T, ended=T + 0.2),
        work("stream", pod="good", started=T, ended=T + 20),
        {"request_id": None, "pod_id": "good", "started": T, "ended": T},  # a health probe
    ]
    summary = summarize(records, log, [HUNG])
    assert summary["kinds"]["post"] == {
        "total": 4,
        "failed": 3,
        "duplicated": 0,
        "in_flight": 1,
        "unknowable": 1,
        "unexpected": 1,
    }
    assert summary["kinds"]["stream"]["total"] == 1
    assert summary["kinds"]["stream"]["failed"] == 0
    assert summary["kinds"]["get"]["total"] == 0
    assert summary["unexpected"] == 1
    assert summary["unexpected_examples"] == ["unexpected: HTTP 502 (pod None)"]
    assert summary["duplicated"] == summary["duplicated_late"] == 0


def test_work_resent_within_the_retry_window_is_duplicated_but_not_late() -> None:
    ok = Record(rid="r", kind="post", sent=T, ended=T + 2, status=200, ok=True, pod="good")
    log = [
        work("r", pod="bad", started=T - 0.5, ended=T + 1.0),  # failed 1.5 s in
        work("r", pod="good", started=T + 1.0, ended=T + 1.2),  # nginx's retry
    ]
    summary = summarize([ok], log, [HUNG])
    assert summary["duplicated"] == 1
    assert summary["kinds"]["post"]["duplicated"] == 1
    assert summary["duplicated_late"] == 0
    assert summary["longest_first_attempt_s"] == 1.5
    assert summary["kinds"]["post"]["failed"] == 0


def test_work_started_again_after_the_retry_window_is_late() -> None:
    ok = Record(rid="r", kind="post", sent=T, ended=T + 4, status=200, ok=True, pod="good")
    first_ran = RETRY_WINDOW_S + 1.0
    log = [
        work("r", pod="bad", started=T - 0.5, ended=T - 0.5 + first_ran),
        work("r", pod="good", started=T + first_ran, ended=T + first_ran + 0.2),
    ]
    summary = summarize([ok], log, [HUNG])
    assert summary["duplicated"] == 1
    assert summary["duplicated_late"] == 1
    assert summary["longest_first_attempt_s"] == first_ran


def test_an_open_first_attempt_runs_until_the_second_starts() -> None:
    ok = Record(rid="r", kind="get", sent=T, ended=T + 4, status=200, ok=True, pod="good")
    log = [
        work("r", pod="good", started=T + 3.0, ended=T + 3.1),
        work("r", pod="bad", started=T, ended=None),  # hung, never ended
    ]
    summary = summarize([ok], log, [HUNG])
    assert summary["longest_first_attempt_s"] == 3.0
    assert summary["duplicated_late"] == 1
