"""The namespaces one controller serves, each with its own Kubernetes adapter and reconciler.

Where it sits: the controller, under the loop (rpp/controller/loop.py), before observe.
Every call the pools' reconcile makes in the cluster (status, finalizers, Events, the
slots ConfigMap, the env Secret) is a call in the pool's own namespace, so each served
namespace gets its own adapter, and its own reconciler and executor over it, built once
when its first pool is listed (`NamespaceParts`). What a reconciler keeps per pool name
(carried statuses, slots renders, the writers seen) is then per (namespace, name) too:
two pools named alike in two namespaces never share it.

Listing is the other half: with named namespaces (NAMESPACE, NAMESPACES=a,b) each is
listed and watched on its own adapter; with NAMESPACES=* one cluster-wide adapter lists
and watches every pool, and each pool's namespace comes from its metadata. A namespace
whose listing fails (a 403 where the RBAC does not reach, say) costs its own pools one
loop; the other namespaces' pools are still reconciled.

With one namespace, the one served today, this is the adapter and the reconciler the
process was built with, and nothing else changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rpp.adapters.kube.api import ALL_NAMESPACES, KubeApi, KubeError
from rpp.controller.namespaces import WatchedNamespaces
from rpp.controller.reconcile import PoolReconciler

PoolKey = tuple[str, str]
"""(namespace, name): what identifies a pool wherever the controller keeps something
about it."""


@dataclass(frozen=True, kw_only=True)
class NamespaceParts:
    """What reconciles the pools of one namespace."""

    kube: KubeApi
    reconciler: PoolReconciler


@dataclass(frozen=True, kw_only=True)
class Listing:
    """One loop's listing over every served namespace."""

    pools: tuple[tuple[str, Mapping[str, Any]], ...]
    """(namespace, pool object), in listing order, namespace by namespace."""
    errors: tuple[str, ...] = field(default=())
    """One line per listing that failed, naming where."""

    @property
    def objects(self) -> tuple[Mapping[str, Any], ...]:
        return tuple(obj for _, obj in self.pools)


def pool_namespace(obj: Mapping[str, Any], *, default: str) -> str:
    """The pool's namespace: its metadata's, or the one it was listed in."""
    return str((obj.get("metadata") or {}).get("namespace") or default)


class PoolNamespaces:
    """The served namespaces: who lists and watches the pools, and each one's parts."""

    def __init__(
        self,
        *,
        listers: Sequence[KubeApi],
        build: Callable[[str], NamespaceParts],
        built: Mapping[str, NamespaceParts] | None = None,
    ) -> None:
        if not listers:
            raise ValueError("a controller serves at least one namespace")
        self.listers = tuple(listers)
        """One adapter per named namespace, or the one cluster-wide adapter (`*`)."""
        self._build = build
        self._parts: dict[str, NamespaceParts] = dict(built or {})

    @classmethod
    def single(cls, kube: KubeApi, reconciler: PoolReconciler) -> PoolNamespaces:
        """One namespace, served by the adapter and reconciler the process was built with."""
        parts = NamespaceParts(kube=kube, reconciler=reconciler)
        namespace = kube.settings.namespace

        def only(asked: str) -> NamespaceParts:
            raise ValueError(f"namespace {asked} is not served (only {namespace} is)")

        return cls(listers=(kube,), build=only, built={namespace: parts})

    def parts(self, namespace: str) -> NamespaceParts:
        """The parts that reconcile `namespace`'s pools, built on first use."""
        found = self._parts.get(namespace)
        if found is None:
            found = self._parts[namespace] = self._build(namespace)
        return found

    def served(self) -> tuple[NamespaceParts, ...]:
        """The parts built so far (a reconciler's term starts on each of them)."""
        return tuple(self._parts.values())

    async def list_pools(self) -> Listing:
        """Every served namespace's pools; a namespace that cannot be listed is named."""
        pools: list[tuple[str, Mapping[str, Any]]] = []
        errors: list[str] = []
        for lister in self.listers:
            try:
                listed = await lister.list_pools()
            except KubeError as err:
                errors.append(f"cannot list RunPodPools: {err}")
                continue
            default = lister.settings.namespace
            pools.extend((pool_namespace(obj, default=default), obj) for obj in listed)
        return Listing(pools=tuple(pools), errors=tuple(errors))


class ServedAdapters:
    """The adapters `rpp run` opens for the served namespaces, beside its own namespace's
    (`home`, which holds the Lease): one per other namespace, made on first use, and for
    NAMESPACES=* the cluster-wide one that lists and watches. It closes what it made."""

    def __init__(
        self,
        *,
        home: KubeApi,
        make: Callable[[str], KubeApi],
        watched: WatchedNamespaces,
    ) -> None:
        self.home = home
        self._make = make
        self._made: dict[str, KubeApi] = {}
        self.single = not watched.every and watched.resolve(home.settings.namespace) == (
            home.settings.namespace,
        )
        """Only the own namespace: nothing beyond `home`, the process as it always was."""
        self.listers: tuple[KubeApi, ...] = (
            (self._made_for(ALL_NAMESPACES),)
            if watched.every
            else tuple(self.kube_for(ns) for ns in watched.resolve(home.settings.namespace))
        )

    def kube_for(self, namespace: str) -> KubeApi:
        if namespace == self.home.settings.namespace:
            return self.home
        return self._made_for(namespace)

    def _made_for(self, namespace: str) -> KubeApi:
        found = self._made.get(namespace)
        if found is None:
            found = self._made[namespace] = self._make(namespace)
        return found

    async def close(self) -> None:
        for kube in self._made.values():
            await kube.close()
