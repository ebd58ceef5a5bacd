"""The in-memory cluster's pool events, as an API server keeps and streams them.

Where it sits: inside `MemoryKubeApi` (rpp/sim/kube_memory.py), the cluster of the
simulator and the fast tests. Its `watch_pools` runs the real adapter's reflector
(rpp/adapters/kube/watching.py) over these streams, so the controller's watch meets
here what it meets on an API server:

- a stream from a resourceVersion replays the changes after it, then follows; from
  none, it starts with every pool as ADDED;
- the history is bounded (`keep` events, as the API server's watch cache) and
  `compact()` drops it, as etcd's compaction does: a stream from an older version is
  refused 410 Gone, "too old resource version: 4 (9)";
- `bookmark()` sends every open stream a BOOKMARK at the current resourceVersion, as
  the API server does about once a minute to watches that asked for them;
- `end()` ends every open stream, as the API server does when a watch's timeoutSeconds
  pass or it restarts.

Events are kept as the pool's JSON text at that version, which the cluster encodes once
per version anyway; each stream decodes its own copy.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, NamedTuple

from rpp.adapters.kube import transport, watching
from rpp.adapters.kube.api import KubeSettings, PoolEvent

_END = ("END", 0, "")


class _Entry(NamedTuple):
    type: str
    revision: int
    text: str


class PoolEvents:
    """The kept history of pool changes and the streams open on it."""

    def __init__(self, settings: KubeSettings, *, keep: int = 1024) -> None:
        self._settings = settings
        self._history: deque[_Entry] = deque()
        self._keep = keep
        self.compacted = 0
        """Streams from a resourceVersion below this one are refused (410)."""
        self._streams: list[asyncio.Queue[_Entry | tuple[str, int, str]]] = []

    @property
    def open_streams(self) -> int:
        return len(self._streams)

    def publish(self, type_: str, revision: int, text: str) -> None:
        """A pool changed (ADDED, MODIFIED, DELETED) at `revision`; `text` is it then."""
        entry = _Entry(type_, revision, text)
        self._history.append(entry)
        if len(self._history) > self._keep:
            self.compacted = self._history.popleft().revision
        for queue in self._streams:
            queue.put_nowait(entry)

    def compact(self, revision: int) -> None:
        """Forget every change up to `revision`."""
        self.compacted = max(self.compacted, revision)
        while self._history and self._history[0].revision <= revision:
            self._history.popleft()

    def bookmark(self, revision: int) -> None:
        for queue in self._streams:
            queue.put_nowait(("BOOKMARK", revision, ""))

    def end(self) -> None:
        for queue in self._streams:
            queue.put_nowait(_END)

    async def watch(
        self,
        *,
        relist: watching.Relist,
        opened: Callable[[], Awaitable[None]],
        existing: Callable[[], list[str]],
    ) -> AsyncGenerator[PoolEvent, None]:
        """The pool watch as the real adapter runs it: `relist`, then streams from its
        resourceVersion, each announced by `opened()` (the cluster records the call)."""

        async def open_watch(version: str | None) -> AsyncGenerator[dict[str, Any], None]:
            await opened()
            async with aclosing(self._stream(version, existing)) as stream:
                async for event in stream:
                    yield event

        changes = watching.reflect(
            open_watch=open_watch,
            relist=relist,
            what=f"runpodpools in namespace {self._settings.namespace}",
        )
        async with aclosing(changes):
            async for type_, pool in changes:
                yield PoolEvent(type_, pool)

    async def _stream(
        self, version: str | None, existing: Callable[[], list[str]]
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The raw events of one stream from `version`: `existing()` (the pools' texts) as
        ADDED when there is none; 410 Gone when it is too old."""
        if version is not None and int(version) < self.compacted:
            op = transport.Op("watch", self._settings.plural, None, self._settings.namespace)
            message = f"too old resource version: {version} ({self.compacted})"
            raise transport.error_for(op, status=410, message=message, reason="Expired")
        queue: asyncio.Queue[_Entry | tuple[str, int, str]] = asyncio.Queue()
        # Subscribed before the backlog is read: nothing falls between the two.
        self._streams.append(queue)
        try:
            if version is None:
                backlog = [_Entry("ADDED", 0, text) for text in existing()]
            else:
                backlog = [entry for entry in self._history if entry.revision > int(version)]
            for entry in backlog:
                yield _event(entry)
            while True:
                item = await queue.get()
                if item is _END:
                    return
                yield _event(item)
        finally:
            self._streams.remove(queue)


def _event(item: tuple[str, int, str]) -> dict[str, Any]:
    type_, revision, text = item
    if type_ == "BOOKMARK":
        return {"type": type_, "object": {"metadata": {"resourceVersion": str(revision)}}}
    return {"type": type_, "object": json.loads(text)}
