"""kmock's Kubernetes emulator, made strict where the Kubernetes adapter relies on the API server.

kmock (pinned in pyproject's dev extra) serves a stateful Kubernetes API over real HTTP, but
it keeps objects as plain merged JSON: no resourceVersion, no PUT, 200 on create, no status
subresource. `rpp.adapters.kube.real` depends on exactly those server guarantees, so this subclass
adds them and nothing else:

- every write stamps `metadata.resourceVersion` (one counter for the whole server, as etcd's
  revision is) and create also stamps uid, generation 1 and creationTimestamp;
- a write that carries a `metadata.resourceVersion` different from the stored one is refused
  with 409 Conflict, and a create of an existing name with 409 AlreadyExists;
- PUT replaces an object; PUT and PATCH on `.../status` change only `status`, and writes to the
  main resource never change `status`;
- `metadata.generation` is bumped only when `spec` changes, or when a delete marks an object
  that has finalizers (deletionTimestamp set, as the API server does);
- a write that leaves an object being deleted without finalizers deletes it;
- create answers 201;
- a list carries the server's current resourceVersion, and a watch from a resourceVersion
  replays what changed after it, then follows; without one it sends what exists as ADDED;
- `compact()` forgets history as etcd's compaction does: a watch from an older version is
  answered HTTP 410 Expired, "too old resource version: 4 (9)" (rpp/sim/kube_standin.py
  answers with the other form the API server uses, an ERROR event in the stream);
- `bookmark()` sends every watch that asked for bookmarks (`allowWatchBookmarks=true`) a
  BOOKMARK event at the current resourceVersion; `end_watches()` ends every open stream, as
  the API server does when a watch's timeoutSeconds pass;
- `restart(forbidden=3, busy=2)`: as an API server that has just started again, every open
  watch ends, then the next 3 requests are refused 403 (its authorizer has not read RBAC
  yet) and the next 2 answered 429 "storage is (re)initializing" with Retry-After: 1;
- every write records its field manager in the object's managedFields, as the API server
  does: the `fieldManager` query parameter, else the User-Agent up to its first "/" (which
  makes the kubernetes client's writes `OpenAPI-Generator`'s).

Writes happen in fallback reactions, never in the request interceptor, so a test reaction such
as ``kmock[kmock.method.PUT, POOLS] << 403`` really refuses the write, as RBAC would.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import os
import sys
import uuid
from collections import deque
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import kmock
import yaml

from rpp.sim import managed_fields

# Where a test reaction can point: the same resource references the emulator indexes objects by.
POOLS = kmock.resource("runpodpool.ownego.com", "v1alpha1", "runpodpools")
CONFIG_MAPS = kmock.resource("", "v1", "configmaps")
SECRETS = kmock.resource("", "v1", "secrets")
EVENTS = kmock.resource("", "v1", "events")
LEASES = kmock.resource("coordination.k8s.io", "v1", "leases")


def write_kubeconfig(path: Path, *, server: str, token: str = "kube-token") -> Path:
    """A kubeconfig whose one context is the emulator at `server`: how a command run as a
    subprocess finds it, as it would find a real cluster."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(yaml.safe_dump(config))
    return path


async def rpp_against(
    kmock: StrictKubernetesEmulator, tmp_path: Path, *args: str, env: Mapping[str, str]
) -> tuple[int, str]:
    """`rpp ARGS` run as a process with the emulator as its cluster and only `env` besides
    PATH and KUBECONFIG; its exit code and stderr. Async: the emulator answers from this
    test's event loop while the process runs."""
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", server=str(kmock.url))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "rpp",
        *args,
        env={"PATH": os.environ.get("PATH", ""), "KUBECONFIG": str(kubeconfig), **env},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, err = await asyncio.wait_for(process.communicate(), timeout=60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, err.decode()


def forbidden(verb: str, resource: str) -> kmock.KubernetesError:
    """The 403 a real API server answers when the Role lacks `verb` on `resource`."""
    return kmock.KubernetesError(
        status=403,
        reason="Forbidden",
        message=(
            f'{resource} is forbidden: User "system:serviceaccount:runpod:rpp" cannot {verb}'
            f' resource "{resource}" in the namespace "runpod"'
        ),
    )


def refusal(status: int) -> aiohttp.web.Response:
    """What an API server that has just started answers: 403 before its authorizer has read
    RBAC, 429 while its storage (the watch cache) fills, as its Status."""
    if status == 403:
        reason, message = "Forbidden", 'leases.coordination.k8s.io is forbidden: User "rpp"'
        headers: dict[str, str] = {}
    else:
        reason, message = "TooManyRequests", "storage is (re)initializing"
        headers = {"Retry-After": "1"}
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}}
    body["status"] = "Failure"
    body |= {"message": message, "reason": reason, "code": status}
    if status == 429:
        body["details"] = {"retryAfterSeconds": 1}
    return aiohttp.web.json_response(body, status=status, headers=headers)


