"""The API server's passing refusals, waited out; a refusal that lasts, said once, plainly.

Where it sits: under the Kubernetes adapter (rpp/adapters/kube/real.py sends every request,
the watches' too, through `Patience.call`), so what observe reads and act writes never sees
an answer that only meant "not now". An API server that restarts answers, for a few seconds
once it listens again:

- 403 Forbidden to everything, until its authorizer has read the RBAC rules: the very answer
  a Role without the grant gets. Only time tells them apart, so a 403 is retried, and it
  counts as a missing grant once the same verb on the same resource has been refused for
  `forbidden_grace_s` with no success in between. Then `Forbidden` says so, with the
  Role to fix, and later calls of that verb on that resource fail at once (until one
  succeeds) instead of waiting again;
- 429 "storage is (re)initializing" with a Retry-After, while its watch cache fills, and
  5xx while etcd is not reachable yet (for reads only: a write may have landed before its
  5xx, so it is not sent again): retried after the Retry-After (capped at
  `max_wait_s`) or a backoff, at most `tries` times in all, so an API server that keeps
  failing fails a call in seconds, not minutes.

The first passing refusal is logged at INFO with what it means, the first success after
it at INFO too; the retries between them at DEBUG. Any other answer (404, 409, 410, 422,
an unreachable server) goes straight to the caller. Why tenacity: the loop, its stop and
its waits are the library's; this module says only which answers pass and how long to
wait. The clock and the sleep are injected, so tests wait out a window without sleeping.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from rpp.adapters.kube.api import Forbidden, KubeError
from rpp.adapters.kube.transport import Op
from rpp.adapters.logs import layer_logger

log = layer_logger("rpp.adapters.kube")

_T = TypeVar("_T")


@dataclass(frozen=True)
class Patience:
    """How long the adapter waits out passing refusals, and on which clock."""

    forbidden_grace_s: float = 10.0
    """A 403 that lasts this long (the same verb and resource, no success between) is a
    missing RBAC grant. An API server refuses for about 3 s after it starts."""
    tries: int = 5
    """429 and 5xx answers one call takes at most (7.5 s of backoff between five). A 403
    is retried until the grace is over, within `MAX_TRIES` attempts in all."""
    first_wait_s: float = 0.5
    """The first backoff; it doubles each retry up to `max_wait_s`."""
    max_wait_s: float = 4.0
    """The longest wait between two attempts, a Retry-After included."""
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep


MAX_TRIES = 16
"""Attempts per call whatever the answers: the bound under the grace's clock."""
_READS = frozenset({"get", "list", "watch"})
"""The verbs a 5xx is retried for (`_passes`)."""
TRANSIENT = frozenset({429, 500, 502, 503, 504})
"""Answers that mean "not now": too many requests (or storage still loading), and the
server or a proxy before it failing."""


