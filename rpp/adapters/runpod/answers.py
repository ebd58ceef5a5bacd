"""Every RunPod answer, classified: the typed outcome of one call and its exception.

The client never lets a bare `httpx` exception or status code escape. Each call ends in
exactly one `CallOutcome`, which labels the API-call metric and, for failures, picks the
`RunPodError` subclass the caller catches. The classification is pure (status, body,
headers in; outcome out) so it is tested as a table, and the placement loop and the
executor decide on outcomes, never on message text.

RunPod has one ambiguity the spec admits: a 400 on create means either "this request
breaks a rule" or "no capacity for this GPU type and datacenter", and only the human
`detail` tells them apart. `NoCapacity` is therefore a 400 whose detail speaks of
instances or capacity; every other 400 is `Rejected`. RunPod's `detail` is kept on
every error so the pool can show the user RunPod's own words, cut to DETAIL_SHOWN
characters with its size given (a 5 MB detail once became eleven 5 MB log lines).

SECRETS: nothing in here ever sees the API key. Error texts are built from the
operation, the status and RunPod's body; the client scrubs the key from that body
before it gets here, in case a proxy ever echoes the request back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from rpp.model.documents import clip

DETAIL_SHOWN = 500  # characters of RunPod's detail kept in an error text
ERRORS_SHOWN = 5  # entries of RunPod's `errors` list kept, each cut to 200 characters


class CallOutcome(StrEnum):
    """How one call to RunPod ended; the `outcome` label of the API-call metric."""

    OK = "ok"
    NO_CAPACITY = "no_capacity"  # 400 whose detail speaks of instances/capacity
    REJECTED = "rejected"  # 422, or any other 400: a request we must fix
    INSUFFICIENT_BALANCE = "insufficient_balance"  # 402: stop all creates
    UNAUTHORIZED = "unauthorized"  # 401: the key is bad
    FORBIDDEN = "forbidden"  # 403: key scope (Read Only in Manage), WAF, pool access
    NOT_FOUND = "not_found"  # 404
    CONFLICT = "conflict"  # 409: action not valid now, or a cluster pod
    RATE_LIMITED = "rate_limited"  # 429
    SERVER_ERROR = "server_error"  # 5xx
    TIMEOUT = "timeout"  # the request may have been processed; no answer in time
    CONNECTION_ERROR = "connection_error"  # could not talk to RunPod at all
    BAD_RESPONSE = "bad_response"  # an answer that breaks the contract (bad JSON...)
    UNKNOWN = "unknown"  # a create that may or may not have made a pod


# RunPod's capacity wording, e.g. "There are no longer any instances available with
# the requested specifications." Matched loosely so a reworded message still reads as
# capacity: a misread capacity error would make the pool stop trying other candidates.
_NO_CAPACITY = re.compile(
    r"no longer any instances|no (?:available )?instances?|instances? (?:are )?not available"
    r"|not enough (?:free )?(?:gpus?|capacity|machines?)|capacity|out of stock"
    r"|no (?:gpus?|machines?) (?:are )?available",
    re.IGNORECASE,
)


def classify_status(status: int, detail: str = "") -> CallOutcome:
    """The outcome of an HTTP answer, from its status and RunPod's `detail`."""
    if 200 <= status < 300:
        return CallOutcome.OK
    if status == 400:
        return CallOutcome.NO_CAPACITY if _NO_CAPACITY.search(detail) else CallOutcome.REJECTED
    if status == 422:
        return CallOutcome.REJECTED
    fixed = {
        401: CallOutcome.UNAUTHORIZED,
        402: CallOutcome.INSUFFICIENT_BALANCE,
        403: CallOutcome.FORBIDDEN,
        404: CallOutcome.NOT_FOUND,
        409: CallOutcome.CONFLICT,
        429: CallOutcome.RATE_LIMITED,
    }
    if status in fixed:
        return fixed[status]
    if status >= 500:
        return CallOutcome.SERVER_ERROR
    # Any other 4xx (405, 413, ...) is a request the client must fix.
    return CallOutcome.REJECTED


class Problem:
    """RunPod's RFC 9457 problem body, or what we could read of a non-JSON error."""

    __slots__ = ("detail", "errors", "title")

    def __init__(self, *, title: str, detail: str, errors: tuple[str, ...] = ()) -> None:
        self.title = title
        self.detail = detail
        self.errors = errors

    @classmethod
    def parse(cls, status: int, body: bytes) -> Problem:
        """Read `{title, status, detail, errors?}`; a CDN's HTML page becomes its first line.

        Every text is cut short with its size given, whatever its type in the body.
        """
        try:
            data = json.loads(body) if body else None
        except (ValueError, RecursionError):
            data = None
        if isinstance(data, Mapping):
            errors = data.get("errors")
            listed = errors if isinstance(errors, list) else []
            shown = tuple(clip(_text(e), 200) for e in listed[:ERRORS_SHOWN])
            if len(listed) > ERRORS_SHOWN:
                shown += (f"and {len(listed) - ERRORS_SHOWN} more",)
            return cls(
                title=clip(_text(data.get("title")), 200) or f"HTTP {status}",
                detail=clip(_text(data.get("detail")), DETAIL_SHOWN),
                errors=shown,
            )
        text = body[:4096].decode("utf-8", "replace").strip().splitlines()
        first = clip(text[0], 200) if text else ""
        return cls(title=f"HTTP {status}", detail=first)


