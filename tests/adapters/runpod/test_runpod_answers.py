"""RunPod answer classification is a pure table: status + RunPod's detail -> CallOutcome.

Covered: every status family, the 400 capacity-vs-rule split on RunPod's wording,
problem+json and non-JSON error bodies, Retry-After and RateLimit header parsing, and
the error texts the pool shows users (operation named, RunPod's detail verbatim).
"""

from __future__ import annotations

import json

import pytest

from rpp.adapters.runpod import answers
from rpp.sim.faults import NO_CAPACITY_DETAIL

statuses = pytest.mark.parametrize(
    ("status", "detail", "outcome"),
    [
        (200, "", answers.CallOutcome.OK),
        (201, "", answers.CallOutcome.OK),
        (204, "", answers.CallOutcome.OK),
        (400, NO_CAPACITY_DETAIL, answers.CallOutcome.NO_CAPACITY),
        (400, "Not enough free GPUs on any machine", answers.CallOutcome.NO_CAPACITY),
        (400, "No instances available in EU-RO-1", answers.CallOutcome.NO_CAPACITY),
        (400, "Insufficient capacity for this GPU type", answers.CallOutcome.NO_CAPACITY),
        (400, "Exactly one of gpu or cpu must be set.", answers.CallOutcome.REJECTED),
        (400, "Invalid GPU type id: NVIDIA RTX 9999.", answers.CallOutcome.REJECTED),
        (401, "Invalid or missing API key.", answers.CallOutcome.UNAUTHORIZED),
        (402, "Insufficient balance.", answers.CallOutcome.INSUFFICIENT_BALANCE),
        (403, "Forbidden", answers.CallOutcome.FORBIDDEN),
        (404, "Pod x not found.", answers.CallOutcome.NOT_FOUND),
        (405, "", answers.CallOutcome.REJECTED),
        (409, "cluster pod", answers.CallOutcome.CONFLICT),
        (422, "The request body failed validation.", answers.CallOutcome.REJECTED),
        (429, "", answers.CallOutcome.RATE_LIMITED),
        (500, "", answers.CallOutcome.SERVER_ERROR),
        (502, "", answers.CallOutcome.SERVER_ERROR),
        (503, NO_CAPACITY_DETAIL, answers.CallOutcome.SERVER_ERROR),
        (524, "", answers.CallOutcome.SERVER_ERROR),
    ],
)


@statuses
def test_status_and_detail_classify_to_one_outcome(
    status: int, detail: str, outcome: answers.CallOutcome
) -> None:
    assert answers.classify_status(status, detail) is outcome


@statuses
def test_error_for_response_raises_the_matching_typed_error(
    status: int, detail: str, outcome: answers.CallOutcome
) -> None:
    if outcome is answers.CallOutcome.OK:
        return
    body = json.dumps({"title": "T", "status": status, "detail": detail or "d"}).encode()
    error = answers.error_for_response(operation="createPod", status=status, body=body, headers={})
    assert error.outcome is outcome
    assert error.status == status
    assert error.detail == (detail or "d")  # RunPod's words, verbatim


def test_problem_body_keeps_runpods_validation_errors_in_order() -> None:
    body = json.dumps(
        {"title": "Unprocessable", "status": 422, "detail": "bad", "errors": ["a", "b"]}
    ).encode()
    error = answers.error_for_response(operation="createPod", status=422, body=body, headers={})
    assert isinstance(error, answers.Rejected)
    assert error.errors == ("a", "b")
    assert "[a; b]" in str(error)


def test_cdn_html_error_page_becomes_a_short_detail_not_a_parse_failure() -> None:
    body = b"<html><head><title>403 Forbidden</title></head>\n<body>cloudflare</body></html>"
    error = answers.error_for_response(operation="listPods", status=403, body=body, headers={})
    assert isinstance(error, answers.Forbidden)
    assert error.detail.startswith("<html><head><title>403 Forbidden")
    assert "cloudflare" not in error.detail  # only the first line


def test_forbidden_message_names_the_operation_and_the_read_only_key_cause() -> None:
    body = json.dumps({"title": "Forbidden", "status": 403, "detail": "no"}).encode()
    error = answers.error_for_response(operation="deletePod", status=403, body=body, headers={})
    assert "deletePod" in str(error)
    assert "Read Only key" in str(error)


def test_429_carries_retry_after_seconds() -> None:
    body = json.dumps({"title": "Too Many", "status": 429, "detail": "slow down"}).encode()
    error = answers.error_for_response(
        operation="listPods", status=429, body=body, headers={"retry-after": "7"}
    )
    assert isinstance(error, answers.RateLimited)
    assert error.retry_after == 7.0
    assert "retry after 7s" in str(error)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("5", 5.0), (" 2 ", 2.0), ("0", 0.0), ("-3", 0.0), (None, None), ("Wed, 21 Oct", None)],
)
def test_retry_after_header_reads_seconds_or_nothing(
    header: str | None, seconds: float | None
) -> None:
    assert answers.parse_retry_after(header) == seconds


def test_ratelimit_header_reads_every_window_and_ignores_broken_members() -> None:
    header = '"minute";r=0;t=12, "hour";r=900;t=1800, "day";r=oops;t=1, junk'
    assert answers.parse_rate_limit(header) == {"minute": (0, 12.0), "hour": (900, 1800.0)}
    assert answers.parse_rate_limit(None) == {}


def test_unknown_create_explains_that_the_pod_may_exist() -> None:
    cause = answers.ServerError(operation="createPod", status=500, detail="Internal server error")
    error = answers.Unknown(operation="createPod", cause=cause)
    assert error.outcome is answers.CallOutcome.UNKNOWN
    assert error.cause is cause
    assert "may exist" in str(error)
    assert "server_error" in str(error)
