"""The Kubernetes adapter on the official `kubernetes` client's asyncio API (`kubernetes.aio`).

This is the only code that talks to the API server. It sends each request through the
client's `ApiClient` (which authenticates, refreshing a ServiceAccount token as it rotates,
applies the cluster's TLS settings and serialises), naming the REST path itself, and reads the
server's JSON itself: objects come back as the server wrote them (dicts, timestamps untouched),
the same shape `rpp.sim.kube_memory` returns.

Why not the client's typed API classes (`CoreV1Api`, `CustomObjectsApi`, ...): constructing
them imports every model of their API groups, hundreds of pydantic classes this adapter never
uses, which was about 30 MiB of the controller's memory, a third of it. The paths below are
the dozen calls of `REQUIRED_PERMISSIONS`.

Status goes through the status subresource with the resourceVersion the caller read, so a
write never lands on a pool someone changed meanwhile: the server answers 409 and this adapter
raises `Conflict` for the reconciler to re-read and re-decide. HTTP errors become the typed
errors of `rpp.adapters.kube.api`, whose messages name the verb and resource; the server's response
headers and bodies are never put into them. `REQUIRED_PERMISSIONS` lists every call made here.

Every write names its writer (`fieldManager`, and the User-Agent the API server falls back
on): the objects' managedFields say `runpod-pool-controller` or `rpp-nginx-reloader`, not
the client library's `OpenAPI-Generator`. Passing refusals of an API server that restarts
(403 for a few seconds, 429, 5xx) are waited out (rpp/adapters/kube/transient.py); the
watches keep up through bookmarks and re-read the state on 410 Gone
(rpp/adapters/kube/watching.py).
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any
from urllib.parse import quote

import aiohttp
from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.configuration import Configuration

from rpp import __version__
from rpp.adapters.clock import ServerDates
from rpp.adapters.kube import events, transport, watch_stream, watching
from rpp.adapters.kube.api import (
    ALL_NAMESPACES,
    AlreadyExists,
    ConfigMapEvent,
    EventType,
    KubeApi,
    KubeSettings,
    NotFound,
    PoolEvent,
    SecretData,
    StoredConfigMap,
    describe_target,
)
from rpp.adapters.kube.connect import direct
from rpp.adapters.kube.transient import Patience, TransientAnswers

_EVENT_CACHE_SIZE = 1024
"""Event names remembered with their count; a forgotten one costs one extra GET on repeat."""
_MERGE_PATCH = "application/merge-patch+json"
_CRD_HINT = "is the RunPodPool CRD installed? apply deploy/crd.yaml"
_LEASE_TYPE = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease"}
_JSON = "application/json"
_WRITES = frozenset({"POST", "PUT", "PATCH"})


class RealKubeApi:
    """`KubeApi` against a real API server (or kmock in the tests)."""

    def __init__(
        self,
        api_client: ApiClient,
        settings: KubeSettings,
        *,
        patience: Patience | None = None,
        dates: ServerDates | None = None,
    ) -> None:
        self._api_client = api_client
        self._settings = settings
        # The controller's clock checks itself against each answer's Date: no extra request.
        self._dates = dates
        self._answers = TransientAnswers(patience)
        # The API server names a write's manager after the User-Agent when the request
        # gives no fieldManager; and its audit log shows it.
        api_client.user_agent = f"{settings.field_manager}/{__version__}"
        ns = quote(settings.namespace, safe="")
        self._pools = f"/apis/{settings.crd_group}/{settings.crd_version}/namespaces/{ns}/"
        if settings.namespace == ALL_NAMESPACES:  # NAMESPACES=*: list and watch cluster-wide
            self._pools = f"/apis/{settings.crd_group}/{settings.crd_version}/"
        self._pools += settings.plural
        self._core = f"/api/v1/namespaces/{ns}"
        self._leases = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
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
        patience: Patience | None = None,
        dates: ServerDates | None = None,
    ) -> RealKubeApi:
        """An adapter for an explicit API server URL and bearer token."""
        configuration = direct(Configuration(host=host.rstrip("/"), ssl_ca_cert=ca_file))
        configuration.verify_ssl = verify_ssl
        if token:
            configuration.api_key["BearerToken"] = f"Bearer {token}"
        return cls(ApiClient(configuration), settings, patience=patience, dates=dates)

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

    async def list_pools(self) -> list[dict[str, Any]]:
        items, _version = await self._list_pools_at()
        return items

    async def _list_pools_at(self) -> tuple[list[dict[str, Any]], str]:
        """The pools, with the list's resourceVersion (where a watch after it starts)."""
        listed = await self._call("list", self._settings.plural, None, "GET", self._pools)
        version = str((listed.get("metadata") or {}).get("resourceVersion", ""))
        return list(listed.get("items") or []), version

    async def get_pool(self, name: str) -> dict[str, Any]:
        return await self._call(
            "get", self._settings.plural, name, "GET", f"{self._pools}/{_segment(name)}"
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
            "PUT",
            f"{self._pools}/{_segment(name)}/status",
            body=body,
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
            "PATCH",
            f"{self._pools}/{_segment(name)}",
            body=body,
            resource_version=resource_version,
            content_type=_MERGE_PATCH,
        )

    async def annotate_pool(self, name: str, *, annotations: Mapping[str, str]) -> dict[str, Any]:
        body = {"metadata": {"annotations": dict(annotations)}}
        return await self._call(
            "patch",
            self._settings.plural,
            name,
            "PATCH",
            f"{self._pools}/{_segment(name)}",
            body=body,
            content_type=_MERGE_PATCH,
        )

    async def watch_pools(self) -> AsyncGenerator[PoolEvent, None]:
        """A list, then a watch from the list's resourceVersion (watching.py)."""
        op = self._op("watch", self._settings.plural, None)
        changes = watching.reflect(
            open_watch=lambda version: self._stream(op, self._pools, (), version),
            relist=self._list_pools_at,
            what=describe_target("runpodpools", None, self._settings.namespace),
        )
        async with aclosing(changes):
            async for type_, pool in changes:
                yield PoolEvent(type_, pool)

    async def watch_config_map(self, name: str) -> AsyncGenerator[ConfigMapEvent, None]:
        """One ConfigMap as ADDED (when it exists), then each change, until cancelled.

        A watch of the collection narrowed to one name by a field selector, which is what
        RBAC's resourceNames allow with `watch` alone: the nginx reloader's Role names
        nothing but its slots ConfigMap, and grants no `list`, so after a 410 the current
        state comes from a watch from no version (watching.py).
        """
        op = self._op("watch", "configmaps", name)
        path = f"{self._core}/configmaps"
        selector = [("fieldSelector", f"metadata.name={name}")]
        changes = watching.reflect(
            open_watch=lambda version: self._stream(op, path, selector, version),
            relist=None,
            what=f"configmaps {name!r} in namespace {self._settings.namespace}",
        )
        async with aclosing(changes):
            async for type_, obj in changes:
                config_map = StoredConfigMap.from_object(obj)
                if config_map.name == name:  # a server that ignores the selector sends all
                    yield ConfigMapEvent(type_, config_map)

    def _stream(
        self,
        op: transport.Op,
        path: str,
        query: Sequence[tuple[str, str]],
        version: str | None,
    ) -> AsyncGenerator[dict[str, Any], None]:
        """One watch stream of `path` from `version` (watch_stream.py)."""

        async def send(sent: Sequence[tuple[str, str]], timeout: aiohttp.ClientTimeout) -> Any:
            return await self._request("GET", path, query=sent, timeout=timeout)

        return watch_stream.events(
            send=send,
            answers=self._answers,
            op=op,
            query=query,
            version=version,
            host=self._api_client.configuration.host,
            connect_timeout=self._settings.request_timeout,
        )

    # -- ConfigMaps and Secrets ---------------------------------------------------------------

    async def read_config_map(self, name: str) -> StoredConfigMap | None:
        found = await self._read("configmaps", name)
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
            "create", "configmaps", name, "POST", f"{self._core}/configmaps", body=body
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
            "PUT",
            f"{self._core}/configmaps/{_segment(current.name)}",
            body=body,
            resource_version=current.resource_version,
        )
        return StoredConfigMap.from_object(replaced)

    async def read_secret(self, name: str) -> SecretData | None:
        found = await self._read("secrets", name)
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
            await self._call("create", "events", name, "POST", f"{self._core}/events", body=event)
            self._remember_event(name, 1)
        except AlreadyExists:
            # A previous run of the controller emitted it: continue its count.
            existing = await self._read("events", name)
            count = int((existing or {}).get("count") or 1)
            await self._patch_event(name, count + 1, now)

    async def _patch_event(self, name: str, count: int, now: dt.datetime) -> None:
        await self._call(
            "patch",
            "events",
            name,
            "PATCH",
            f"{self._core}/events/{_segment(name)}",
            body=events.repeat_patch(count, now),
            content_type=_MERGE_PATCH,
        )
        self._remember_event(name, count)

    def _remember_event(self, name: str, count: int) -> None:
        self._event_counts[name] = count
        self._event_counts.move_to_end(name)
        while len(self._event_counts) > _EVENT_CACHE_SIZE:
            self._event_counts.popitem(last=False)

    # -- Leases -------------------------------------------------------------------------------

    async def get_lease(self, name: str) -> dict[str, Any] | None:
        return await self._read("leases", name)

    async def create_lease(self, name: str, *, spec: Mapping[str, Any]) -> dict[str, Any]:
        body = {**_LEASE_TYPE, "metadata": {"name": name}, "spec": dict(spec)}
        return await self._call("create", "leases", name, "POST", self._leases, body=body)

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
            "PUT",
            f"{self._leases}/{_segment(name)}",
            body=body,
            resource_version=resource_version,
        )

    # -- transport ----------------------------------------------------------------------------

    def _op(self, verb: str, resource: str, name: str | None) -> transport.Op:
        # A whole listing of pools that is not found means the CRD itself is missing.
        listing = resource == self._settings.plural and name is None
        return transport.Op(
            verb,
            resource,
            name,
            self._settings.namespace,
            missing_hint=_CRD_HINT if listing else "",
            rbac_hint=self._settings.rbac_hint,
        )

    async def _call(
        self,
        verb: str,
        resource: str,
        name: str | None,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        resource_version: str | None = None,
        content_type: str = _JSON,
    ) -> dict[str, Any]:
        """One request; the decoded answer, or the typed error for `verb` on `resource`.

        Passing refusals are retried (transient.py); a write names its field manager.
        """
        op = self._op(verb, resource, name)
        query = [("fieldManager", self._settings.field_manager)] if method in _WRITES else []

        async def attempt() -> dict[str, Any]:
            dates = self._dates
            sent = dates.elapsed() if dates is not None else 0.0
            request = self._request(
                method,
                path,
                query=query,
                body=body,
                content_type=content_type,
                timeout=self._settings.request_timeout,
            )
            return await transport.send(
                op,
                request,
                host=self._api_client.configuration.host,
                resource_version=resource_version,
                on_headers=(
                    None
                    if dates is None
                    else lambda headers: dates.server_answered(headers.get("Date"), sent=sent)
                ),
            )

        return await self._answers.call(op, attempt)

    async def _request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, Any]] = (),
        body: Mapping[str, Any] | None = None,
        content_type: str = _JSON,
        timeout: float | aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        """Send through the client (its auth, TLS and retry settings); the raw response.

        The body is plain JSON already (strings, numbers, lists, dicts), so it goes
        straight to the client's `json.dumps`, past `sanitize_for_serialization`, the
        generated client's walk for its model objects: a tenth of the controller's CPU at
        50 pools, one walk of every pool's status a loop.
        """
        headers = {"Accept": _JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        serialized = await self._api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=list(query),
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        verb, url, sent_headers, _, post = serialized
        answer = await self._api_client.call_api(
            verb,
            url,
            header_params=sent_headers,
            body=dict(body) if body is not None else None,
            post_params=post,
            _request_timeout=timeout,
        )
        response: aiohttp.ClientResponse = answer.response
        return response

    async def _read(self, resource: str, name: str) -> dict[str, Any] | None:
        """GET one namespaced object; None when it does not exist."""
        base = self._leases if resource == "leases" else f"{self._core}/{resource}"
        try:
            return await self._call("get", resource, name, "GET", f"{base}/{_segment(name)}")
        except NotFound:
            return None


def _segment(name: str) -> str:
    """An object name as one path segment."""
    return quote(name, safe="")


def _is_a_kube_api(real: RealKubeApi) -> KubeApi:
    """Never called: mypy checks here that the real adapter satisfies the protocol."""
    return real