class TransientAnswers:
    """Retries one adapter's calls through passing refusals; remembers lasting 403s."""

    def __init__(self, patience: Patience | None = None) -> None:
        self.patience = patience or Patience()
        # (verb, resource) -> when its refusals began; cleared by its first success.
        self._refused_since: dict[tuple[str, str], float] = {}
        # When the first passing refusal since the last success came.
        self._troubled_since: float | None = None

    async def call(self, op: Op, attempt: Callable[[], Awaitable[_T]]) -> _T:
        """`attempt()` until it succeeds or fails for good; its answer or its error."""
        key = (op.verb, op.resource)
        patience = self.patience
        busy = 0  # 429 and 5xx answers to this call

        def passes(error: BaseException) -> bool:
            nonlocal busy
            busy += isinstance(error, KubeError) and error.status in TRANSIENT
            return self._passes(key, error)

        def stop(state: RetryCallState) -> bool:
            """Through 403s the grace decides (`_passes`); through others, `tries`."""
            return busy >= patience.tries or state.attempt_number >= MAX_TRIES

        retrying = AsyncRetrying(
            retry=retry_if_exception(passes),
            stop=stop,
            wait=self._wait,
            sleep=patience.sleep,
            before_sleep=lambda state: self._retrying(op, state),
            reraise=True,
        )
        try:
            answer: _T = await retrying(attempt)
        except Forbidden as refused:
            since = self._refused_since.setdefault(key, patience.clock())
            lasted = patience.clock() - since
            if lasted < patience.forbidden_grace_s:
                # The attempts ran out before the grace (a Patience set so): not yet a
                # missing grant, so no advice to change the Role.
                raise KubeError(
                    refused.verb,
                    refused.resource,
                    refused.name,
                    namespace=refused.namespace,
                    status=403,
                    message=f"forbidden: cannot {op} yet, refused for {lasted:.0f}s",
                ) from None
            # A grant that is missing, not a server in trouble: no "answers again" later.
            self._troubled_since = None
            raise Forbidden(
                refused.verb,
                refused.resource,
                refused.name,
                namespace=refused.namespace,
                hint=op.rbac_hint,
                refused_for_s=lasted,
            ) from None
        except KubeError as error:
            tries = int(retrying.statistics.get("attempt_number", 1))
            if error.status in TRANSIENT and tries > 1:
                error.args = (f"{error}; still so after {tries} tries",)
            elif error.status is not None and error.status not in (401, 403):
                # 404, 409...: an answer past the authenticator and the authorizer. A 401
                # is none (a deleted ServiceAccount's token), so no "answers again".
                self._answered(key)
            raise
        self._answered(key)
        return answer

    def _answered(self, key: tuple[str, str]) -> None:
        """The server answered `key`'s call: its refusals are over, and the server's."""
        self._refused_since.pop(key, None)
        if self._troubled_since is not None:
            log.info(
                "the Kubernetes API server answers again, %.1fs after it first refused",
                self.patience.clock() - self._troubled_since,
            )
            self._troubled_since = None

    def _passes(self, key: tuple[str, str], error: BaseException) -> bool:
        """Whether `error` is a refusal worth another attempt."""
        if not isinstance(error, KubeError):
            return False
        if error.status in TRANSIENT:
            # A 5xx may come after a write was applied (a proxy's timeout, a lost answer):
            # sent again, a landed status write would meet a 409 and be taken for lost, an
            # Event's count patched twice. So a write is retried only on a 429, which the
            # server answers before it does anything.
            return error.status == 429 or key[0] in _READS
        if error.status != 403:
            return False
        since = self._refused_since.setdefault(key, self.patience.clock())
        return self.patience.clock() - since < self.patience.forbidden_grace_s

    def _wait(self, state: RetryCallState) -> float:
        """The Retry-After the server asked for, else a doubling backoff; capped."""
        error = state.outcome.exception() if state.outcome else None
        asked = error.retry_after if isinstance(error, KubeError) else None
        backoff = self.patience.first_wait_s * 2 ** (state.attempt_number - 1)
        return min(asked if asked is not None else backoff, self.patience.max_wait_s)

    def _retrying(self, op: Op, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        if not isinstance(error, KubeError):
            return
        wait = self._wait(state)
        if self._troubled_since is not None:
            log.debug("%s: %s; retrying in %.1fs", op, _said(error), wait)
            return
        self._troubled_since = self.patience.clock()
        if error.status == 403:
            log.info(
                "%s: the API server refused (403); retrying for up to %gs, as an API server "
                "refuses everything for a few seconds after it starts",
                op,
                self.patience.forbidden_grace_s,
            )
        else:
            asked = ", as it asked" if error.retry_after is not None else ""
            log.info(
                "%s: the API server answered %s; retrying in %.1fs%s",
                op,
                _said(error),
                wait,
                asked,
            )


def _said(error: KubeError) -> str:
    """What the server said, without our own words around it: `HTTP 429: storage is
    (re)initializing`."""
    text = str(error)
    at = text.find("HTTP ")
    return text[at:] if at >= 0 else f"HTTP {error.status}"
