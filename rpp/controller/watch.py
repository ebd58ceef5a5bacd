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

log = layer_logger("rpp.controller")

WATCH_RETRY_S = 5.0


class PoolWatch:
    """Turns watch events into reconciles; one per controller loop."""

    def __init__(
        self,
        *,
        kube: KubeApi,
        seen: Callable[[str], int],
        reconcile_now: Callable[[str], Awaitable[Any]],
        forget: Callable[[str], None],
    ) -> None:
        self.kube = kube
        self._seen = seen  # the newest generation the loop reconciled, -1 for none
        self._reconcile_now = reconcile_now
        self._forget = forget
        self._queued: dict[str, asyncio.Task[None]] = {}

    async def run(self) -> None:
        """Follow the pools until cancelled."""
        while True:
            try:
                async for event in self.kube.watch_pools():
                    name = pool_name(event.pool)
                    if event.type == "DELETED":
                        self._forget(name)
                    elif generation(event.pool) > self._seen(name):
                        self._queue(name)
            except KubeError as err:
                log.warning("watching RunPodPools: %s; again in %gs", err, WATCH_RETRY_S)
            await asyncio.sleep(WATCH_RETRY_S)

    async def finish(self, *, cancel: bool) -> None:
        """Wait for the queued reconciles; cancel them first when leadership is gone."""
        pending = list(self._queued.values())
        for task in pending if cancel else ():
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def _queue(self, name: str) -> None:
        if name in self._queued and not self._queued[name].done():
            return  # one is queued already; it reads the pool when it runs

        async def run() -> None:
            try:
                await self._reconcile_now(name)
            finally:
                self._queued.pop(name, None)

        self._queued[name] = asyncio.create_task(run(), name=f"rpp-changed-{name}")


def pool_name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", "?"))


def generation(obj: Mapping[str, Any]) -> int:
    return int((obj.get("metadata") or {}).get("generation") or 0)
