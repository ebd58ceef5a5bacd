"""The Kubernetes adapter's interface: what observe reads and act writes in the cluster.

Observe lists RunPodPools and reads each pool's slots ConfigMap and env Secret; act writes the
pool's status (through the status subresource, guarded by the resourceVersion it read),
adds and removes the pool's finalizer, creates and rewrites the slots ConfigMap and emits
Events; leader election (rpp/controller/leader.py) uses the Lease calls and the pool watch.
Two implementations serve this protocol: `rpp.adapters.kube.real` on the official
`kubernetes` client, and `rpp.sim.kube_memory` for the simulator and fast tests.

The adapter never decides. In particular it never resolves a conflict: a write with a stale
resourceVersion raises `Conflict`, and the reconciler re-reads, re-decides and writes again.
Every error names the verb and the resource, so a missing RBAC rule reads as a to-do.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

DEFAULT_CRD_GROUP = "runpodpool.ownego.com"
CRD_VERSION = "v1alpha1"
POOL_PLURAL = "runpodpools"
POOL_KIND = "RunPodPool"
COMPONENT = "runpod-pool-controller"
RBAC_HINT = "the controller's Role lacks this; apply deploy/rbac.yaml"
ALL_NAMESPACES = "*"
"""KubeSettings.namespace of an adapter that lists and watches pools in every namespace
(NAMESPACES=*); only its list_pools and watch_pools are used."""

EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True)
class KubeSettings:
    """Where the controller's objects live: NAMESPACE and CRD_GROUP from the environment."""

    namespace: str
    crd_group: str = DEFAULT_CRD_GROUP
    crd_version: str = CRD_VERSION
    plural: str = POOL_PLURAL
    component: str = COMPONENT
    """Reported as the Events' source, so `kubectl describe rpp` says who spoke."""
    request_timeout: float = 10.0
    """Seconds one API call may take; a hung API server must not stall the loop forever."""
    rbac_hint: str = RBAC_HINT
    """Said when a refusal (403) lasts: which Role to fix, and where it is shipped."""

    @property
    def field_manager(self) -> str:
        """The name every write is recorded under in the objects' managedFields (the
        `fieldManager` query parameter), so `kubectl get -o yaml --show-managed-fields`
        says who wrote what."""
        return self.component

    @property
    def pool_api_version(self) -> str:
        return f"{self.crd_group}/{self.crd_version}"

    @property
    def finalizer(self) -> str:
        """The finalizer on every Manage pool: it applies spec.deletionPolicy before the
        pool goes (rpp/decide/deletion.py)."""
        return f"{self.crd_group}/deletion-policy"


def describe_target(resource: str, name: str | None, namespace: str) -> str:
    """`configmaps 'inference-nginx-slots' in namespace runpod`, for messages."""
    named = f" {name!r}" if name else ""
    where = "every namespace" if namespace == ALL_NAMESPACES else f"namespace {namespace}"
    return f"{resource}{named} in {where}"