_END = object()
"""Put on a resource's bus to end every watch stream open on it."""


@attrs.define(kw_only=True)
class StrictKubernetesEmulator(kmock.KubernetesEmulator):
    """kmock's emulator with resourceVersion conflicts, PUT, 201 and the status subresource."""

    revision: int = attrs.field(default=0, init=False)
    """The last resourceVersion given out (etcd's revision)."""
    compacted: int = attrs.field(default=0, init=False)
    """Watches from a resourceVersion below this one are answered 410 Expired."""
    _history: list[tuple[int, kmock.resource, dict[str, Any]]] = attrs.field(
        factory=list, init=False
    )
    _refusals: deque[int] = attrs.field(factory=deque, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.fallback[kmock.method.PUT] << self._serve_replace

    def _next_revision(self) -> str:
        self.revision += 1
        return str(self.revision)

    def compact(self) -> None:
        """Forget every change up to now, as etcd's compaction does."""
        self.compacted = self.revision
        self._history = [entry for entry in self._history if entry[0] > self.compacted]

    async def bookmark(self) -> None:
        """A BOOKMARK at the current resourceVersion to every watch that asked for them."""
        event = {
            "type": "BOOKMARK",
            "object": {"metadata": {"resourceVersion": str(self.revision)}},
        }
        for bus in list(self._buses.values()):
            await bus.put(event)

    async def end_watches(self) -> None:
        """End every open watch stream, as the API server does when timeoutSeconds pass."""
        for bus in list(self._buses.values()):
            await bus.put(_END)

    async def restart(self, *, forbidden: int = 0, busy: int = 0) -> None:
        """As an API server that has just started again: the open watches end, then the
        next `forbidden` requests are refused 403 and the next `busy` answered 429."""
        await self.end_watches()
        self._refusals.extend([403] * forbidden + [429] * busy)

    @property
    def refusing(self) -> int:
        """How many more requests the restart window refuses."""
        return len(self._refusals)

    def managers(self, resource: kmock.resource, namespace: str, name: str) -> set[str]:
        """Who wrote the object, by its managedFields."""
        return managed_fields.managers(self.objects[resource, namespace, name].raw)

    def seed(
        self, resource: kmock.resource, namespace: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """Store an object as if a human had created it; return what the server holds."""
        stored = self._stamp_new(copy.deepcopy(body), namespace)
        self.objects[resource, namespace, stored["metadata"]["name"]] = stored
        self._history.append((self.revision, resource, {"type": "ADDED", "object": stored}))
        return copy.deepcopy(stored)

    async def wait_for_watchers(self, resource: kmock.resource, *, timeout: float = 5.0) -> None:
        """Wait until a watch stream listens for changes: kmock sends the existing objects
        before it subscribes, so a write right after them could otherwise go unseen."""
        async with asyncio.timeout(timeout):
            while not self._buses[resource].consumer_count:
                await asyncio.sleep(0.01)

    async def _handle(self, request: kmock.Request) -> Any:
        if request.resource is not None and self._refusals:
            return refusal(self._refusals.popleft())
        # The parent interceptor writes on every POST/PATCH/DELETE before any reaction runs;
        # skip it so the writes below happen only when no test reaction answered first.
        is_write = request.action in {kmock.action.CREATE, kmock.action.UPDATE}
        if request.resource is not None and (is_write or request.method == kmock.method.PUT):
            return await kmock.RawHandler._handle(self, request)
        if request.action == kmock.action.DELETE and request.name is not None:
            await self._delete(request)
            return await kmock.RawHandler._handle(self, request)
        return await super()._handle(request)

    async def _publish(self, resource: kmock.resource, type_: str, obj: dict[str, Any]) -> None:
        """Tell the watches, and keep the event for a watch that resumes from before it."""
        event = {"type": type_, "object": obj}
        self._history.append((int(obj["metadata"]["resourceVersion"]), resource, event))
        await self._buses[resource].put(event)

    async def _delete(self, request: kmock.Request) -> None:
        """A delete of an object with finalizers only marks it, bumping its generation and
        resourceVersion; one without goes, at a resourceVersion of its own."""
        key = (request.resource, request.namespace, request.name)
        async with self._lock:
            if key not in self.objects or self.objects[key].deleted:
                raise kmock.KubernetesObjectNotFoundError()
            old = self.objects[key].raw
            meta = old.get("metadata", {})
            if meta.get("deletionTimestamp"):
                return
            new = copy.deepcopy(old)
            new["metadata"]["resourceVersion"] = self._next_revision()
            if not meta.get("finalizers"):
                self.objects[key].history.append(new)
                self.objects[key].delete()
                await self._publish(request.resource, "DELETED", new)
                return
            new["metadata"]["deletionTimestamp"] = _now()
            if "generation" in meta:
                new["metadata"]["generation"] = meta["generation"] + 1
            self.objects[key].history.append(new)
            await self._publish(request.resource, "MODIFIED", new)

    async def _serve_list(self, request: kmock.Request) -> Any:
        listed = await super()._serve_list(request)
        listed["metadata"]["resourceVersion"] = str(self.revision)
        return listed

    async def _serve_watch(self, request: kmock.Request) -> AsyncIterator[Any]:
        since = request.params.get("resourceVersion")
        bookmarks = request.params.get("allowWatchBookmarks") == "true"
        resource = request.resource
        async with self._lock:
            if since and int(since) < self.compacted:
                raise kmock.KubernetesError(
                    status=410,
                    reason="Expired",
                    message=f"too old resource version: {since} ({self.compacted})",
                )
            bus = self._buses[resource]
            marker = await bus.mark()  # before the backlog: nothing falls between the two
            if since:
                backlog = [e for v, r, e in self._history if r == resource and v > int(since)]
            else:
                existing = self.objects.items()
                backlog = [
                    {"type": "ADDED", "object": o.raw}
                    for (r, _, _), o in existing
                    if r == resource and not o.deleted
                ]
        try:
            yield b""  # the headers: the stream is open
            for event in backlog:
                if _in(request, event):
                    yield event
            async for event in bus.stream(since=marker):
                if event is _END:
                    return
                if event["type"] == "BOOKMARK":
                    if bookmarks:
                        yield event
                elif _in(request, event):
                    yield event
        finally:
            await bus.unmark(marker)

    async def _serve_create(self, request: kmock.Request) -> kmock.Response:
        body = copy.deepcopy(request.data or {})
        namespace = request.namespace or body.get("metadata", {}).get("namespace")
        key = (request.resource, namespace, body.get("metadata", {}).get("name"))
        async with self._lock:
            if key in self.objects and not self.objects[key].deleted:
                raise kmock.KubernetesError(
                    status=409, reason="AlreadyExists", message=f"{key[2]!r} already exists"
                )
            stored = self._stamp_new(body, namespace)
            self._record_manager(stored, request)
            if key in self.objects:
                self.objects[key].history.append(stored)
            else:
                self.objects[key] = stored
            await self._publish(request.resource, "ADDED", stored)
        return kmock.Response(status=201, payload=stored)

    async def _serve_update(self, request: kmock.Request) -> dict[str, Any]:
        return await self._write(request, replace=False)

    async def _serve_replace(self, request: kmock.Request) -> dict[str, Any]:
        return await self._write(request, replace=True)

    async def _write(self, request: kmock.Request, *, replace: bool) -> dict[str, Any]:
        key = (request.resource, request.namespace, request.name)
        body = copy.deepcopy(request.data or {})
        async with self._lock:
            if request.name is None or key not in self.objects or self.objects[key].deleted:
                raise kmock.KubernetesObjectNotFoundError()
            old = self.objects[key].raw
            wanted = body.get("metadata", {}).get("resourceVersion")
            if wanted is not None and wanted != old["metadata"].get("resourceVersion"):
                raise kmock.KubernetesError(
                    status=409,
                    reason="Conflict",
                    message=(
                        f"Operation cannot be fulfilled on {request.resource.plural} "
                        f'"{request.name}": the object has been modified; please apply your '
                        "changes to the latest version and try again"
                    ),
                )
            new = self._next_version(old, body, replace=replace, status=request.subresource)
            new["metadata"]["managedFields"] = old["metadata"].get("managedFields", [])
            self._record_manager(new, request)
            self.objects[key].history.append(new)
            meta = new["metadata"]
            if meta.get("deletionTimestamp") and not meta.get("finalizers"):
                # The last finalizer went: the API server deletes the object now.
                self.objects[key].delete()
                await self._publish(request.resource, "DELETED", new)
            else:
                await self._publish(request.resource, "MODIFIED", new)
        return new

    def _record_manager(self, obj: dict[str, Any], request: kmock.Request) -> None:
        """Who wrote it, in its managedFields (rpp/sim/managed_fields.py)."""
        given = request.params.get("fieldManager")
        if given is not None and not 0 < len(given) <= managed_fields.MAX_LENGTH:
            raise kmock.KubernetesError(
                status=422, reason="Invalid", message="fieldManager: must be 1-128 characters"
            )
        group, version = request.resource.group, request.resource.version
        managed_fields.record(
            obj,
            manager=managed_fields.manager_of(given, request.headers.get("User-Agent", "")),
            api_version=f"{group}/{version}" if group else version,
            time=_now(),
            subresource=request.subresource or "",
        )

    def _next_version(
        self, old: dict[str, Any], body: dict[str, Any], *, replace: bool, status: str | None
    ) -> dict[str, Any]:
        new = copy.deepcopy(old)
        if status == "status":
            # The status subresource ignores everything but status, as the API server does.
            if replace:
                new["status"] = body.get("status")
            else:
                scratch = kmock.Object(copy.deepcopy(old))
                scratch.patch({"status": body.get("status")})
                new["status"] = scratch.raw.get("status")
        else:
            if replace:
                new = {**body, "metadata": {**body.get("metadata", {})}}
            else:
                scratch = kmock.Object(copy.deepcopy(old))
                scratch.patch(body)
                new = scratch.raw
            for key in ("apiVersion", "kind"):
                if key in old:
                    new.setdefault(key, old[key])
            for field in _KEPT_METADATA:
                if field in old["metadata"]:
                    new["metadata"][field] = old["metadata"][field]
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
            if "generation" in old["metadata"] and new.get("spec") != old.get("spec"):
                new["metadata"]["generation"] = old["metadata"]["generation"] + 1
        new["metadata"]["resourceVersion"] = self._next_revision()
        return new

    def _stamp_new(self, body: dict[str, Any], namespace: str | None) -> dict[str, Any]:
        meta = body.setdefault("metadata", {})
        meta.update(
            namespace=namespace,
            uid=str(uuid.uuid4()),
            resourceVersion=self._next_revision(),
            creationTimestamp=_now(),
        )
        if "spec" in body:  # as for custom resources; ConfigMaps and the like have none
            meta["generation"] = 1
        return body


def _in(request: kmock.Request, event: dict[str, Any]) -> bool:
    """Whether a watch of `request` (its namespace, if any) sees the event's object."""
    meta = event["object"].get("metadata", {})
    return request.namespace is None or meta.get("namespace") == request.namespace


# What a write to the main resource cannot change, as on the API server.
_KEPT_METADATA = (
    "uid", "creationTimestamp", "deletionTimestamp", "generation", "namespace", "name"
)  # fmt: skip


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
