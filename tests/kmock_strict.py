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
- create answers 201.

Writes happen in fallback reactions, never in the request interceptor, so a test reaction such
as ``kmock[kmock.method.PUT, POOLS] << 403`` really refuses the write, as RBAC would.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import itertools
import os
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import kmock
import yaml

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


@attrs.define(kw_only=True)
class StrictKubernetesEmulator(kmock.KubernetesEmulator):
    """kmock's emulator with resourceVersion conflicts, PUT, 201 and the status subresource."""

    _revisions: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1), init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.fallback[kmock.method.PUT] << self._serve_replace

    def seed(
        self, resource: kmock.resource, namespace: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """Store an object as if a human had created it; return what the server holds."""
        stored = self._stamp_new(copy.deepcopy(body), namespace)
        self.objects[resource, namespace, stored["metadata"]["name"]] = stored
        return copy.deepcopy(stored)

    async def wait_for_watchers(self, resource: kmock.resource, *, timeout: float = 5.0) -> None:
        """Wait until a watch stream listens for changes: kmock sends the existing objects
        before it subscribes, so a write right after them could otherwise go unseen."""
        async with asyncio.timeout(timeout):
            while not self._buses[resource].consumer_count:
                await asyncio.sleep(0.01)

    async def _handle(self, request: kmock.Request) -> Any:
        # The parent interceptor writes on every POST/PATCH before any reaction runs; skip it so
        # the writes below happen only when no test reaction answered first.
        is_write = request.action in {kmock.action.CREATE, kmock.action.UPDATE}
        if request.resource is not None and (is_write or request.method == kmock.method.PUT):
            return await kmock.RawHandler._handle(self, request)
        if request.action == kmock.action.DELETE and request.name is not None:
            await self._mark_deleting(request)
        return await super()._handle(request)

    async def _mark_deleting(self, request: kmock.Request) -> None:
        """A delete of an object with finalizers only marks it, bumping its generation and
        resourceVersion; the parent then sees it marked and leaves it."""
        key = (request.resource, request.namespace, request.name)
        async with self._lock:
            if key not in self.objects or self.objects[key].deleted:
                return
            old = self.objects[key].raw
            meta = old.get("metadata", {})
            if not meta.get("finalizers") or meta.get("deletionTimestamp"):
                return
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = _now()
            if "generation" in meta:
                new["metadata"]["generation"] = meta["generation"] + 1
            new["metadata"]["resourceVersion"] = str(next(self._revisions))
            self.objects[key].history.append(new)
            await self._buses[request.resource].put({"type": "MODIFIED", "object": new})

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
            if key in self.objects:
                self.objects[key].history.append(stored)
            else:
                self.objects[key] = stored
            await self._buses[request.resource].put({"type": "ADDED", "object": stored})
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
            self.objects[key].history.append(new)
            meta = new["metadata"]
            if meta.get("deletionTimestamp") and not meta.get("finalizers"):
                # The last finalizer went: the API server deletes the object now.
                self.objects[key].delete()
                await self._buses[request.resource].put({"type": "DELETED", "object": new})
            else:
                await self._buses[request.resource].put({"type": "MODIFIED", "object": new})
        return new

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
        new["metadata"]["resourceVersion"] = str(next(self._revisions))
        return new

    def _stamp_new(self, body: dict[str, Any], namespace: str | None) -> dict[str, Any]:
        meta = body.setdefault("metadata", {})
        meta.update(
            namespace=namespace,
            uid=str(uuid.uuid4()),
            resourceVersion=str(next(self._revisions)),
            creationTimestamp=_now(),
        )
        if "spec" in body:  # as for custom resources; ConfigMaps and the like have none
            meta["generation"] = 1
        return body


# What a write to the main resource cannot change, as on the API server.
_KEPT_METADATA = (
    "uid", "creationTimestamp", "deletionTimestamp", "generation", "namespace", "name"
)  # fmt: skip


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