class KubeError(Exception):
    """A Kubernetes API call failed; the message says which call and what to do."""

    retry_after: float | None = None
    """Seconds the API server asked the client to wait (its Retry-After header), if any."""

    def __init__(
        self,
        verb: str,
        resource: str,
        name: str | None = None,
        *,
        namespace: str,
        message: str,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.verb = verb
        self.resource = resource
        self.name = name
        self.namespace = namespace
        self.status = status


class Forbidden(KubeError):
    """403 that lasted: the controller's RBAC lacks `verb` on `resource`.

    An API server that has just started refuses everything for a few seconds, until its
    authorizer has read the RBAC rules; the real adapter retries a 403 for a while
    (rpp/adapters/kube/transient.py) and raises this only when it lasts, saying how long.
    """

    def __init__(
        self,
        verb: str,
        resource: str,
        name: str | None = None,
        *,
        namespace: str,
        hint: str = RBAC_HINT,
        refused_for_s: float | None = None,
    ) -> None:
        target = describe_target(resource, name, namespace)
        lasted = "" if refused_for_s is None else f", refused for {refused_for_s:.0f}s"
        message = f"forbidden: cannot {verb} {target}{lasted}: {hint}"
        super().__init__(verb, resource, name, namespace=namespace, message=message, status=403)


class NotFound(KubeError):
    """404: the object (or, for a list, the resource type itself) does not exist."""

    def __init__(
        self, verb: str, resource: str, name: str | None = None, *, namespace: str, hint: str = ""
    ) -> None:
        target = describe_target(resource, name, namespace)
        tail = f"; {hint}" if hint else ""
        message = f"not found: cannot {verb} {target}: it does not exist{tail}"
        super().__init__(verb, resource, name, namespace=namespace, message=message, status=404)


class Conflict(KubeError):
    """409: the object changed since it was read; re-read it, decide again, write again."""

    def __init__(
        self,
        verb: str,
        resource: str,
        name: str | None = None,
        *,
        namespace: str,
        resource_version: str | None = None,
    ) -> None:
        target = describe_target(resource, name, namespace)
        seen = f" (written over resourceVersion {resource_version})" if resource_version else ""
        message = (
            f"conflict: cannot {verb} {target}: it changed since it was read{seen}; "
            "re-read it and decide again"
        )
        super().__init__(verb, resource, name, namespace=namespace, message=message, status=409)
        self.resource_version = resource_version


class AlreadyExists(Conflict):
    """409 on create: another writer (a human, Helm, another replica) created it first."""

    def __init__(
        self, verb: str, resource: str, name: str | None = None, *, namespace: str
    ) -> None:
        super().__init__(verb, resource, name, namespace=namespace)
        target = describe_target(resource, name, namespace)
        self.args = (f"already exists: cannot {verb} {target}: another writer created it",)


class Permission(NamedTuple):
    """One RBAC grant the real adapter needs: a verb on a resource of an API group."""

    verb: str
    group: str
    resource: str


def required_permissions(crd_group: str = DEFAULT_CRD_GROUP) -> frozenset[Permission]:
    """Every (verb, group, resource) `rpp.adapters.kube.real` can call, to compare with
    deploy/rbac.yaml."""
    grants = {
        # patch: the pool's finalizer (metadata.finalizers) and the annotation that keeps
        # an unreadable status when it is rebuilt; never its spec.
        (crd_group, POOL_PLURAL): ("get", "list", "watch", "patch"),
        (crd_group, f"{POOL_PLURAL}/status"): ("update",),
        ("", "configmaps"): ("get", "create", "update"),
        ("", "secrets"): ("get",),
        # get: after a restart the dedup cache is empty and the Event may already exist.
        ("", "events"): ("create", "patch", "get"),
        ("coordination.k8s.io", "leases"): ("get", "create", "update"),
    }
    return frozenset(
        Permission(verb, group, resource)
        for (group, resource), verbs in grants.items()
        for verb in verbs
    )


REQUIRED_PERMISSIONS = required_permissions()


def reloader_permissions() -> frozenset[Permission]:
    """Every (verb, group, resource) `rpp nginx-reloader` calls: its slots ConfigMap (one
    name: resourceNames) and the Events it reports a rejected config with."""
    grants = {
        ("", "configmaps"): ("get", "watch"),
        ("", "events"): ("create", "patch", "get"),
    }
    return frozenset(
        Permission(verb, group, resource)
        for (group, resource), verbs in grants.items()
        for verb in verbs
    )


class SecretData(Mapping[str, str]):
    """A Secret's decoded values; its repr names the keys only, so a log line cannot leak them."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = dict(values)

    def __getitem__(self, key: str) -> str:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"SecretData(keys={sorted(self._values)})"

    __str__ = __repr__

    @classmethod
    def decode(cls, name: str, namespace: str, data: Mapping[str, str]) -> SecretData:
        """A Secret's `data`, base64-decoded; a value that is not UTF-8 text is refused."""
        values: dict[str, str] = {}
        for key, encoded in data.items():
            try:
                values[key] = base64.b64decode(encoded, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                # Name the key, never the value: the value is the secret.
                target = describe_target("secrets", name, namespace)
                raise KubeError(
                    "get",
                    "secrets",
                    name,
                    namespace=namespace,
                    message=f"{target}: key {key!r} is not UTF-8 text; pod env values must be "
                    "text, so store it as a string",
                ) from None
        return cls(values)


@dataclass(frozen=True)
class StoredConfigMap:
    """A ConfigMap as read, with what a conflict-safe, label-preserving replace needs."""

    name: str
    data: Mapping[str, str]
    resource_version: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    uid: str = ""  # what an Event about this ConfigMap names it by

    @classmethod
    def from_object(cls, config_map: Mapping[str, Any]) -> StoredConfigMap:
        """From the ConfigMap as the API server returns it."""
        meta = config_map.get("metadata") or {}
        return cls(
            name=meta.get("name", ""),
            data=dict(config_map.get("data") or {}),
            resource_version=str(meta.get("resourceVersion", "")),
            labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
            uid=str(meta.get("uid", "")),
        )

    def as_event_subject(self) -> dict[str, Any]:
        """The ConfigMap as `emit_event` takes the object an Event is about."""
        meta = {"name": self.name, "uid": self.uid}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


class ConfigMapEvent(NamedTuple):
    """One watch notification about a ConfigMap: ADDED, MODIFIED or DELETED."""

    type: str
    config_map: StoredConfigMap


class PoolEvent(NamedTuple):
    """One watch notification: ADDED, MODIFIED or DELETED, with the pool as it is now."""

    type: str
    pool: dict[str, Any]


class KubeApi(Protocol):
    """The cluster as the controller sees it, scoped to one namespace."""

    @property
    def settings(self) -> KubeSettings: ...

    async def list_pools(self) -> list[dict[str, Any]]:
        """Every RunPodPool in the namespace, whole (metadata, spec, status)."""
        ...

    async def get_pool(self, name: str) -> dict[str, Any]:
        """One RunPodPool; `NotFound` when it is gone."""
        ...

    async def replace_pool_status(
        self, name: str, *, status: Mapping[str, Any], resource_version: str
    ) -> dict[str, Any]:
        """Write status through the status subresource, only over `resource_version`.

        Raises `Conflict` when the pool changed since it was read. Returns the updated pool,
        whose new resourceVersion the next write must carry.
        """
        ...

    async def set_pool_finalizers(
        self, name: str, *, finalizers: Sequence[str], resource_version: str
    ) -> dict[str, Any]:
        """Set the pool's `metadata.finalizers` (the whole list), only over `resource_version`.

        Raises `Conflict` when the pool changed since it was read, so a finalizer another
        controller added meanwhile is never dropped. Returns the pool as the server answered;
        when the last finalizer of a pool being deleted goes, the server deletes the pool.
        """
        ...

    async def annotate_pool(self, name: str, *, annotations: Mapping[str, str]) -> dict[str, Any]:
        """Set these annotations on the pool (a JSON merge patch of its metadata)."""
        ...

    async def read_config_map(self, name: str) -> StoredConfigMap | None:
        """The ConfigMap, or None when it does not exist."""
        ...

    async def create_config_map(
        self,
        name: str,
        *,
        data: Mapping[str, str],
        labels: Mapping[str, str],
        annotations: Mapping[str, str] | None = None,
    ) -> StoredConfigMap:
        """Create it; `AlreadyExists` when someone else did first."""
        ...

    async def replace_config_map(
        self, current: StoredConfigMap, *, data: Mapping[str, str]
    ) -> StoredConfigMap:
        """Replace its data over the version read, keeping labels and annotations.

        Raises `Conflict` when it changed since `current` was read. The caller writes only
        when the content changed.
        """
        ...

    async def read_secret(self, name: str) -> SecretData | None:
        """The Secret's values, base64-decoded, or None when it does not exist."""
        ...

    async def emit_event(
        self,
        pool: Mapping[str, Any],
        *,
        type_: EventType,
        reason: str,
        message: str,
        now: dt.datetime,
    ) -> None:
        """Record an Event on the pool; the same (pool, type, reason, message) bumps its count."""
        ...

    def watch_pools(self) -> AsyncGenerator[PoolEvent, None]:
        """Every pool as ADDED first, then each change as it happens, until cancelled."""
        ...

    async def get_lease(self, name: str) -> dict[str, Any] | None:
        """A coordination.k8s.io/v1 Lease, or None when it does not exist."""
        ...

    async def create_lease(self, name: str, *, spec: Mapping[str, Any]) -> dict[str, Any]:
        """Create the Lease; `AlreadyExists` when another replica did first."""
        ...

    async def replace_lease(
        self, name: str, *, spec: Mapping[str, Any], resource_version: str
    ) -> dict[str, Any]:
        """Replace the Lease's spec over `resource_version`; `Conflict` when it changed."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...
