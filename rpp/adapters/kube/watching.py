"""A watch that keeps up through bookmarks and a 410 Gone, as client-go's reflector does.

Where it sits: under the Kubernetes adapter's two watches, the controller's RunPodPools
(`watch_pools`) and the nginx reloader's slots ConfigMap (`watch_config_map`), and under the
in-memory cluster's pool watch (rpp/sim/kube_memory.py), so both follow the same rules.
Observe consumes the events; nothing here decides.

A watch resumes where it left off: each stream the API server ends (its timeoutSeconds, a
restart) is opened again from the last resourceVersion seen. The server keeps only recent
history (etcd compacts it, and its watch cache holds a few minutes), so a version an idle
watch saw long ago is soon too old: the server answers 410 Gone, "too old resource
version: 722 (819)", as an ERROR event in the stream or as the HTTP status of the request.
Two things keep that harmless:

- bookmarks (`allowWatchBookmarks=true`): about once a minute, and just before it ends a
  stream, the server sends a BOOKMARK event carrying its current resourceVersion and
  nothing else. It only moves the version a resume starts from;
- on 410, the watch reads the current state again, once, quietly (INFO): by a list when
  the caller may list (`relist`), then watching from the list's resourceVersion; or else
  by a watch from no version, which the server opens with every object as ADDED (the
  reloader's Role grants `watch` on its one ConfigMap, not `list`). A pool that went
  meanwhile comes out as DELETED, one that changed as MODIFIED; what did not change is not
  repeated. A 410 on a watch just opened from a fresh state is an error, not a loop.

The kubernetes client's own Watch does neither: it asks again with the same stale version,
then raises the 410 (kubernetes 37, kubernetes/aio/watch/watch.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextlib import aclosing
from typing import Any, NamedTuple

from rpp.adapters.kube.api import KubeError
from rpp.adapters.logs import layer_logger

log = layer_logger("rpp.adapters.kube")

GONE = 410
_SHORT_S = 1.0
"""A stream that ends sooner than this without an event is an error, as client-go's
VeryShortWatchError: a server (or proxy) closing every watch at once must not be asked
again in a tight loop."""
_STUB_METADATA = ("name", "namespace", "uid", "resourceVersion")

OpenWatch = Callable[[str | None], AsyncGenerator[dict[str, Any], None]]
"""Opens a watch from a resourceVersion (None: from the current state, every object
ADDED first) and yields its raw events; an ERROR event or a failed request raises the
`KubeError` of its status (410 when the version is too old)."""
Relist = Callable[[], Awaitable[tuple[list[dict[str, Any]], str]]]
"""Lists the objects; with the list's resourceVersion."""


class _Seen(NamedTuple):
    """What a watch remembers of an object it reported: enough to tell a change and to
    report its deletion."""

    uid: str
    version: str
    stub: dict[str, Any]


async def reflect(
    *, open_watch: OpenWatch, relist: Relist | None, what: str
) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
    """(type, object) for every object as ADDED, then every change, until cancelled.

    `what` names the watch in the log line of a 410: `runpodpools in namespace runpod`.
    """
    known: dict[str, _Seen] = {}
    version: str | None = None
    gone_again = False  # the last stream answered 410 before it moved
    while True:
        fresh = version is None  # the current state is read anew, by the list or the watch
        if fresh and relist is not None:
            items, version = await relist()
            for change in resync(known, items):
                yield change
        started_at = version
        moved = False  # an event or a bookmark since this stream opened
        # From no version the server first sends what exists as ADDED, in no order of
        # version: resume from none of theirs until a later event says those are past.
        past_initial = version is not None
        opened_at = asyncio.get_running_loop().time()
        try:
            # Closed here, not left to the garbage collector: a stream holds a connection.
            async with aclosing(open_watch(version)) as stream:
                async for event in stream:
                    kind = str(event.get("type", ""))
                    obj = event.get("object") or {}
                    seen = _version(obj)
                    if kind == "BOOKMARK":
                        moved, past_initial = True, True
                        version = seen or version
                        continue
                    moved = True
                    if kind != "ADDED":
                        past_initial = True
                    if past_initial and seen:
                        version = seen
                    if _remember(known, kind, obj):
                        yield kind, obj
            gone_again = False
            if not moved and asyncio.get_running_loop().time() - opened_at < _SHORT_S:
                # Ended at once with nothing: opening it again at once would spin.
                raise KubeError(
                    "watch",
                    what,
                    namespace="",
                    message=f"watch of {what}: the API server ended the stream at once",
                )
        except KubeError as error:
            if error.status != GONE:
                raise
            if gone_again and fresh and not moved:
                raise  # too old twice in a row, from a fresh state: not a compaction
            gone_again = not moved
            log.info(
                "watch of %s: the API server no longer keeps resourceVersion %s (%s); %s",
                what,
                started_at,
                _detail(error),
                "listing again, then watching from there"
                if relist is not None
                else "watching again from the current state",
            )
            version = None


def resync(
    known: dict[str, _Seen], items: list[dict[str, Any]]
) -> list[tuple[str, dict[str, Any]]]:
    """The events that bring `known` to the listed `items`: ADDED for a new object (or
    one re-created under its name), MODIFIED for a changed one, DELETED for one gone;
    nothing for one unchanged."""
    events: list[tuple[str, dict[str, Any]]] = []
    listed: set[str] = set()
    for obj in items:
        name = _name(obj)
        listed.add(name)
        before = known.get(name)
        if before is not None and before.uid != _uid(obj):
            events.append(("DELETED", before.stub))
            del known[name]
            before = None
        kind = "ADDED" if before is None else "MODIFIED"
        if _remember(known, kind, obj):
            events.append((kind, obj))
    for name in sorted(known.keys() - listed):
        events.append(("DELETED", known.pop(name).stub))
    return events


def _remember(known: dict[str, _Seen], kind: str, obj: Mapping[str, Any]) -> bool:
    """Note the event in `known`; False for an object already reported at this version
    (a watch from no version repeats what exists)."""
    name = _name(obj)
    if kind == "DELETED":
        known.pop(name, None)
        return True
    seen = _Seen(_uid(obj), _version(obj), _stub(obj))
    before = known.get(name)
    if before is not None and before[:2] == seen[:2]:
        return False
    known[name] = seen
    return True


def _stub(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    kept = {key: meta[key] for key in _STUB_METADATA if key in meta}
    stub = {key: obj[key] for key in ("apiVersion", "kind") if key in obj}
    return {**stub, "metadata": kept}


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _detail(error: KubeError) -> str:
    """The server's words of a 410: `too old resource version: 722 (819)`."""
    text = str(error)
    at = text.find("HTTP 410: ")
    return text[at + len("HTTP 410: ") :] if at >= 0 else "410 Gone"
