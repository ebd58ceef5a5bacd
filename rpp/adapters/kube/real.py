"""The Kubernetes adapter on the official `kubernetes` client's asyncio API (`kubernetes.aio`).

This is the only code that talks to the API server. It speaks through the client's typed
operations (which build the URLs, authenticate and serialise) in their
`*_without_preload_content` form, and reads the server's JSON itself: objects come back as the
server wrote them (dicts, timestamps untouched), the same shape `rpp.sim.kube_memory` returns.

Status goes through the status subresource with the resourceVersion the caller read, so a
write never lands on a pool someone changed meanwhile: the server answers 409 and this adapter
raises `Conflict` for the reconciler to re-read and re-decide. HTTP errors become the typed
errors of `rpp.adapters.kube.api`, whose messages name the verb and resource; the server's response
headers and bodies are never put into them. `REQUIRED_PERMISSIONS` lists every call made here.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import aiohttp
from kubernetes.aio import client, watch

from rpp.adapters.kube import events, transport
from rpp.adapters.kube.api import (
    AlreadyExists,
    EventType,
    KubeApi,
    KubeSettings,
    NotFound,
    PoolEvent,
    SecretData,
    StoredConfigMap,
)

_EVENT_CACHE_SIZE = 1024
"""Event names remembered with their count; a forgotten one costs one extra GET on repeat."""
_MERGE_PATCH = "application/merge-patch+json"
_CRD_HINT = "is the RunPodPool CRD installed? apply deploy/crd.yaml"
_LEASE_TYPE = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}


class RealKubeApi:
    """`KubeApi` against a real API server (or kmock in the tests)."""

    def __init__(self, api_client: client.ApiClient, settings: KubeSettings) -> None:
        self._api_client = api_client
        self._settings = settings
        self._custom = client.CustomObjectsApi(api_client)
        self._core = client.CoreV1Api(api_client)
        self._coordination = client.CoordinationV1Api(api_client)
        self._event_counts: OrderedDict[str, int] = OrderedDict()

    @classmethod
    def for_host(
        cls,
        *,
        host: str,
        settings: KubeSettings,
        token: str | None = None,
        ca_file: str | None = None,
        verify_ssl: bool = True,
    ) -> RealKubeApi:
        """An adapter for an explicit API server URL and bearer token."""
        configuration = client.Configuration(host=host.rstrip("/"), ssl_ca_cert=ca_file)
        configuration.verify_ssl = verify_ssl
        if token:
            configuration.api_key["BearerToken"] = f"Bearer {token}"
        return cls(client.ApiClient(configuration), settings)

    def __repr__(self) -> str:
        host = self._api_client.configuration.host
        return f"RealKubeApi(host={host!r}, namespace={self._settings.namespace!r})"

    @property
    def settings(self) -> KubeSettings:
        return self._settings

    async def close(self) -> None:
        await self._api_client.close()  # type: ignore[no-untyped-call]

    async def __aenter__(self) -> RealKubeApi:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- RunPodPools --------------------------------------------------------------------------

    def _pool_path(self) -> tuple[str, str, str, str]:
        s = self._settings
        return (s.crd_group, s.crd_version, s.namespace, s.plural)

    async def list_pools(self) -> list[dict[str, Any]]:
        listed = await self._call(
            "list",
            self._settings.plural,
            None,
            self._custom.list_namespaced_custom_object_without_preload_content,
            *self._pool_path(),
        )
        return list(listed.get("items") or [])

    async def get_pool(self, name: str) -> dict[str, Any]:
        return await self._call(
            "get",
            self._settings.plural,
            name,
            self._custom.get_namespaced_custom_object_without_preload_content,
            *self._pool_path(),
            name,
        )

    async def replace_pool_status(
        self, name: str, *, status: Mapping[str, Any], resource_version: str
    ) -> dict[str, Any]:
        body = {
            "apiVersion": self._settings.pool_api_version,
            "kind": "RunPodPool",
            # The resourceVersion makes this a compare-and-swap: stale means 409, never a
            # blind overwrite of what another writer (or a newer spec) put there.
            "metadata": {"name": name, "resourceVersion": resource_version},
            "status": dict(status),
        }
        return await self._call(
            "update",
            f"{self._settings.plural}/status",
            name,
            self._custom.replace_namespaced_custom_object_status_without_preload_content,
            *self._pool_path(),
            name,
            body,
            resource_version=resource_version,
        )

    async def set_pool_finalizers(
        self, name: str, *, finalizers: Sequence[str], resource_version: str
    ) -> dict[str, Any]:
        # A merge patch replaces the whole list; the resourceVersion in it makes the API
        # server refuse (409) when the pool changed since it was read, so a finalizer
        # someone else added in between is never lost.
        body = {"metadata": {"resourceVersion": resource_version, "finalizers": list(finalizers)}}
        return await self._call(
            "patch",
            self._settings.plural,
            name,
            self._custom.patch_namespaced_custom_object_without_preload_content,
            *self._pool_path(),
            name,
            body,
            resource_version=resource_version,
            _content_type=_MERGE_PATCH,
        )

    async def watch_pools(self) -> AsyncGenerator[PoolEvent, None]:
        watcher = watch.Watch()  # type: ignore[no-untyped-call]
        # The client's watch re-connects from the last resourceVersion when a stream ends or
        # times out, and re-lists once on 410 Gone; anything else reaches us as ApiException.
        stream = watcher.stream(  # type: ignore[no-untyped-call]
            self._custom.list_namespaced_custom_object, *self._pool_path()
        )
        try:
            async for event in stream:
                yield PoolEvent(str(event["type"]), event["raw_object"])
        except client.ApiException as error:
            op = self._op("watch", self._settings.plural, None)
            raise transport.error_for(
                op, status=error.status or 0, message=error.reason or ""
            ) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            op = self._op("watch", self._settings.plural, None)
            host = self._api_client.configuration.host
            raise transport.unreachable(op, host=host, error=error) from None
        finally:
            await watcher.close()  # type: ignore[no-untyped-call]

    # -- ConfigMaps and Secrets ---------------------------------------------------------------

    async def read_config_map(self, name: str) -> StoredConfigMap | None:
        found = await self._read(
            "configmaps", name, self._core.read_namespaced_config_map_without_preload_content
        )
        return None if found is None else StoredConfigMap.from_object(found)

    async def create_config_map(
        self,
        name: str,
        *,
        data: Mapping[str, str],
        labels: Mapping[str, str],
        annotations: Mapping[str, str] | None = None,
    ) -> StoredConfigMap:
        metadata = {"name": name, "labels": dict(labels), "annotations": dict(annotations or {})}
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": dict(data)}
        created = await self._call(
            "create",
            "configmaps",
            name,
            self._core.create_namespaced_config_map_without_preload_content,
            self._settings.namespace,
            client.V1ConfigMap.model_validate(body),
        )
        return StoredConfigMap.from_object(created)

    async def replace_config_map(
        self, current: StoredConfigMap, *, data: Mapping[str, str]
    ) -> StoredConfigMap:
        # PUT replaces metadata too: send back the labels and annotations that were read, so
        # Helm's ownership labels survive the controller's rewrite.
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": current.name,
                "resourceVersion": current.resource_version,
                "labels": dict(current.labels),
                "annotations": dict(current.annotations),
            },
            "data": dict(data),
        }
        replaced = await self._call(
            "update",
            "configmaps",
            current.name,
            self._core.replace_namespaced_config_map_without_preload_content,
            current.name,
            self._settings.namespace,
            client.V1ConfigMap.model_validate(body),
            resource_version=current.resource_version,
        )
        return StoredConfigMap.from_object(replaced)

    async def read_secret(self, name: str) -> SecretData | None:
        found = await self._read(
            "secrets", name, self._core.read_namespaced_secret_without_preload_content
        )
        if found is None:
            return None
        return SecretData.decode(name, self._settings.namespace, found.get("data") or {})

    # -- Events -------------------------------------------------------------------------------

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
        count = self._event_counts.get(name)
        if count is not None:
            try:
                await self._patch_event(name, count + 1, now)
                return
            except NotFound:
                pass  # the API server expired it (Events live about an hour): start again
        try:
            await self._call(
                "create",
                "events",
                name,
                self._core.create_namespaced_event_without_preload_content,
                self._settings.namespace,
                client.CoreV1Event.model_validate(event),
            )
            self._remember_event(name, 1)
        except AlreadyExists:
            # A previous run of the controller emitted it: continue its count.
            existing = await self._read(
                "events", name, self._core.read_namespaced_event_without_preload_content
            )
            count = int((existing or {}).get("count") or 1)
            await self._patch_event(name, count + 1, now)

    async def _patch_event(self, name: str, count: int, now: dt.datetime) -> None:
        await self._call(
            "patch",
            "events",
            name,
            self._core.patch_namespaced_event_without_preload_content,
            name,
            self._settings.namespace,
            events.repeat_patch(count, now),
            _content_type=_MERGE_PATCH,
        )
        self._remember_event(name, count)

    def _remember_event(self, name: str, count: int) -> None:
        self._event_counts[name] = count
        self._event_counts.move_to_end(name)
        while len(self._event_counts) > _EVENT_CACHE_SIZE:
            self._event_counts.popitem(last=False)

    # -- Leases -------------------------------------------------------------------------------

    async def get_lease(self, name: str) -> dict[str, Any] | None:
        return await self._read(
            "leases", name, self._coordination.read_namespaced_lease_without_preload_content
        )

    async def create_lease(self, name: str, *, spec: Mapping[str, Any]) -> dict[str, Any]:
        body = {**_LEASE_TYPE, "metadata": {"name": name}, "spec": dict(spec)}
        return await self._call(
            "create",
            "leases",
            name,
            self._coordination.create_namespaced_lease_without_preload_content,
            self._settings.namespace,
            client.V1Lease.model_validate(body),
        )

    async def replace_lease(
        self, name: str, *, spec: Mapping[str, Any], resource_version: str
    ) -> dict[str, Any]:
        body = {
            **_LEASE_TYPE,
            "metadata": {"name": name, "resourceVersion": resource_version},
            "spec": dict(spec),
        }
        return await self._call(
            "update",
            "leases",
            name,
            self._coordination.replace_namespaced_lease_without_preload_content,
            name,
            self._settings.namespace,
            client.V1Lease.model_validate(body),
            resource_version=resource_version,
        )

    # -- transport ----------------------------------------------------------------------------

    def _op(self, verb: str, resource: str, name: str | None) -> transport.Op:
        # A whole listing of pools that is not found means the CRD itself is missing.
        listing = resource == self._settings.plural and name is None
        return transport.Op(
            verb, resource, name, self._settings.namespace, _CRD_HINT if listing else ""
        )

    async def _call(
        self,
        verb: str,
        resource: str,
        name: str | None,
        operation: Callable[..., Awaitable[Any]],
        *args: Any,
        resource_version: str | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Call one of the client's `*_without_preload_content` operations."""
        request = operation(*args, _request_timeout=self._settings.request_timeout, **kwargs)
        return await transport.send(
            self._op(verb, resource, name),
            request,
            host=self._api_client.configuration.host,
            resource_version=resource_version,
        )

    async def _read(
        self, resource: str, name: str, operation: Callable[..., Awaitable[Any]]
    ) -> dict[str, Any] | None:
        """GET one namespaced object; None when it does not exist."""
        try:
            return await self._call(
                "get", resource, name, operation, name, self._settings.namespace
            )
        except NotFound:
            return None


def _is_a_kube_api(real: RealKubeApi) -> KubeApi:
    """Never called: mypy checks here that the real adapter satisfies the protocol."""
    return real
