"""The two calls `rpp delete-pools` makes: delete a RunPodPool by name, and read it back.

Where it sits: an adapter beside `rpp.adapters.kube.real`, used only by the Helm chart's
pre-delete hook (rpp/commands/delete_pools.py), never by the controller. The controller
never deletes a pool, so these grants (`HOOK_PERMISSIONS`) belong to the hook's own Role
and stay out of the controller's (`REQUIRED_PERMISSIONS`); a test keeps the chart's hook
Role equal to them.

Deleting a pool that carries the controller's finalizer only marks it (deletionTimestamp);
the controller then applies spec.deletionPolicy and removes the finalizer, and the pool
goes. Reading it back tells whether it is gone yet, and if not, why (its conditions).
Errors are the adapter's typed ones, naming the verb and the resource.
"""

from __future__ import annotations

from typing import Any, Protocol

from kubernetes.aio import client

from rpp.adapters.kube import transport
from rpp.adapters.kube.api import KubeSettings, NotFound, Permission


def hook_permissions(crd_group: str) -> frozenset[Permission]:
    """What the pre-delete hook's Role must grant: get and delete on the pools, no more."""
    return frozenset(Permission(verb, crd_group, "runpodpools") for verb in ("get", "delete"))


class PoolDeletion(Protocol):
    """Delete pools by name and read them back; `rpp.sim` and the tests have their twin."""

    @property
    def settings(self) -> KubeSettings: ...

    async def delete(self, name: str) -> bool:
        """Ask the API server to delete the pool; False when it did not exist."""
        ...

    async def read(self, name: str) -> dict[str, Any] | None:
        """The pool as stored, or None once it is gone."""
        ...


class RealPoolDeletion:
    """`PoolDeletion` against the API server, through the official client."""

    def __init__(self, api_client: client.ApiClient, settings: KubeSettings) -> None:
        self._api_client = api_client
        self._custom = client.CustomObjectsApi(api_client)
        self._settings = settings

    @property
    def settings(self) -> KubeSettings:
        return self._settings

    async def close(self) -> None:
        await self._api_client.close()  # type: ignore[no-untyped-call]

    async def delete(self, name: str) -> bool:
        s = self._settings
        request = self._custom.delete_namespaced_custom_object_without_preload_content(
            s.crd_group,
            s.crd_version,
            s.namespace,
            s.plural,
            name,
            _request_timeout=s.request_timeout,
        )
        try:
            await self._send("delete", name, request)
        except NotFound:
            return False
        return True

    async def read(self, name: str) -> dict[str, Any] | None:
        s = self._settings
        request = self._custom.get_namespaced_custom_object_without_preload_content(
            s.crd_group,
            s.crd_version,
            s.namespace,
            s.plural,
            name,
            _request_timeout=s.request_timeout,
        )
        try:
            return await self._send("get", name, request)
        except NotFound:
            return None

    async def _send(self, verb: str, name: str, request: Any) -> dict[str, Any]:
        op = transport.Op(verb, self._settings.plural, name, self._settings.namespace)
        return await transport.send(op, request, host=self._api_client.configuration.host)


def _is_a_pool_deletion(real: RealPoolDeletion) -> PoolDeletion:
    """Never called: mypy checks here that the real adapter satisfies the protocol."""
    return real
