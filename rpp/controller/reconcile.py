"""One reconcile of one pool: observe -> decide -> act -> fold -> write status.

Where it sits: the controller loop (rpp/controller/loop.py, and the simulator) calls
`PoolReconciler.reconcile` for every pool each loop, with the RunPod listing and the
machine notices read once for all pools (`Shared`, rpp/observe/shared.py). It runs the
steps in order and decides nothing: the pool is observed in rpp/observe/pool.py, every
decision is in rpp/decide/ (returned as values: the status, the effects, whether they
need a write-ahead, which of them act), and act (rpp/act/) carries the effects out.

A status that cannot be read is not a reason to stop: decide rebuilds it from ground
truth in one loop that changes nothing (rpp/decide/ledger/rebuild.py), and the old one is
kept in the pool's `<group>/status-before-rebuild` annotation first.

A loop that creates, terminates or updates a pod (`Decision.needs_write_ahead`) writes
its intents first (rpp/decide/ledger/intents.py): the decided status, with one intent per
RunPod write, is stored before any RunPod call, over the resourceVersion read (a 409
whose fresh status is still the one read, a spec change, is written over). If that
write fails, the loop carries out only what is safe to repeat without a write-ahead
(decided again in rpp/controller/without_write_ahead.py): dead and hung pods leave
nginx and dead pods are terminated, while creates and updates wait; a crash or a lost
write can then never hide a pod from the next loop. A spec that does not load skips all
of this (rpp/controller/pool_specs.py).

A status the API server refused to store is carried to the next loop in memory
(rpp/controller/status_carry.py): the next loop decides from it as long as the stored
status has not moved on since; a status someone else wrote wins.

Every status write is conflict-safe and never blind (rpp/controller/pool_writes.py).
On 409 the pool is read again:
- if nothing was carried out this loop (DryRun, Observe, or none of `Decision.acts`),
  the loop is decided again on the fresh object and written again;
- if effects were carried out, they are facts now: the new status is written over the
  fresh resourceVersion only when the fresh status is still the one this loop wrote
  ahead (the conflict came from a spec change); if someone else wrote the status, this
  loop's status is not forced over it, the failure is logged, and the next loop settles
  the intents it finds from RunPod's listing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rpp.act.executor import Executor
from rpp.adapters.clock import Clock
from rpp.adapters.kube.api import KubeApi
from rpp.adapters.logs import fields, layer_logger, pool_context
from rpp.adapters.redaction import Redactor
from rpp.controller.pool_metrics import PoolMetrics
from rpp.controller.pool_specs import PoolSpecs, report_invalid
from rpp.controller.pool_writes import PoolWrites, Redecide
from rpp.controller.status_carry import StatusCarry
from rpp.controller.status_write import StatusWrite
from rpp.controller.without_write_ahead import decide_without_write_ahead
from rpp.controller.writers import Writers
from rpp.decide import fold
from rpp.decide.nginx_slots import RenderedSlots
from rpp.decide.pool import Decision, decide
from rpp.model.clashes import REASON as CLASH
from rpp.model.codec import StatusFormatError
from rpp.model.effects import RemoveFinalizer
from rpp.model.observations import PoolObject, PoolObservation
from rpp.model.proxy_hosts import DEFAULT_URL_PATTERN as DEFAULT_PROXY_URL
from rpp.model.results import EffectResult, Result
from rpp.model.spec import API_GROUP, Mode
from rpp.model.spec_load import Pool, load_pool
from rpp.model.status import PoolStatus
from rpp.observe.pool import PoolObserver
from rpp.observe.prober import Prober
from rpp.observe.prometheus import PrometheusClient
from rpp.observe.shared import Shared

log = layer_logger("rpp.controller")


@dataclass(frozen=True)
class PoolResult:
    """What one reconcile did, for the loop, the simulator and tests."""

    pool: str
    decision: Decision | None
    results: tuple[EffectResult, ...]
    status: PoolStatus | None
    written: bool
    error: str | None = None


class PoolReconciler:
    """Reconciles any pool; one per controller process, shared by every pool."""

    def __init__(
        self,
        *,
        kube: KubeApi,
        executor: Executor,
        prober: Prober,
        prometheus: PrometheusClient,
        clock: Clock,
        metrics: PoolMetrics | None = None,
        proxy_url: str = DEFAULT_PROXY_URL,
        group: str = API_GROUP,
        redactor: Redactor | None = None,
        identity: str | None = None,
    ) -> None:
        self.kube = kube
        self.executor = executor
        self.clock = clock
        self.metrics = metrics
        self.proxy_url = proxy_url
        self.group = group
        self.observer = PoolObserver(
            kube=kube, prober=prober, prometheus=prometheus, redactor=redactor
        )
        self.writers = Writers(identity)
        self.writes = PoolWrites(kube=kube, group=group, writers=self.writers)
        self.carry = StatusCarry()
        self.specs = PoolSpecs(group)
        # Per pool, its last slots render, handed back to decide: they rarely change.
        self._slots: dict[str, RenderedSlots | None] = {}

    async def reconcile(self, obj: Mapping[str, Any], shared: Shared) -> PoolResult:
        name = str(obj.get("metadata", {}).get("name", "?"))
        started = time.perf_counter()
        try:
            with pool_context(name):
                return await self._reconcile(obj, shared, name)
        finally:
            if self.metrics is not None:
                self.metrics.reconciled_in(self._key(name), time.perf_counter() - started)

    async def _reconcile(self, obj: Mapping[str, Any], shared: Shared, name: str) -> PoolResult:
        generation = int(obj.get("metadata", {}).get("generation") or 0)
        lifecycle = PoolObject.from_object(obj, finalizer=self.kube.settings.finalizer)
        if lifecycle.deleting_since is not None and not lifecycle.finalizer:
            # Our finalizer is gone (removed by us or by hand): the pool waits only for
            # someone else's, and nothing about it is this controller's to do any more.
            return PoolResult(name, None, (), None, False)
        status_unreadable = None
        try:
            stored = self.writes.read(name, obj.get("status") or {})
        except StatusFormatError as err:
            # Rebuilt from ground truth (decide), the old one kept in an annotation.
            log.error("status unreadable, rebuilding it: %s", err)
            status_unreadable = f"the stored status could not be read: {err}"
            stored = PoolStatus()
        status = self.carry.start(name, stored)
        pool, problems = self.specs.load(name, obj)
        clashes = [] if pool is None else self.specs.clashes(pool, obj, shared.pools)
        if pool is None or clashes:
            reason = CLASH if clashes else "ValidationFailed"
            if status_unreadable is not None:
                obj = await self.writes.keep_old(obj, status_unreadable)
            new_status, done = await report_invalid(
                obj,
                stored,
                problems or clashes,
                generation=generation,
                reason=reason,
                clock=self.clock,
                executor=self.executor,
                writes=self.writes,
            )
            return PoolResult(name, None, (), new_status, done.written)
        spec = pool.spec
        obs, env = await self._observe(pool=pool, obj=obj, status=status, shared=shared)
        # The decision's time is when its evidence is in: a probe that timed out took its
        # 10 s, and a phase's `since` must not predate the probes that moved it.
        now = self.clock.now()
        decision = decide(
            pool=name,
            generation=generation,
            spec=spec,
            status=status,
            obs=obs,
            now=now,
            proxy_url=self.proxy_url,
            status_unreadable=status_unreadable,
            last_slots=self._slots.get(name),
        )
        if decision.rebuilt is not None and obj.get("status"):
            obj = await self.writes.keep_old(obj, decision.rebuilt)
        before = stored
        if decision.needs_write_ahead:
            ahead = await self.writes.ahead(obj, stored, decision.status)
            if ahead.written and ahead.status is not None:
                obj, before = ahead.pool, ahead.status
            else:
                self._ended(name, ahead, base=stored)
                safe = decide_without_write_ahead(
                    name,
                    carry=self.carry,
                    spec=spec,
                    generation=generation,
                    status=status,
                    obs=obs,
                    now=now,
                    proxy_url=self.proxy_url,
                    last_slots=self._slots.get(name),
                )
                if safe is None:
                    for note in decision.log:
                        log.info("%s", note.text, extra=fields(pod=note.pod, effect=note.effect))
                    error = "its intents could not be written; nothing was carried out"
                    return PoolResult(name, decision, (), None, False, error=error)
                decision = safe
        self._slots[name] = decision.slots
        for note in decision.log:
            log.info("%s", note.text, extra=fields(pod=note.pod, effect=note.effect))
        results = await self.executor.execute(
            pool=obj, spec=spec, effects=decision.effects, env=env, now=now
        )
        new_status = fold.fold(decision.status, results, now=now, acted_at=self.clock.now())
        if lifecycle.deleting_since is not None and any(
            isinstance(r.effect, RemoveFinalizer) and r.ok for r in results
        ):
            # The pool is gone (or waits only for others' finalizers): no status to write.
            log.info("finalizer removed: the pool is deleted")
            self.forget(name)
            return PoolResult(name, decision, tuple(results), new_status, False)
        if self.metrics is not None:
            self.metrics.count(self._key(name), results)
            self.metrics.report(self._key(name), new_status, desired_min=spec.replicas.min)
        acted = any(r.result is not Result.PLANNED and r.effect in decision.acts for r in results)
        for version in (r.pool_version for r in results if r.pool_version):
            # This loop's own finalizer change moved the version; nobody else's did, or
            # that change would have been refused.
            obj = {**obj, "metadata": {**obj.get("metadata", {}), "resourceVersion": version}}
        redecide = None if acted else self._redecide(shared, read=before, start=status)
        done = await self.writes.after(obj, before, new_status, redecide=redecide)
        self._ended(name, done, base=before, composed=new_status)
        return PoolResult(name, decision, tuple(results), new_status, done.written)

    def _ended(
        self, name: str, done: StatusWrite, *, base: PoolStatus, composed: PoolStatus | None = None
    ) -> None:
        """Tell the carry-over (and the metrics) how a status write ended."""
        now = self.clock.now()
        failed = self.carry.ended(name, done, base=base, now=now, composed=composed)
        if self.metrics is not None:
            self.metrics.status_writes(
                self._key(name), failed=failed, failing=self.carry.writes(name).failing
            )

    def start_term(self) -> None:
        """This process leads again: what another leader wrote before is no evidence."""
        self.writers.start_term()

    def _redecide(self, shared: Shared, *, read: PoolStatus, start: PoolStatus) -> Redecide:
        async def redecide(fresh: Mapping[str, Any]) -> PoolStatus | None:
            return await self._reconcile_without_writing(fresh, shared, read=read, start=start)

        return redecide

    def forget(self, name: str) -> None:
        """A deleted pool: drop what this reconciler and the metrics keep about it."""
        self.writers.forget(name)
        self.writes.forget(name)
        self.carry.forget(name)
        self.specs.forget(name)
        self._slots.pop(name, None)
        if self.metrics is not None:
            self.metrics.forget(self._key(name))

    def _key(self, name: str) -> tuple[str, str]:
        """The pool's (namespace, name): this reconciler serves one namespace."""
        return (self.kube.settings.namespace, name)

    async def _observe(
        self, *, pool: Pool, obj: Mapping[str, Any], status: PoolStatus, shared: Shared
    ) -> tuple[PoolObservation, Mapping[str, str]]:
        """What decide is given about one pool (the loop's and a re-decide's alike: one
        that missed another writer's mark would drop SecondController), and its env:
        observe's reads (rpp/observe/pool.py) and what this controller knows of itself."""
        obs, env = await self.observer.observe(pool=pool, obj=obj, status=status, shared=shared)
        other = self.writers.evidence(pool.name, status)
        if other is not None:
            log.error("another controller acts on this pool: %s", other)
        obs = dataclasses.replace(
            obs,
            writer=self.writers.identity,
            other_controller=other,
            status_writes=self.carry.writes(pool.name),
        )
        return obs, env

    async def _reconcile_without_writing(
        self, fresh: Mapping[str, Any], shared: Shared, *, read: PoolStatus, start: PoolStatus
    ) -> PoolStatus | None:
        """Re-decide on a re-read pool when this loop carried nothing out.

        The new status is written only when it needs nothing carried out (DryRun and
        Observe plan, they never act; a Manage decision with actions returns None).
        """
        pool, _ = load_pool(fresh, group=self.group)
        if pool is None:
            return None
        try:
            status = PoolStatus.from_stored(fresh.get("status") or {})
        except StatusFormatError:
            return None
        # The carry-over rule (status_carry.py): the loop's own start while the stored
        # status has not moved on since it was read (a spec change made the 409).
        status = start if status == read else status
        obs, _env = await self._observe(pool=pool, obj=fresh, status=status, shared=shared)
        now = self.clock.now()
        decision = decide(
            pool=pool.name,
            generation=pool.generation,
            spec=pool.spec,
            status=status,
            obs=obs,
            now=now,
            proxy_url=self.proxy_url,
            last_slots=self._slots.get(pool.name),
        )
        self._slots[pool.name] = decision.slots
        if pool.spec.mode is Mode.MANAGE and decision.acts:
            return None
        return decision.status
