"""Whether a pool's spec can be acted on: loaded, checked against the others, or refused.

Where it sits: the controller, first in each reconcile, before observe. The reconciler
(rpp/controller/reconcile.py) asks `PoolSpecs` for the pool's `Pool` (rpp/model/spec_load.py)
and whether it would fight an older pool over the same pods or ConfigMaps
(rpp/model/clashes.py). Loading is kept per pool until the object's spec or identity
changes, and the listing the clash check loads once a loop: the spec rarely changes, and
every pool of a loop compares itself with the same listing.

A pool that does not load, or clashes, is not observed, decided or acted on:
`report_invalid` says so instead. What it says is decided in rpp/decide/invalid_spec.py
(InvalidSpec True and every problem listed, Ready and the progress conditions following
from it, its Events); here its Events are recorded and the status is written like any
other (rpp/controller/pool_writes.py `after`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from rpp.act.executor import Executor
from rpp.adapters.clock import Clock
from rpp.adapters.logs import layer_logger
from rpp.controller.pool_writes import PoolWrites
from rpp.controller.status_write import StatusWrite
from rpp.decide.invalid_spec import decide_invalid
from rpp.model.clashes import Stored, held_back, same_pool
from rpp.model.spec_load import Pool, load_pool
from rpp.model.status import PoolStatus

log = layer_logger("rpp.controller")


class PoolSpecs:
    """Per pool, the last object loaded and its Pool; and the listing last compared."""

    def __init__(self, group: str) -> None:
        self.group = group
        # By (namespace, name): the clash check loads every served namespace's pools.
        self._loaded: dict[tuple[str, str], tuple[tuple[Any, ...], Pool]] = {}
        self._listed: tuple[tuple[Mapping[str, Any], ...], list[Stored]] | None = None

    def load(self, name: str, obj: Mapping[str, Any]) -> tuple[Pool | None, list[Any]]:
        """The pool's Pool, or None and the spec's problems."""
        meta = obj.get("metadata") or {}
        key = (
            tuple(obj.keys()),
            obj.get("apiVersion"),
            obj.get("kind"),
            meta.get("name"),
            meta.get("namespace"),
            meta.get("generation"),
            obj.get("spec"),
        )
        slot = (str(meta.get("namespace") or ""), name)
        loaded = self._loaded.get(slot)
        if loaded is not None and loaded[0] == key:
            return loaded[1], []
        pool, problems = load_pool(obj, group=self.group)
        if pool is None:
            self._loaded.pop(slot, None)
        else:
            self._loaded[slot] = (copy.deepcopy(key), pool)
        return pool, problems

    def clashes(
        self, pool: Pool, obj: Mapping[str, Any], pools: tuple[Mapping[str, Any], ...]
    ) -> list[str]:
        """What `rpp validate` would say of this pool beside the others listed (`pools`,
        one loop's listing), if it is the one of a clashing pair that waits."""
        if self._listed is None or self._listed[0] is not pools:
            named = [(str((o.get("metadata") or {}).get("name") or ""), o) for o in pools]
            loaded = [(self.load(n, o)[0], o) for n, o in named if n]
            self._listed = (pools, [Stored.from_object(p, o) for p, o in loaded if p])
        others = [other for other in self._listed[1] if not same_pool(other.pool, pool)]
        return held_back(Stored.from_object(pool, obj), others)

    def forget(self, name: str) -> None:
        """A deleted pool: drop what was loaded under its name, in any namespace (the
        other's is loaded again when next listed)."""
        for slot in [slot for slot in self._loaded if slot[1] == name]:
            del self._loaded[slot]


async def report_invalid(
    obj: Mapping[str, Any],
    status: PoolStatus,
    problems: list[Any],
    *,
    generation: int,
    reason: str,
    clock: Clock,
    executor: Executor,
    writes: PoolWrites,
) -> tuple[PoolStatus, StatusWrite]:
    """The status decide gives an invalid pool (rpp/decide/invalid_spec.py) over the
    stored `status`, its Events recorded and the status written: the status and how its
    write ended."""
    now = clock.now()
    decided = decide_invalid(
        status=status,
        problems=problems,
        reason=reason,
        generation=generation,
        deleting=bool((obj.get("metadata") or {}).get("deletionTimestamp")),
        now=now,
    )
    log.warning("invalid spec: %s", decided.problems)
    for event in decided.events:
        recorded = await executor.record(obj, event, now)
        if not recorded.ok:
            log.warning("event not recorded: %s", recorded.detail)
    done = await writes.after(obj, status, decided.status, redecide=None)
    return decided.status, done
