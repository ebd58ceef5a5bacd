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
  create, +1 when spec changes;
- watch (`?watch=true`): the objects as ADDED (unless a resourceVersion is given), then
  every change, one JSON object per line, until the client goes or timeoutSeconds pass;
- `GET /_standin/lists`: how often each collection was listed, so the benchmark sees each
  loop start (the controller lists its pools once a loop) without asking the controller.

It serves plain HTTP on 127.0.0.1 and checks no credentials. Run as its own process
(`python -m rpp.sim.kube_standin --port 0`; the first stdout line is "listening on PORT"),
so its CPU is not counted as the controller's.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import datetime as dt
import itertools
import json
import uuid
from collections import defaultdict
from typing import Any

from aiohttp import web

from rpp.sim.kube_memory import merge_patch


class Store:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        self.revision = itertools.count(1)
        self.watchers: dict[str, set[asyncio.Queue[dict[str, Any]]]] = defaultdict(set)
        self.lists: dict[str, int] = defaultdict(int)  # list requests per collection

    def stamp(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self.revision))

    def notify(self, collection: str, type_: str, obj: dict[str, Any]) -> None:
        for queue in self.watchers[collection]:
            queue.put_nowait({"type": type_, "object": copy.deepcopy(obj)})


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


def make_app(store: Store) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            collection, name, sub = split(request.path)
        except ValueError:
            return _status(404, "NotFound", f"{request.path} is not served here")
        objects = store.objects[collection]
        method = request.method
        if name is None and method == "GET":
            if request.query.get("watch") in ("true", "1"):
                return await watch(request, collection)
            store.lists[collection.rsplit("/", 1)[-1]] += 1
            items = [objects[n] for n in sorted(objects)]
            meta = {"resourceVersion": str(next(store.revision))}
            return web.json_response({"kind": "List", "metadata": meta, "items": items})
        if name is None and method == "POST":
            obj = await request.json()
            name = obj["metadata"]["name"]
            if name in objects:
                return _status(409, "AlreadyExists", f"{name} already exists")
            meta = obj["metadata"]
            meta.setdefault("uid", str(uuid.uuid4()))
            meta["generation"] = 1
            meta["creationTimestamp"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            meta.setdefault("namespace", collection.split("/")[-2])
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
        if updated.get("spec") != current.get("spec"):
            updated["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
        store.stamp(updated)
        objects[name or ""] = updated
        store.notify(collection, "MODIFIED", updated)
        return web.json_response(updated)

    async def watch(request: web.Request, collection: str) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        store.watchers[collection].add(queue)
        timeout = float(request.query.get("timeoutSeconds") or 3600)
        try:
            if not request.query.get("resourceVersion"):
                for obj in store.objects[collection].values():
                    await response.write(
                        json.dumps({"type": "ADDED", "object": obj}).encode() + b"\n"
                    )
            async with asyncio.timeout(timeout):
                while True:
                    event = await queue.get()
                    await response.write(json.dumps(event).encode() + b"\n")
        except (TimeoutError, ConnectionError):
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

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_get("/version", version)
    app.router.add_get("/_standin/lists", lists)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


async def main(port: int) -> None:
    runner = web.AppRunner(make_app(Store()), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=1024)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"listening on {bound}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    asyncio.run(main(parser.parse_args().port))
