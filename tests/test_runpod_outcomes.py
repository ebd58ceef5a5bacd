"""Outcome classification is a pure table: status + RunPod's detail -> Outcome.

Covered: every status family, the 400 capacity-vs-rule split on RunPod's wording,
problem+json and non-JSON error bodies, Retry-After and RateLimit header parsing, and
the error texts the pool shows users (operation named, RunPod's detail verbatim).
"""

from __future__ import annotations

import json

import pytest

from rpp.adapters.runpod import answers as oc
from rpp.sim.faults import NO_CAPACITY_DETAIL

statuses = pytest.mark.parametrize(
    ("status", "detail", "outcome"),
    [
        (200, "", oc.Outcome.OK),
        (201, "", oc.Outcome.OK),
        (204, "", oc.Outcome.OK),
        (400, NO_CAPACITY_DETAIL, oc.Outcome.NO_CAPACITY),
        (400, "Not enough free GPUs on any machine", oc.Outcome.NO_CAPACITY),
        (400, "No instances available in EU-RO-1", oc.Outcome.NO_CAPACITY),
        (400, "Insufficient capacity for this GPU type", oc.Outcome.NO_CAPACITY),
        (400, "Exactly one of gpu or cpu must be set.", oc.Outcome.REJECTED),
        (400, "Invalid GPU type id: NVIDIA RTX 9999.", oc.Outcome.REJECTED),
        (401, "Invalid or missing API key.", oc.Outcome.UNAUTHORIZED),
        (402, "Insufficient balance.", oc.Outcome.INSUFFICIENT_BALANCE),
        (403, "Forbidden", oc.Outcome.FORBIDDEN),
        (404, "Pod x not found.", oc.Outcome.NOT_FOUND),
        (405, "", oc.Outcome.REJECTED),
        (409, "cluster pod", oc.Outcome.CONFLICT),
        (422, "The request body failed validation.", oc.Outcome.REJECTED),
        (429, "", oc.Outcome.RATE_LIMITED),
        (500, "", oc.Outcome.SERVER_ERROR),
        (502, "", oc.Outcome.SERVER_ERROR),
        (503, NO_CAPACITY_DETAIL, oc.Outcome.SERVER_ERROR),
        (524, "", oc.Outcome.SERVER_ERROR),
    ],
)


@statuses
def test_status_and_detail_classify_to_one_outcome(
    status: int, detail: str, outcome: oc.Outcome
) -> None:
    assert oc.classify_status(status, detail) is outcome


@statuses
def test_error_for_response_raises_the_matching_typed_error(
    status: int, detail: str, outcome: oc.Outcome
) -> None:
    if outcome is oc.Outcome.OK:
        return
    body = json.dumps({"title": "T", "status": status, "detail": detail or "d"}).encode()
    error = oc.error_for_response(operation="createPod", status=status, body=body, headers={})
    assert error.outcome is outcome
    assert error.status == status
    assert error.detail == (detail or "d")  # RunPod's words, verbatim


def test_problem_body_keeps_runpods_validation_errors_in_order() -> None:
    body = json.dumps(
        {"title": "Unprocessable", "status": 422, "detail": "bad", "errors": ["a", "b"]}
    ).encode()
    error = oc.error_for_response(operation="createPod", status=422, body=body, headers={})
    assert isinstance(error, oc.Rejected)
    assert error.errors == ("a", "b")
    assert "[a; b]" in str(error)


def test_cdn_html_error_page_becomes_a_short_detail_not_a_parse_failure() -> None:
    body = b"<html><head><title>403 Forbidden</title></head>\n<body>cloudflare</body></html>"
    error = oc.error_for_response(operation="listPods", status=403, body=body, headers={})
    assert isinstance(error, oc.Forbidden)
    assert error.detail.startswith("<html><head><title>403 Forbidden")
    assert "cloudflare" not in error.detail  # only the first line


def test_forbidden_message_names_the_operation_and_the_read_only_key_cause() -> None:
    body = json.dumps({"title": "Forbidden", "status": 403, "detail": "no"}).encode()
    error = oc.error_for_response(operation="deletePod", status=403, body=body, headers={})
    assert "deletePod" in str(error)
    assert "Read Only key" in str(error)


def test_429_carries_retry_after_seconds() -> None:
    body = json.dumps({"title": "Too Many", "status": 429, "detail": "slow down"}).encode()
    error = oc.error_for_response(
        operation="listPods", status=429, body=body, headers={"retry-after": "7"}
    )
    assert isinstance(error, oc.RateLimited)
    assert error.retry_after == 7.0
    assert "retry after 7s" in str(error)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("5", 5.0), (" 2 ", 2.0), ("0", 0.0), ("-3", 0.0), (None, None), ("Wed, 21 Oct", None)],
)
def test_retry_after_header_reads_seconds_or_nothing(header: str | None, seconds: float | None):
    assert oc.parse_retry_after(header) == seconds


def test_ratelimit_header_reads_every_window_and_ignores_broken_members() -> None:
    header = '"minute";r=0;t=12, "hour";r=900;t=1800, "day";r=oops;t=1, junk'
    assert oc.parse_rate_limit(header) == {"minute": (0, 12.0), "hour": (900, 1800.0)}
    assert oc.parse_rate_limit(None) == {}


def test_unknown_create_explains_that_the_pod_may_exist() -> None:
    cause = oc.ServerError(operation="createPod", status=500, detail="Internal server error")
    error = oc.Unknown(operation="createPod", cause=cause)
    assert error.outcome is oc.Outcome.UNKNOWN
    assert error.cause is cause
    assert "may exist" in str(error)
    assert "server_error" in str(error)
