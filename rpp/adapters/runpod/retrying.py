"""The client's retry policy: what is worth another attempt, and how long to wait.

Kept apart from the HTTP code so the rules read in one place. tenacity runs the loop;
these are its stop, wait and retry predicates:

- idempotent calls (reads, PATCH with the full image+env, DELETE) retry on 429, 5xx,
  timeouts and connection errors;
- a create retries only when RunPod certainly did not act: a 429, or a connection that
  never opened. After a 5xx, a timeout or a dropped connection it may have made the
  pod, so the client reports `Unknown` instead (see `may_have_acted`);
- waits are jittered exponential, never shorter than a 429's Retry-After, and the loop
  stops rather than wait past the call's total deadline. The deadline runs on the event
  loop's clock, so the simulator's virtual time drives it like real time.
"""

from __future__ import annotations

import asyncio

from tenacity import RetryCallState
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from rpp.adapters.runpod import answers


class StopAtDeadline(stop_base):
    """Stop when the next wait would end past the deadline (loop time)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, retry_state: RetryCallState) -> bool:
        now = asyncio.get_running_loop().time()
        return now + (retry_state.upcoming_sleep or 0.0) >= self.deadline


class BackoffHonouringRetryAfter(wait_base):
    """Jittered exponential backoff, but never shorter than a 429's Retry-After."""

    def __init__(self, inner: wait_base) -> None:
        self.inner = inner

    def __call__(self, retry_state: RetryCallState) -> float:
        wait = self.inner(retry_state)
        error = retry_state.outcome.exception() if retry_state.outcome else None
        if isinstance(error, answers.RateLimited) and error.retry_after is not None:
            wait = max(wait, error.retry_after)
        return wait


def is_transient(error: BaseException) -> bool:
    """Worth another attempt of an idempotent call."""
    return isinstance(
        error,
        answers.RateLimited | answers.ServerError | answers.Timeout | answers.ConnectionFailed,
    )


def is_safe_to_resend(error: BaseException) -> bool:
    """Worth another attempt of a create: RunPod certainly did not act on the last one."""
    return isinstance(error, answers.RateLimited) or (
        isinstance(error, answers.ConnectionFailed) and not error.sent
    )


def may_have_acted(error: answers.RunPodError) -> bool:
    """After this failure, may RunPod have carried the write out anyway?"""
    if isinstance(error, answers.ConnectionFailed):
        return error.sent
    # A 2xx whose body is unreadable did act; 5xx and timeouts may have.
    return isinstance(error, answers.ServerError | answers.Timeout | answers.BadResponse)
