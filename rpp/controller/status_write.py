"""Every status write of a pool: over the resourceVersion it was read at, never blind.

Where it sits: the last step of observe -> decide -> act, for the two writers of a
pool's status: the reconcile (rpp/controller/reconcile.py) and the ReconcileFailed
condition (rpp/controller/reconcile_failed.py). Both write through the status
subresource with the resourceVersion they read, so a write that raced another change
gets a 409 (`Conflict`) instead of erasing it.

On a 409 the pool is read again and the writer says what to write over the fresh
version, or that nothing may be written (`on_conflict` returns None): a reconcile
that acted never forces its status over someone else's, and one that did not act
decides again. tenacity runs the attempts: at most `ATTEMPTS` writes, no wait between
them (the re-read is the wait), stop on anything but a conflict.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt

from rpp.adapters.kube.api import Conflict, KubeApi, KubeError
from rpp.adapters.logs import fields, layer_logger
from rpp.model.status import PoolStatus

log = layer_logger("rpp.controller")

ATTEMPTS = 3
"""Writes per status (the first and two after a re-read); then the next loop tries."""

OnConflict = Callable[[Mapping[str, Any]], Awaitable[PoolStatus | None]]
"""Given the pool as re-read after a 409: the status to write over it, or None to stop."""


@dataclass(frozen=True)
class StatusWrite:
    """How one status write ended.

    `status` is the last status composed (what the pool's status is now when
    `written`); `stored` is the status the API server kept, which may differ from the
    one sent when the server prunes fields. `error` is set when the API server refused
    the write (`failed` attempts, the last answer's words), not when the writer chose
    to stop (`on_conflict` returned None): the reconciler counts these as failing writes.
    """

    status: PoolStatus | None
    written: bool
    sent: Mapping[str, Any] = field(default_factory=dict)
    stored: Mapping[str, Any] = field(default_factory=dict)
    pool: Mapping[str, Any] = field(default_factory=dict)  # the pool as stored, when written
    error: str | None = None
    failed: int = 0

    @property
    def stored_as_sent(self) -> bool:
        """Written, and the API server kept exactly what was sent."""
        return self.written and self.stored == self.sent


async def _no_wait(_seconds: float) -> None:
    """tenacity's sleep between attempts: none, and no extra turn of the event loop."""


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


async def write_status(
    kube: KubeApi,
    *,
    name: str,
    obj: Mapping[str, Any],
    status: PoolStatus,
    on_conflict: OnConflict,
) -> StatusWrite:
    """Write `status` over `obj`'s resourceVersion; on 409 re-read and ask `on_conflict`.

    Never raises a Kubernetes error: a failed write is logged and reported as not
    written, and the next loop starts again from what is stored.
    """
    current = status
    retrying = AsyncRetrying(
        stop=stop_after_attempt(ATTEMPTS),
        retry=retry_if_exception_type(Conflict),
        sleep=_no_wait,
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    obj = await kube.get_pool(name)  # someone wrote first: on top of it
                    fresh = await on_conflict(obj)
                    if fresh is None:
                        return StatusWrite(status=None, written=False)
                    current = fresh
                sent = current.stored()
                stored = await kube.replace_pool_status(
                    name, status=sent, resource_version=_version(obj)
                )
                kept = stored.get("status") or {}
                return StatusWrite(
                    status=current, written=True, sent=sent, stored=kept, pool=stored
                )
    except Conflict as err:
        log.error("status not written after %d conflicts", ATTEMPTS, extra=fields(pool=name))
        error = f"409 Conflict: {err}"
    except KubeError as err:
        log.error("status not written: %s", err, extra=fields(pool=name))
        error = str(err)
    # Every attempt but a conflict's last retry ended in an answer refusing it.
    failed = retrying.statistics.get("attempt_number", 1)
    return StatusWrite(status=current, written=False, error=error, failed=failed)