def _text(value: Any) -> str:
    """A problem field as text: a string as it is, anything else described, never dumped."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping | list):
        return f"({type(value).__name__} of {len(value)})"
    return clip(repr(value), 60)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a `Retry-After` header (RunPod sends integer seconds)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None  # an HTTP-date: RunPod does not send one; fall back to backoff
    return max(seconds, 0.0)


def parse_rate_limit(value: str | None) -> dict[str, tuple[int, float]]:
    """Windows of a `RateLimit` header: name -> (remaining requests, seconds to reset).

    The header is a structured-field list, one member per window with parameters `r`
    (remaining) and `t` (seconds until reset): `"minute";r=0;t=12, "hour";r=900;t=1800`.
    Members without both parameters are ignored rather than guessed at.
    """
    windows: dict[str, tuple[int, float]] = {}
    if not value:
        return windows
    for member in value.split(","):
        name, *params = (part.strip() for part in member.split(";"))
        values: dict[str, str] = {}
        for param in params:
            key, _, raw = param.partition("=")
            values[key.strip()] = raw.strip().strip('"')
        try:
            remaining, reset = int(values["r"]), float(values["t"])
        except (KeyError, ValueError):
            continue
        windows[name.strip('"') or "window"] = (remaining, max(reset, 0.0))
    return windows


class RunPodError(Exception):
    """A RunPod call that did not succeed. `detail` is RunPod's own text, verbatim."""

    outcome: CallOutcome = CallOutcome.BAD_RESPONSE

    def __init__(
        self,
        *,
        operation: str,
        status: int | None = None,
        detail: str = "",
        errors: tuple[str, ...] = (),
        retry_after: float | None = None,
        message: str | None = None,
    ) -> None:
        self.operation = operation
        self.status = status
        self.detail = detail
        self.errors = errors
        self.retry_after = retry_after
        super().__init__(message or self._default_message())

    def _default_message(self) -> str:
        status = f" ({self.status})" if self.status is not None else ""
        text = f"RunPod {self.operation}: {self.outcome.value}{status}"
        if self.detail:
            text += f": {self.detail}"
        if self.errors:
            text += " [" + "; ".join(self.errors) + "]"
        return text


class NoCapacity(RunPodError):
    outcome = CallOutcome.NO_CAPACITY


class Rejected(RunPodError):
    outcome = CallOutcome.REJECTED


class InsufficientBalance(RunPodError):
    outcome = CallOutcome.INSUFFICIENT_BALANCE

    def _default_message(self) -> str:
        return (
            f"RunPod {self.operation}: insufficient balance (402): {self.detail}. "
            "No create can succeed until the account is topped up."
        )


class Unauthorized(RunPodError):
    outcome = CallOutcome.UNAUTHORIZED

    def _default_message(self) -> str:
        return (
            f"RunPod {self.operation}: the API key was refused (401): {self.detail}. "
            "Check the key the controller was given."
        )


class Forbidden(RunPodError):
    outcome = CallOutcome.FORBIDDEN

    def _default_message(self) -> str:
        # A 403 is not a revoked key: it can come from RunPod's CDN/WAF or a scoped key.
        return (
            f"RunPod refused {self.operation} (403): {self.detail}. A Read Only key in "
            "Manage mode is the common cause: creating, updating and terminating pods "
            "need an All key."
        )


class NotFound(RunPodError):
    outcome = CallOutcome.NOT_FOUND


class Conflict(RunPodError):
    outcome = CallOutcome.CONFLICT


class RateLimited(RunPodError):
    outcome = CallOutcome.RATE_LIMITED

    def _default_message(self) -> str:
        wait = f"; retry after {self.retry_after:g}s" if self.retry_after is not None else ""
        return f"RunPod {self.operation}: rate limited (429){wait}: {self.detail}".rstrip(": ")


class ServerError(RunPodError):
    outcome = CallOutcome.SERVER_ERROR


class Timeout(RunPodError):
    outcome = CallOutcome.TIMEOUT


class ConnectionFailed(RunPodError):
    """RunPod could not be reached. `sent` says whether the request may have left."""

    outcome = CallOutcome.CONNECTION_ERROR

    def __init__(self, *, operation: str, detail: str, sent: bool) -> None:
        self.sent = sent
        super().__init__(operation=operation, detail=detail)


class BadResponse(RunPodError):
    outcome = CallOutcome.BAD_RESPONSE


class Unknown(RunPodError):
    """A create whose fate is unknown (timeout, 5xx, dropped connection, bad 201 body).

    RunPod may have made the pod and be billing for it, so the create is never
    retried: the pod's name is unique, and the next list finds and adopts it.
    `cause` is how the attempt actually ended.
    """

    outcome = CallOutcome.UNKNOWN

    def __init__(self, *, operation: str, cause: RunPodError) -> None:
        self.cause = cause
        super().__init__(
            operation=operation,
            status=cause.status,
            detail=cause.detail,
            message=(
                f"RunPod {operation}: outcome unknown after {cause.outcome.value}; the pod "
                f"may exist and is looked up by name on the next list ({cause})"
            ),
        )


_ERROR_TYPES: dict[CallOutcome, type[RunPodError]] = {
    cls.outcome: cls
    for cls in (
        NoCapacity,
        Rejected,
        InsufficientBalance,
        Unauthorized,
        Forbidden,
        NotFound,
        Conflict,
        RateLimited,
        ServerError,
        Timeout,
        BadResponse,
    )
}


def error_for_response(
    *,
    operation: str,
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    note: str | None = None,
) -> RunPodError:
    """The typed error for a non-2xx answer, with RunPod's title and detail kept (cut
    short). `note` stands in for a body the client did not read (too large)."""
    problem = Problem.parse(status, body)
    if note is not None:
        problem.detail = note
    outcome = classify_status(status, problem.detail)
    retry_after = parse_retry_after(headers.get("retry-after")) if status == 429 else None
    return _ERROR_TYPES[outcome](
        operation=operation,
        status=status,
        detail=problem.detail or problem.title,
        errors=problem.errors,
        retry_after=retry_after,
    )
