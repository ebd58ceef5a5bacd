"""Pools that would fight: two valid RunPodPools that claim the same pods or ConfigMaps.

Where it sits: beside rpp/model/spec_load.py, one step after it. Each pool can be valid on
its own and still break another: two pools with one namePrefix each take the other's pods
for their own (and terminate the surplus), two pools writing one slots ConfigMap overwrite
each other's nginx slots every loop, a pool whose slots ConfigMap is another's static nginx
ConfigMap overwrites that nginx's configuration, two pools adopting one pod id both drive
it, and the same pool given twice would have the second replace the first. `rpp validate`
checks every pool of one invocation against every other, across all its files.

ConfigMaps and pool names are namespaced, so they clash only within one namespace; a pool
without metadata.namespace goes wherever it is applied, so it is compared with every
namespace. Pod names and ids are RunPod's, one space for the whole account: two pools of
one name in two namespaces have one default namePrefix, and clash on it like any others.

The CRD judges one object at a time and cannot see these; the controller can, and
holds one of two clashing pools (`held_back`, InvalidSpec), so a pool applied with
kubectl gets the verdict `rpp validate` gives for its files together while the pool it
would fight keeps acting.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from rpp.model.spec_load import Pool


@dataclass(frozen=True, kw_only=True)
class Placed:
    """A valid pool and where it was read from (`pool.yaml`, `pools.yaml[2]`)."""

    source: str
    pool: Pool

    def __str__(self) -> str:
        return f"pool {self.pool.name} ({self.source})"


def _same_namespace(a: Pool, b: Pool) -> bool:
    return a.namespace is None or b.namespace is None or a.namespace == b.namespace


def same_pool(a: Pool, b: Pool) -> bool:
    """One object: the same name in the same namespace (or one without a namespace)."""
    return a.name == b.name and _same_namespace(a, b)


def _namespace(a: Pool, b: Pool) -> str:
    shown = a.namespace or b.namespace
    return f" in namespace {shown}" if shown else ""


def _config_maps(pool: Pool) -> dict[str, str]:
    """ConfigMap name -> what the pool uses it for."""
    nginx = pool.spec.nginx
    return {nginx.config_map: "nginx ConfigMap", nginx.slots_config_map: "slots ConfigMap"}


def _pair(a: Placed, b: Placed) -> Iterator[str]:
    pa, pb = a.pool, b.pool
    if pa.name == pb.name and _same_namespace(pa, pb):
        yield (
            f"{b}: the same pool as {a.source}{_namespace(pa, pb)}; applying both, the "
            "second replaces the first: keep one"
        )
        return  # the rest would only repeat it
    if pa.spec.name_prefix == pb.spec.name_prefix:
        yield (
            f"{b}: namePrefix {pa.spec.name_prefix} is also {a}'s; each pool would take the "
            "other's pods for its own: give each pool its own prefix"
        )
    for pod_id in sorted(set(pa.spec.adopt) & set(pb.spec.adopt)):
        yield (
            f"{b}: adopts pod {pod_id}, as {a} does; two pools would drive one pod: "
            "adopt it in one pool only"
        )
    if _same_namespace(pa, pb):
        mine, theirs = _config_maps(pa), _config_maps(pb)
        for name in sorted(set(mine) & set(theirs)):
            yield (
                f"{b}: its {theirs[name]} {name} is {a}'s {mine[name]}{_namespace(pa, pb)}; "
                "the pools would overwrite each other's nginx: give each pool its own"
            )


def clashes(pools: Sequence[Placed]) -> list[str]:
    """One line per clash between two of `pools`, naming both, in the order given."""
    return [line for a, b in combinations(pools, 2) for line in _pair(a, b)]


REASON = "ClashesWithPool"
"""InvalidSpec's reason on a pool held for a clash: it keeps yielding while it lasts."""


@dataclass(frozen=True, kw_only=True)
class Stored:
    """A valid pool as the API server stores it, with what decides which of two clashing
    pools keeps acting."""

    pool: Pool
    created: str  # metadata.creationTimestamp (RFC 3339: sorts in time order)
    changed: bool  # its spec changed since the controller last judged it
    held: bool  # it already waits for a clash (InvalidSpec, REASON)

    @classmethod
    def from_object(cls, pool: Pool, obj: Mapping[str, Any]) -> Stored:
        meta = obj.get("metadata") or {}
        status = obj.get("status") or {}
        observed = status.get("observedGeneration")
        generation = meta.get("generation")
        conditions = status.get("conditions") or []
        held = any(
            isinstance(c, Mapping)
            and c.get("type") == "InvalidSpec"
            and c.get("status") == "True"
            and c.get("reason") == REASON
            for c in conditions
        )
        return cls(
            pool=pool,
            created=str(meta.get("creationTimestamp") or ""),
            changed=observed != generation,
            held=held,
        )

    def yields_to(self, other: Stored) -> bool:
        """Of two clashing pools, whether this one waits: one already waiting keeps
        waiting, then the one whose spec just changed (the change made the clash), then
        the one created later (then by name)."""
        key = (self.held, self.changed, self.created, self.pool.name, self.pool.namespace or "")
        theirs = (other.held, other.changed, other.created, other.pool.name)
        return key > (*theirs, other.pool.namespace or "")


def held_back(mine: Stored, others: Iterable[Stored]) -> list[str]:
    """The clashes that keep `mine` from acting in the cluster, one line each.

    The API server admits each pool on its own, so two pools that would fight can both
    be stored. The controller gives the verdict `rpp validate` gives for both files,
    on one of them only, so the other keeps acting: of each clashing pair, the one that
    yields (`Stored.yields_to`) waits in InvalidSpec with these lines until one of them
    is changed. A pool applied next to a running one waits; so does a running pool
    edited into a clash, whatever its age.
    """
    lines: list[str] = []
    for other in sorted(others, key=lambda o: (o.created, o.pool.name)):
        if same_pool(other.pool, mine.pool) or not mine.yields_to(other):
            continue
        # Across namespaces a name alone may not tell the two apart: say where each is.
        apart = not _same_namespace(other.pool, mine.pool)
        pair = [_placed(other, apart=apart), _placed(mine, apart=apart)]
        lines.extend(clashes(pair))
    return lines


def _placed(stored: Stored, *, apart: bool) -> Placed:
    where = f"namespace {stored.pool.namespace}, " if apart else ""
    return Placed(source=f"{where}created {stored.created}", pool=stored.pool)
