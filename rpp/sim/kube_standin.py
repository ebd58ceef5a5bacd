"""A small Kubernetes API stand-in, served over HTTP: just what `rpp run` calls.

Where it sits: the simulator, beside the flow. It is the API server a real `rpp run`
process talks to in the fleet benchmark (benchmarks/bench_fleet.py) and the serving rig
(tests/serving/rig.py); in one process, `MemoryKubeApi` (kube_memory.py) plays that part
without HTTP, and the two share its JSON merge patch.

Why not kmock (the tests' emulator): it keeps every request it served and scans that
list on every new one, so over a benchmark's minutes of 50 pools its answers slow down
until the controller cannot renew its Lease. This stand-in keeps objects only, with the
API server guarantees the controller relies on, and nothing else:

- namespaced collections under /api/v1 and /apis/GROUP/VERSION: list, get, create (201,
  409 AlreadyExists), PUT (409 Conflict on a stale resourceVersion), merge PATCH, and the
  `/status` subresource (PUT changes only status; writes to the object never do);
- one resourceVersion counter for the whole server, as etcd's revision; generation 1 on
  create, +1 when spec changes; every write recorded in managedFields under its
  `fieldManager` (else the User-Agent up to its first "/"), as the API server does;
- watch (`?watch=true`, `fieldSelector=metadata.name=X` honoured): from no resourceVersion
  the objects as ADDED first; from one, the changes after it (the last `HISTORY` are kept,
  as a watch cache); then every change, one JSON object per line, until the client goes or
  timeoutSeconds pass. A resourceVersion older than what is kept is answered as the API
  server does, with an ERROR event: a Status 410 Expired, "too old resource version: 4 (9)".
  A watch that asked for bookmarks (`allowWatchBookmarks=true`) gets a BOOKMARK at the
  current resourceVersion every `--bookmark-every` seconds and before timeoutSeconds end it;
- controls, for tests and benchmarks: `GET /_standin/lists` (how often each collection was
  listed: the benchmark's clock, the controller lists its pools once a loop), `GET
  /_standin/watches` (each watch request: path, resourceVersion, bookmarks asked, answer),
  `POST /_standin/compact` (forget the history, as etcd's compaction), `POST
  /_standin/bookmark` (a BOOKMARK now), `POST /_standin/end-watches` (every open watch
cut, as by a restart or a proxy: no last bookmark), and `POST
  /_standin/restart` with {"forbidden_s": 3, "busy_s": 1}: as an API server that has just
  started, the watches end, every API request is refused 403 for forbidden_s (its
  authorizer has not read RBAC yet), then answered 429 "storage is (re)initializing" with
  Retry-After: 1 for busy_s.

It serves plain HTTP on 127.0.0.1 and checks no credentials. Run as its own process
(`python -m rpp.sim.kube_standin --port 0`; the first stdout line is "listening on PORT"),
so its CPU is not counted as the controller's.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import time
import uuid
from collections import defaultdict, deque
from typing import Any

from aiohttp import web

from rpp.sim import managed_fields
from rpp.sim.kube_memory import merge_patch

HISTORY = 1000
"""Changes kept per collection for watches that resume; older resume points are 410."""


class Store:
    def __init__(self, *, bookmark_every: float = 60.0) -> None:
        self.objects: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        self.revision = 0
        self.compacted: dict[str, int] = defaultdict(int)
        self.history: dict[str, deque[tuple[int, str, bytes]]] = defaultdict(deque)
        # A watch's queue: its events' lines, None when it is cut.
        self.watchers: dict[str, set[asyncio.Queue[bytes | None]]] = defaultdict(set)
        self.lists: dict[str, int] = defaultdict(int)  # list requests per collection
        self.watches: list[dict[str, Any]] = []
        self.bookmark_every = bookmark_every
        self.forbidden_until = 0.0
        self.busy_until = 0.0

    def stamp(self, obj: dict[str, Any]) -> None:
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)

    def notify(self, collection: str, type_: str, obj: dict[str, Any]) -> None:
        line = json.dumps({"type": type_, "object": obj}).encode() + b"\n"
        kept = self.history[collection]
        kept.append((self.revision, str(obj["metadata"]["name"]), line))
        if len(kept) > HISTORY:
            self.compacted[collection] = kept.popleft()[0]
        for queue in self.watchers[collection]:
            queue.put_nowait(line)

    def compact(self) -> None:
        for collection in set(self.history) | set(self.watchers):
            self.compacted[collection] = self.revision
            self.history[collection].clear()

    def bookmark_line(self) -> bytes:
        bookmark = {"metadata": {"resourceVersion": str(self.revision)}}
        return json.dumps({"type": "BOOKMARK", "object": bookmark}).encode() + b"\n"

    def to_all_watches(self, line: bytes | None) -> None:
        for queues in self.watchers.values():
            for queue in queues:
                queue.put_nowait(line)

    def refusal(self) -> web.Response | None:
        """The answer of an API server still starting, or None once it is up."""
        now = time.monotonic()
        if now < self.forbidden_until:
            return _status(403, "Forbidden", "forbidden: the authorizer is not ready")
        if now < self.busy_until:
            response = _status(429, "TooManyRequests", "storage is (re)initializing")
            response.headers["Retry-After"] = "1"
            return response
        return None


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message}
    return web.json_response({**body, "reason": reason, "code": code}, status=code)


def split(path: str) -> tuple[str, str | None, str | None]:
    """/api/v1/namespaces/ns/configmaps/name/status -> (collection, name, subresource)."""
    parts = path.strip("/").split("/")
    at = parts.index("namespaces") + 3  # .../namespaces/NS/PLURAL
    collection = "/".join(parts[:at])
    rest = parts[at:]
    return collection, rest[0] if rest else None, rest[1] if len(rest) > 1 else None


def _api_version(collection: str) -> str:
    """apis/GROUP/VERSION/... -> GROUP/VERSION; api/v1/... -> v1."""
    parts = collection.split("/")
    return f"{parts[1]}/{parts[2]}" if parts[0] == "apis" else parts[1]


def _selected(request: web.Request) -> str | None:
    """The name a `fieldSelector=metadata.name=X` narrows a list or watch to."""
    selector = request.query.get("fieldSelector", "")
    prefix = "metadata.name="
    return selector.removeprefix(prefix) if selector.startswith(prefix) else None


def make_app(store: Store) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            collection, name, sub = split(request.path)
        except ValueError:
            return _status(404, "NotFound", f"{request.path} is not served here")
        refused = store.refusal()
        if refused is not None:
            return refused
        objects = store.objects[collection]
        method = request.method
        if name is None and method == "GET":
            if request.query.get("watch") in ("true", "1"):
                return await watch(request, collection)
            store.lists[collection.rsplit("/", 1)[-1]] += 1
            items = [objects[n] for n in sorted(objects)]
            meta = {"resourceVersion": str(store.revision)}
            return web.json_response({"kind": "List", "metadata": meta, "items": items})
        manager = request.query.get("fieldManager")
        if manager is not None and not 0 < len(manager) <= managed_fields.MAX_LENGTH:
            return _status(422, "Invalid", "fieldManager: must be 1-128 characters")
        manager = managed_fields.manager_of(manager, request.headers.get("User-Agent", ""))
        if name is None and method == "POST":
            obj = await request.json()
            name = obj["metadata"]["name"]
            if name in objects:
                return _status(409, "AlreadyExists", f"{name} already exists")
            meta = obj["metadata"]
            meta.setdefault("uid", str(uuid.uuid4()))
            meta["generation"] = 1
            meta["creationTimestamp"] = _now()
            meta.setdefault("namespace", collection.split("/")[-2])
            meta.pop("managedFields", None)
            managed_fields.record(
                obj, manager=manager, api_version=_api_version(collection), time=_now()
            )
            store.stamp(obj)
            objects[name] = obj
            store.notify(collection, "ADDED", obj)
            return web.json_response(obj, status=201)
        current = objects.get(name or "")
        if current is None:
            return _status(404, "NotFound", f"{name} not found")
        if method == "GET":
            return web.json_response(current)
        body = await request.json()
        sent = (body.get("metadata") or {}).get("resourceVersion")
        if sent and sent != current["metadata"]["resourceVersion"]:
            return _status(409, "Conflict", f"{name}: the object has been modified")
        if method == "PUT" and sub == "status":
            updated = {**current, "status": body.get("status")}
        elif method == "PUT":
            updated = {**body, "status": current.get("status")}
            updated["metadata"] = {**current["metadata"], **body["metadata"]}
        elif method == "PATCH":
            updated = merge_patch(current, body)
            if sub != "status":
                updated["status"] = current.get("status")
        else:
            return _status(405, "MethodNotAllowed", method)
        updated["metadata"] = {
            **updated["metadata"],
            "managedFields": current["metadata"].get("managedFields") or [],
        }
        managed_fields.record(
            updated,
            manager=manager,
            api_version=_api_version(collection),
            time=_now(),
            subresource=sub or "",
        )
        if updated.get("spec") != current.get("spec"):
            updated["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
        store.stamp(updated)
        objects[name or ""] = updated
        store.notify(collection, "MODIFIED", updated)
        return web.json_response(updated)

    async def watch(request: web.Request, collection: str) -> web.StreamResponse:
        since = request.query.get("resourceVersion")
        bookmarks = request.query.get("allowWatchBookmarks") in ("true", "1")
        only = _selected(request)
        timeout = float(request.query.get("timeoutSeconds") or 3600)
        expired = bool(since) and int(since or 0) < store.compacted[collection]
        store.watches.append(
            {
                "path": request.path,
                "resourceVersion": since,
                "bookmarks": bookmarks,
                "answer": "expired" if expired else "ok",
            }
        )
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        if expired:
            # As the API server's watch cache answers: 200, then one ERROR event.
            message = f"too old resource version: {since} ({store.compacted[collection]})"
            status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "code": 410}
            status |= {"status": "Failure", "message": message, "reason": "Expired"}
            await response.write(json.dumps({"type": "ERROR", "object": status}).encode() + b"\n")
            return response
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        store.watchers[collection].add(queue)
        if since:
            kept = store.history[collection]
            backlog = [line for rev, n, line in kept if rev > int(since) and only in (None, n)]
        else:
            backlog = [
                json.dumps({"type": "ADDED", "object": obj}).encode() + b"\n"
                for n, obj in store.objects[collection].items()
                if only in (None, n)
            ]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            for kept_line in backlog:
                await response.write(kept_line)
            while (left := deadline - loop.time()) > 0:
                quiet = min(left, store.bookmark_every) if bookmarks else left
                try:
                    async with asyncio.timeout(quiet):
                        line = await queue.get()
                except TimeoutError:
                    if bookmarks and loop.time() < deadline:  # the last one follows the loop
                        await response.write(store.bookmark_line())
                    continue
                if line is None:
                    return response  # cut: no last bookmark
                is_bookmark = line.startswith(b'{"type": "BOOKMARK"')
                if is_bookmark and not bookmarks:
                    continue
                if is_bookmark or only is None or _about(line, only):
                    await response.write(line)
            if bookmarks:  # as the API server does right before it ends a watch
                await response.write(store.bookmark_line())
        except ConnectionError:
            pass
        finally:
            store.watchers[collection].discard(queue)
        return response

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"major": "1", "minor": "33", "gitVersion": "v1.33.0"})

    async def lists(request: web.Request) -> web.Response:
        """How many times each collection was listed (not watched): the benchmark's clock,
        since the controller lists the pools once at the start of every loop."""
        return web.json_response(dict(store.lists))

    async def watches(request: web.Request) -> web.Response:
        return web.json_response(store.watches)

    async def control(request: web.Request) -> web.Response:
        what = request.match_info["what"]
        if what == "compact":
            store.compact()
        elif what == "bookmark":
            store.to_all_watches(store.bookmark_line())
        elif what == "end-watches":
            store.to_all_watches(None)
        elif what == "restart":
            given = await request.json() if request.can_read_body else {}
            store.to_all_watches(None)
            now = time.monotonic()
            store.forbidden_until = now + float(given.get("forbidden_s", 3.0))
            store.busy_until = store.forbidden_until + float(given.get("busy_s", 1.0))
        else:
            return _status(404, "NotFound", f"no control {what!r}")
        return web.json_response({"revision": store.revision})

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_get("/version", version)
    app.router.add_get("/_standin/lists", lists)
    app.router.add_get("/_standin/watches", watches)
    app.router.add_post("/_standin/{what}", control)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


def _about(line: bytes, name: str) -> bool:
    """Whether a watch event's line is about the object named `name`."""
    event = json.loads(line)
    return bool(event["object"].get("metadata", {}).get("name") == name)


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def main(port: int, *, bookmark_every: float) -> None:
    runner = web.AppRunner(make_app(Store(bookmark_every=bookmark_every)), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=1024)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"listening on {bound}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--bookmark-every",
        type=float,
        default=60.0,
        help="seconds between the BOOKMARK events of a quiet watch (the API server: 60)",
    )
    args = parser.parse_args()
    asyncio.run(main(args.port, bookmark_every=args.bookmark_every))
