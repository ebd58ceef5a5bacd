"""An in-memory Kubernetes namespace behind the `KubeApi` protocol.

The simulator runs the real controller against it, and fast tests use it instead of an API
server. It keeps the guarantees the controller relies on, so code that passes here behaves the
same against a cluster: every write bumps resourceVersion, a write over a stale one raises
`Conflict`, generation moves only when a pool's spec changes or its deletion starts, status is
written only through its own call, a pool with finalizers is only marked for deletion
(deletionTimestamp) until the last one is removed, and Events repeat by count (the same naming
as `rpp.adapters.kube.real`).

Like Karpenter's fake cloud provider, it records every call the controller makes
(`calls`, as (verb, resource, name) in RBAC terms) and lets a test make the next call of a kind
fail (`fail_next`). The methods a human or a test uses to change the cluster (`apply_pool`,
`patch_pool_spec`, `put_config_map`, ...) are not recorded: they are not the controller's.

What a real API server does beyond that, as the real adapter meets it:

- every write of the controller's is recorded in the object's managedFields under its
  field manager (`settings.field_manager`), as the API server records the `fieldManager`;
- the pool watch is a list, then watch streams run by the real adapter's reflector
  (rpp/adapters/kube/watching.py) over kept history (kube_memory_watch.py): `end_watches`
  ends the streams, `compact` makes a resume from before it a 410 Gone (a re-list
  follows), `bookmark` moves the streams' resourceVersion on;
- `restart(forbidden_s=3, busy_s=1)`: an API server that has just started refuses
  everything for a few seconds (403, then 429); the real adapter waits that out
  (rpp/adapters/kube/transient.py), so here every call in the window waits until it ends,
  and the open watches end.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import uuid
from collections import defaultdict, deque
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from rpp.adapters.clock import Clock, to_rfc3339
from rpp.adapters.kube import events
from rpp.adapters.kube.api import (
    POOL_KIND,
    AlreadyExists,
    Conflict,
    EventType,
    KubeApi,
    KubeSettings,
    NotFound,
    PoolEvent,
    SecretData,
    StoredConfigMap,
)
from rpp.sim import managed_fields
from rpp.sim.kube_memory_watch import PoolEvents

_UID_NAMESPACE = uuid.UUID("6f1c2a8e-4d3b-4f7e-9a55-2b8c0d1e3f47")


_T = TypeVar("_T")


def _clone(obj: _T) -> _T:
    """A deep copy of a JSON-shaped object (what the API server stores and returns).

    A JSON round trip is several times faster than copy.deepcopy on these dicts, and the
    simulator copies every pool on every get, list and write.
    """
    copied: _T = json.loads(json.dumps(obj))
    return copied


class Call(NamedTuple):
    """One API call the controller made, in the words of an RBAC rule."""

    verb: str
    resource: str
    name: str | None


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: maps merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return _clone(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class MemoryKubeApi:
    """One namespace of an in-memory cluster; see the module docstring."""

    def __init__(self, settings: KubeSettings, *, clock: Clock) -> None:
        self._settings = settings
        self._clock = clock
        self.calls: list[Call] = []
        self._failures: defaultdict[tuple[str, str], deque[Exception]] = defaultdict(deque)
        self._revision = 0
        self._pools: dict[str, dict[str, Any]] = {}
        # Each pool's JSON text at its resourceVersion: a loop reads, writes, returns and
        # notifies the same version, and one encoding serves every copy of it.
        self._pool_text: dict[str, tuple[str, str]] = {}
        self._config_maps: dict[str, dict[str, Any]] = {}
        self._secrets: dict[str, dict[str, str]] = {}
        self._events: dict[str, dict[str, Any]] = {}
        self._leases: dict[str, dict[str, Any]] = {}
        self._pool_events = PoolEvents(settings)
        self._unavailable_until = -1.0  # on the loop's clock: a restart's window

    def __repr__(self) -> str:
        return f"MemoryKubeApi(namespace={self._settings.namespace!r})"

    @property
    def settings(self) -> KubeSettings:
        return self._settings

    # -- test and simulator controls (not recorded as calls) --------------------------------

    def fail_next(self, verb: str, resource: str, error: Exception) -> None:
        """Make the next `verb` on `resource` (e.g. "update", "runpodpools/status") raise."""
        self._failures[(verb, resource)].append(error)

    def end_watches(self) -> None:
        """End every open watch stream, as the API server does when timeoutSeconds pass."""
        self._pool_events.end()

    def compact(self) -> None:
        """Forget the changes up to now, as etcd's compaction: a watch resuming from an
        older resourceVersion is answered 410 Gone, and lists again."""
        self._pool_events.compact(self._revision)

    def bookmark(self) -> None:
        """A BOOKMARK at the current resourceVersion to every open watch stream."""
        self._pool_events.bookmark(self._revision)

    @property
    def open_watches(self) -> int:
        return self._pool_events.open_streams

    def restart(self, *, forbidden_s: float, busy_s: float = 0.0) -> None:
        """The API server restarts: the open watches end, and calls in the next
        `forbidden_s` (403) plus `busy_s` (429) seconds of the loop's clock wait until they
        have passed, as the real adapter waits out those passing refusals."""
        self.end_watches()
        loop = asyncio.get_running_loop()
        self._unavailable_until = loop.time() + forbidden_s + busy_s

    def apply_pool(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Create the pool, or replace its spec, labels and annotations (as `kubectl apply`)."""
        meta: Mapping[str, Any] = manifest.get("metadata") or {}
        name = meta.get("name")
        if not name:
            raise ValueError("a RunPodPool manifest needs metadata.name")
        if name not in self._pools:
            pool: dict[str, Any] = {
                "apiVersion": self._settings.pool_api_version,
                "kind": POOL_KIND,
                "metadata": self._new_metadata(name, meta, generation=True),
                "spec": _clone(dict(manifest.get("spec") or {})),
            }
            self._pools[name] = pool
            self._notify("ADDED", pool)
            return self._copy(pool)
        pool = self._pools[name]
        changed_meta = {
            key: _clone(dict(meta[key]))
            for key in ("labels", "annotations")
            if key in meta and meta[key] != pool["metadata"].get(key)
        }
        return self._change_pool(pool, dict(manifest.get("spec") or {}), changed_meta)

    def patch_pool_spec(self, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """Apply an RFC 7386 merge patch to a pool's spec, as a human's `kubectl patch` would."""
        if name not in self._pools:
            raise KeyError(f"no RunPodPool {name!r} to patch; apply it first")
        pool = self._pools[name]
        return self._change_pool(pool, merge_patch(pool.get("spec", {}), patch), {})

    def delete_pool(self, name: str) -> None:
        """Delete the pool as `kubectl delete` does: a pool with finalizers is only marked
        (deletionTimestamp set, generation bumped, as the API server does) until the last
        finalizer is removed; one without goes at once."""
        pool = self._pools[name]
        meta = pool["metadata"]
        if not meta.get("finalizers"):
            self._bump(pool)  # the deletion is a revision of its own, as in etcd
            self._remove_pool(name)
            return
        if meta.get("deletionTimestamp"):
            return  # already being deleted
        meta["deletionTimestamp"] = to_rfc3339(self._clock.now())
        meta["generation"] += 1
        self._bump(pool)
        self._notify("MODIFIED", pool)

    def _remove_pool(self, name: str) -> None:
        pool = self._pools.pop(name)
        self._notify("DELETED", pool)
        self._pool_text.pop(name, None)

    def put_config_map(
        self,
        name: str,
        data: Mapping[str, str],
        *,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> StoredConfigMap:
        """Create or overwrite a ConfigMap, as Helm or a human would."""
        existing = self._config_maps.get(name)
        if existing is None:
            given = {"labels": labels or {}, "annotations": annotations or {}}
            meta = self._new_metadata(name, given)
            self._config_maps[name] = {"metadata": meta, "data": dict(data)}
        else:
            existing["data"] = dict(data)
            if labels is not None:
                existing["metadata"]["labels"] = dict(labels)
            self._bump(existing)
        return StoredConfigMap.from_object(self._config_maps[name])

    def delete_config_map(self, name: str) -> None:
        del self._config_maps[name]

    def put_secret(self, name: str, data: Mapping[str, str]) -> None:
        self._secrets[name] = dict(data)

    def delete_secret(self, name: str) -> None:
        del self._secrets[name]

    def pool(self, name: str) -> dict[str, Any]:
        """The pool as stored, for assertions."""
        return self._copy(self._pools[name])

    def has_pool(self, name: str) -> bool:
        """Whether the pool exists (a deleted one held by a finalizer still does)."""
        return name in self._pools

    def config_map_version(self, name: str) -> str:
        """The ConfigMap's resourceVersion ("" while there is none): changes with it."""
        found = self._config_maps.get(name)
        return "" if found is None else str(found["metadata"].get("resourceVersion", ""))

    def config_map(self, name: str) -> StoredConfigMap | None:
        """The ConfigMap as stored, for assertions."""
        found = self._config_maps.get(name)
        return StoredConfigMap.from_object(found) if found is not None else None

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every Event, in the order first emitted, with its count."""
        return [_clone(event) for event in self._events.values()]

    # -- KubeApi ------------------------------------------------------------------------------

    async def list_pools(self) -> list[dict[str, Any]]:
        await self._call("list", self._settings.plural, None)
        return [self._copy(pool) for pool in self._pools.values()]

    async def get_pool(self, name: str) -> dict[str, Any]:
        await self._call("get", self._settings.plural, name)
        return self._copy(self._existing(self._pools, "get", self._settings.plural, name))

    async def replace_pool_status(
        self, name: str, *, status: Mapping[str, Any], resource_version: str
    ) -> dict[str, Any]:
        resource = f"{self._settings.plural}/status"
        await self._call("update", resource, name)
        pool = self._existing(self._pools, "update", resource, name)
        self._check_version(pool, "update", resource, resource_version)
        text = json.dumps(dict(status))  # what the wire would carry
        pool["status"] = json.loads(text)
        self._managed(pool, api_version=self._settings.pool_api_version, subresource="status")
        self._bump(pool)
        self._keep_text(pool, status_text=text)
        self._notify("MODIFIED", pool)
        return self._copy(pool)

    async def set_pool_finalizers(
        self, name: str, *, finalizers: Sequence[str], resource_version: str
    ) -> dict[str, Any]:
        await self._call("patch", self._settings.plural, name)
        pool = self._existing(self._pools, "patch", self._settings.plural, name)
        self._check_version(pool, "patch", self._settings.plural, resource_version)
        if list(finalizers) == list(pool["metadata"].get("finalizers") or []):
            return self._copy(pool)  # a patch that changes nothing writes nothing
        if finalizers:
            pool["metadata"]["finalizers"] = list(finalizers)
        else:
            pool["metadata"].pop("finalizers", None)
        self._managed(pool, api_version=self._settings.pool_api_version)
        self._bump(pool)
        answer = self._copy(pool)
        if pool["metadata"].get("deletionTimestamp") and not finalizers:
            self._remove_pool(name)  # the last finalizer went: the API server deletes it
        else:
            self._notify("MODIFIED", pool)
        return answer

    async def annotate_pool(self, name: str, *, annotations: Mapping[str, str]) -> dict[str, Any]:
        await self._call("patch", self._settings.plural, name)
        pool = self._existing(self._pools, "patch", self._settings.plural, name)
        merged = {**(pool["metadata"].get("annotations") or {}), **annotations}
        if merged != pool["metadata"].get("annotations"):
            self._managed(pool, api_version=self._settings.pool_api_version)
        return self._change_pool(pool, pool.get("spec") or {}, {"annotations": merged})

    async def read_config_map(self, name: str) -> StoredConfigMap | None:
        await self._call("get", "configmaps", name)
        found = self._config_maps.get(name)
        return StoredConfigMap.from_object(found) if found is not None else None

    async def create_config_map(
        self,
        name: str,
        *,
        data: Mapping[str, str],
        labels: Mapping[str, str],
        annotations: Mapping[str, str] | None = None,
    ) -> StoredConfigMap:
        await self._call("create", "configmaps", name)
        if name in self._config_maps:
            raise AlreadyExists("create", "configmaps", name, namespace=self._settings.namespace)
        self.put_config_map(name, data, labels=labels, annotations=annotations)
        self._managed(self._config_maps[name], api_version="v1")
        return StoredConfigMap.from_object(self._config_maps[name])

    async def replace_config_map(
        self, current: StoredConfigMap, *, data: Mapping[str, str]
    ) -> StoredConfigMap:
        await self._call("update", "configmaps", current.name)
        stored = self._existing(self._config_maps, "update", "configmaps", current.name)
        self._check_version(stored, "update", "configmaps", current.resource_version)
        stored["data"] = dict(data)
        # A PUT replaces metadata too: what the caller sends back is what stays.
        stored["metadata"]["labels"] = dict(current.labels)
        stored["metadata"]["annotations"] = dict(current.annotations)
        self._managed(stored, api_version="v1")
        self._bump(stored)
        return StoredConfigMap.from_object(stored)

    async def read_secret(self, name: str) -> SecretData | None:
        await self._call("get", "secrets", name)
        found = self._secrets.get(name)
        return SecretData(found) if found is not None else None

    async def emit_event(
        self,
        pool: Mapping[str, Any],
        *,
        type_: EventType,
        reason: str,
        message: str,
        now: dt.datetime,
    ) -> None:
        event = events.new_event(
            pool, settings=self._settings, type_=type_, reason=reason, message=message, now=now
        )
        name = event["metadata"]["name"]
        existing = self._events.get(name)
        if existing is None:
            await self._call("create", "events", name)
            self._managed(event, api_version="v1")
            self._events[name] = event
        else:
            await self._call("patch", "events", name)
            existing.update(events.repeat_patch(existing["count"] + 1, now))
            self._managed(existing, api_version="v1")

    def watch_pools(self) -> AsyncGenerator[PoolEvent, None]:
        async def relist() -> tuple[list[dict[str, Any]], str]:
            return await self.list_pools(), str(self._revision)

        async def opened() -> None:
            await self._call("watch", self._settings.plural, None)

        return self._pool_events.watch(relist=relist, opened=opened, existing=self._pool_texts)

    def _pool_texts(self) -> list[str]:
        return [self._text(pool) for pool in self._pools.values()]

    async def get_lease(self, name: str) -> dict[str, Any] | None:
        await self._call("get", "leases", name)
        found = self._leases.get(name)
        return _clone(found) if found is not None else None

    async def create_lease(self, name: str, *, spec: Mapping[str, Any]) -> dict[str, Any]:
        await self._call("create", "leases", name)
        if name in self._leases:
            raise AlreadyExists("create", "leases", name, namespace=self._settings.namespace)
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": self._new_metadata(name, {}),
            "spec": _clone(dict(spec)),
        }
        self._managed(lease, api_version="coordination.k8s.io/v1")
        self._leases[name] = lease
        return _clone(lease)

    async def replace_lease(
        self, name: str, *, spec: Mapping[str, Any], resource_version: str
    ) -> dict[str, Any]:
        await self._call("update", "leases", name)
        lease = self._existing(self._leases, "update", "leases", name)
        self._check_version(lease, "update", "leases", resource_version)
        lease["spec"] = _clone(dict(spec))
        self._managed(lease, api_version="coordination.k8s.io/v1")
        self._bump(lease)
        return _clone(lease)

    async def close(self) -> None:
        return None

    # -- internals ----------------------------------------------------------------------------

    async def _call(self, verb: str, resource: str, name: str | None) -> None:
        wait = self._unavailable_until - asyncio.get_running_loop().time()
        if wait > 0:
            await asyncio.sleep(wait)  # the adapter's retries through a restart
        self.calls.append(Call(verb, resource, name))
        failures = self._failures.get((verb, resource))
        if failures:
            raise failures.popleft()

    def _existing(
        self, store: dict[str, dict[str, Any]], verb: str, resource: str, name: str
    ) -> dict[str, Any]:
        if name not in store:
            raise NotFound(verb, resource, name, namespace=self._settings.namespace)
        return store[name]

    def _check_version(self, obj: dict[str, Any], verb: str, resource: str, seen: str) -> None:
        if obj["metadata"]["resourceVersion"] != seen:
            raise Conflict(
                verb,
                resource,
                obj["metadata"]["name"],
                namespace=self._settings.namespace,
                resource_version=seen,
            )

    def _next_revision(self) -> str:
        self._revision += 1
        return str(self._revision)

    def _bump(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = self._next_revision()

    def _new_metadata(
        self, name: str, given: Mapping[str, Any], *, generation: bool = False
    ) -> dict[str, Any]:
        namespace = self._settings.namespace
        revision = self._next_revision()
        meta: dict[str, Any] = {
            "name": name,
            "namespace": namespace,
            # Deterministic, so a simulation replays identically; unique per incarnation.
            "uid": str(uuid.uuid5(_UID_NAMESPACE, f"{namespace}/{name}/{revision}")),
            "resourceVersion": revision,
            "creationTimestamp": to_rfc3339(self._clock.now()),
        }
        if generation:
            meta["generation"] = 1
        for key in ("labels", "annotations"):
            if given.get(key):
                meta[key] = _clone(dict(given[key]))
        return meta

    def _change_pool(
        self, pool: dict[str, Any], spec: dict[str, Any], meta: dict[str, Any]
    ) -> dict[str, Any]:
        spec_changed = spec != pool.get("spec")
        if not spec_changed and not meta:
            return self._copy(pool)  # a no-op apply changes nothing, as on a real server
        if spec_changed:
            pool["spec"] = _clone(spec)
            pool["metadata"]["generation"] += 1
        pool["metadata"].update(meta)
        self._bump(pool)
        self._notify("MODIFIED", pool)
        return self._copy(pool)

    def _keep_text(self, pool: dict[str, Any], *, status_text: str) -> None:
        """The pool's JSON text with its status already encoded: the status is most of a
        pool, and a status write would otherwise encode it twice (once to store a copy,
        once for the copies handed out). Byte for byte what `json.dumps(pool)` gives."""
        if next(reversed(pool)) != "status":
            return  # the status is not the last field: `_copy` encodes the whole pool
        head = json.dumps({key: value for key, value in pool.items() if key != "status"})
        meta = pool["metadata"]  # so `head` is never "{}"
        text = f'{head[:-1]}, "status": {status_text}}}'
        self._pool_text[meta["name"]] = (str(meta["resourceVersion"]), text)

    def _copy(self, pool: dict[str, Any]) -> dict[str, Any]:
        """A caller's own copy of a stored pool (every change bumps its resourceVersion)."""
        copied: dict[str, Any] = json.loads(self._text(pool))
        return copied

    def _text(self, pool: dict[str, Any]) -> str:
        """The stored pool's JSON text, encoded once per resourceVersion."""
        meta = pool["metadata"]
        version = str(meta["resourceVersion"])
        cached = self._pool_text.get(meta["name"])
        if cached is None or cached[0] != version:
            cached = (version, json.dumps(pool))
            self._pool_text[meta["name"]] = cached
        return cached[1]

    def _notify(self, type_: str, pool: dict[str, Any]) -> None:
        revision = int(pool["metadata"]["resourceVersion"])
        self._pool_events.publish(type_, revision, self._text(pool))

    def _managed(self, obj: dict[str, Any], *, api_version: str, subresource: str = "") -> None:
        """Record the controller's write in `obj`'s managedFields."""
        managed_fields.record(
            obj,
            manager=self._settings.field_manager,
            api_version=api_version,
            time=to_rfc3339(self._clock.now()),
            subresource=subresource,
        )


def _is_a_kube_api(memory: MemoryKubeApi) -> KubeApi:
    """Never called: mypy checks here that the in-memory twin satisfies the protocol."""
    return memory
