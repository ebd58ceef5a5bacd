"""The RunPodPool watch: reconcile a pool at once when its spec changes.

Where it sits: the controller, beside the loop. The periodic loop
(rpp/controller/loop.py) reconciles every pool every interval; a user who applies a
new spec should not wait that long. While this replica leads, `PoolWatch.run` follows
the RunPodPools: a generation the loop has not reconciled yet (a spec change, or a new
pool) queues one reconcile of that pool (`reconcile_now`, which reads it again and
takes the pool's lock, so it never races the periodic one); a deleted pool is
forgotten. A broken watch is retried every `WATCH_RETRY_S` seconds; the periodic loop
goes on meanwhile. A stream the API server ends, or answers 410 Gone after etcd compacted
its resourceVersion, is not broken: the adapter resumes it, or lists again and reports
what changed meanwhile (rpp/adapters/kube/watching.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from rpp.adapters.kube.api import KubeApi, KubeError
from rpp.adapters.logs import layer_logger

PoolKey = tuple[str, str]
"""(namespace, name), as rpp/controller/pool_namespaces.py keys a pool."""

log = layer_logger("rpp.controller")

WATCH_RETRY_S = 5.0


class PoolWatch:
    """Turns watch events into reconciles; one per watched adapter (a namespace, or the
    cluster for NAMESPACES=*)."""

    def __init__(
        self,
        *,
        kube: KubeApi,
        seen: Callable[[PoolKey], int],
        reconcile_now: Callable[[PoolKey], Awaitable[Any]],
        forget: Callable[[PoolKey], None],
    ) -> None:
        self.kube = kube
        self._seen = seen  # the newest generation the loop reconciled, -1 for none
        self._reconcile_now = reconcile_now
        self._forget = forget
        self._queued: dict[PoolKey, asyncio.Task[None]] = {}

    async def run(self) -> None:
        """Follow the pools until cancelled."""
        while True:
            try:
                async for event in self.kube.watch_pools():
                    key = pool_key(event.pool, default=self.kube.settings.namespace)
                    if event.type == "DELETED":
                        self._forget(key)
                    elif generation(event.pool) > self._seen(key):
                        self._queue(key)
            except KubeError as err:
                log.warning("watching RunPodPools: %s; again in %gs", err, WATCH_RETRY_S)
            await asyncio.sleep(WATCH_RETRY_S)

    async def finish(self, *, cancel: bool) -> None:
        """Wait for the queued reconciles; cancel them first when leadership is gone."""
        pending = list(self._queued.values())
        for task in pending if cancel else ():
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def _queue(self, key: PoolKey) -> None:
        if key in self._queued and not self._queued[key].done():
            return  # one is queued already; it reads the pool when it runs

        async def run() -> None:
            try:
                await self._reconcile_now(key)
            finally:
                self._queued.pop(key, None)

        self._queued[key] = asyncio.create_task(run(), name=f"rpp-changed-{key[1]}")


def pool_name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", "?"))


def pool_key(obj: Mapping[str, Any], *, default: str) -> PoolKey:
    """(namespace, name): the metadata's namespace, or the one watched."""
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or default), pool_name(obj)


def generation(obj: Mapping[str, Any]) -> int:
    return int((obj.get("metadata") or {}).get("generation") or 0)
