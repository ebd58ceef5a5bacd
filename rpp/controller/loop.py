"""The controller loop: every pool, every interval, and at once when a pool's spec changes.

Where it sits: it orchestrates observe -> decide -> act for all pools and decides
nothing itself. Each loop reads the controller's RunPod key file again, if the key comes
from one (rpp/controller/runpod_key.py: a rotated key is used without a restart), lists
the RunPodPools of every served namespace (rpp/controller/pool_namespaces.py: each
namespace has its own adapter and reconciler, and every pool is known by (namespace,
name)), reads what every pool shares once (one RunPod pod listing and one
machine-notice query, rpp/observe/shared.py), then reconciles the pools concurrently
through `PoolReconciler`. `rpp run` drives it under
leader election; the simulator drives the very same loop on virtual time.

Isolation: a pool whose reconcile raises (a bug) or overruns its time budget gets a
`ReconcileFailed` condition (rpp/controller/reconcile_failed.py); the other pools carry
on. One reconcile of a pool runs at a time (a lock per pool), so a spec-change
reconcile (rpp/controller/watch.py) never races the periodic one. How the loop is
doing is kept for /healthz (rpp/controller/health.py).

Stopping: when `stop` is set (SIGTERM), the reconciles under way finish (actions carried
out, status written) and nothing new starts. When leadership is lost, the loop is
cancelled at once instead: the other replica may already be acting.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from rpp.adapters.clock import Clock
from rpp.adapters.kube.api import KubeApi, KubeError, NotFound
from rpp.adapters.logs import layer_logger, pool_context
from rpp.adapters.runpod.client import RunPodClient
from rpp.controller.health import LoopProgress
from rpp.controller.leader import LeaderElector
from rpp.controller.pool_metrics import PoolMetrics
from rpp.controller.pool_namespaces import PoolKey, PoolNamespaces
from rpp.controller.reconcile import PoolReconciler, PoolResult
from rpp.controller.reconcile_failed import ReconcileFailures
from rpp.controller.runpod_key import FROM_ENVIRONMENT, ControllerKey
from rpp.controller.watch import PoolWatch, generation, pool_name
from rpp.observe.shared import Shared, read_shared

log = layer_logger("rpp.controller")


class ControllerLoop:
    """Reconciles every pool of the served namespaces; one per controller process.

    `kube` and `reconciler` serve the controller's own namespace; `namespaces`, when
    given, every served one (without it, the own namespace alone)."""

    def __init__(
        self,
        *,
        kube: KubeApi,
        runpod: RunPodClient,
        reconciler: PoolReconciler,
        clock: Clock,
        interval: float,
        metrics: PoolMetrics | None = None,
        pool_timeout: float | None = None,
        stall_after: float | None = None,
        key: ControllerKey | None = None,
        on_result: Callable[[PoolResult], None] | None = None,
        after_loop: Callable[[], object] | None = None,
        namespaces: PoolNamespaces | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"the reconcile interval must be positive, got {interval}")
        self.kube = kube
        self.runpod = runpod
        self.reconciler = reconciler
        self.clock = clock
        self.interval = interval
        self.metrics = metrics
        # A pool gets several loops' worth of time: probes, RunPod retries and the status
        # write all have their own, shorter timeouts; this only catches what has none.
        self.pool_timeout = pool_timeout if pool_timeout is not None else max(120.0, 4 * interval)
        self.stall_after = (
            stall_after if stall_after is not None else interval + self.pool_timeout + 60.0
        )
        self.key = key
        self.on_result = on_result
        self.after_loop = after_loop  # `rpp run`: give the loop's freed memory back
        self.namespaces = namespaces or PoolNamespaces.single(kube, reconciler)
        self._locks: dict[PoolKey, asyncio.Lock] = {}
        self._listed: tuple[Mapping[str, Any], ...] = ()  # the last listing of the pools
        self._generations: dict[PoolKey, int] = {}
        self._done_at: dict[PoolKey, float] = {}
        self._stop: asyncio.Event | None = None
        self.progress = LoopProgress()
        self.failures = ReconcileFailures(kube=kube, clock=clock, metrics=metrics)
        self._failures = {kube.settings.namespace: self.failures}

    # -- one loop ------------------------------------------------------------------------

    async def loop_once(self) -> list[PoolResult]:
        """List the pools, read the shared facts once, reconcile every pool concurrently."""
        loop = asyncio.get_running_loop()
        listed_at = loop.time()
        if self.key is not None:
            self.key.refresh()
        listing = await self.namespaces.list_pools()
        for error in listing.errors:
            log.error("%s", error)
        if listing.errors and len(listing.errors) == len(self.namespaces.listers):
            self.progress.last_error = "; ".join(listing.errors)
            return []
        pools = listing.pools
        self._listed = listing.objects
        shared = await self._read_shared(billing_for=self._listed) if pools else Shared(pods=())
        shared = dataclasses.replace(shared, pools=self._listed)
        results = await asyncio.gather(
            *(
                self._locked((ns, pool_name(obj)), obj, shared, listed_at=listed_at)
                for ns, obj in pools
            )
        )
        self.progress.completed(loop.time())
        if listing.errors:  # some namespaces served, the others named until they list again
            self.progress.last_error = "; ".join(listing.errors)
        return [r for r in results if r is not None]

    async def reconcile_now(self, key: PoolKey | str) -> PoolResult | None:
        """Reconcile one pool at once (its spec changed), unless that generation was seen;
        a name alone is a pool of the controller's own namespace."""
        if isinstance(key, str):
            key = (self.kube.settings.namespace, key)
        with pool_context(key[1]):
            return await self._reconcile_changed(key)

    async def _reconcile_changed(self, key: PoolKey) -> PoolResult | None:
        async with self._lock(key):
            if self._stopping():
                return None
            try:
                obj = await self.namespaces.parts(key[0]).kube.get_pool(key[1])
            except NotFound:
                return None
            except KubeError as err:
                log.warning("cannot read the pool after a change: %s", err)
                return None
            if generation(obj) <= self._generations.get(key, -1):
                return None  # the periodic loop already reconciled this generation
            what = "spec changed" if key in self._generations else "new pool"
            log.info("%s (generation %d), reconciling now", what, generation(obj))
            shared = dataclasses.replace(await self._read_shared(), pools=await self._list())
            return await self._reconcile(key, obj, shared)

    async def _read_shared(
        self, *, billing_for: tuple[Mapping[str, Any], ...] | None = None
    ) -> Shared:
        """The shared read; with `billing_for` (a loop's pools) RunPod's bill too, when due."""
        source = FROM_ENVIRONMENT if self.key is None else self.key.source
        if billing_for is None:
            return await read_shared(self.runpod, key=source)
        return await read_shared(
            self.runpod, key=source, now=self.clock.now(), billing_for=billing_for
        )

    async def _list(self) -> tuple[Mapping[str, Any], ...]:
        """The pools as they are now, for a reconcile between loops: two pools applied
        together must each see the other, or both act before a loop lists them both."""
        listing = await self.namespaces.list_pools()
        if listing.errors:
            # One namespace unread would hide its pools from the clash check: keep the last.
            log.warning(
                "cannot list the pools, judging against the last listing: %s",
                "; ".join(e.removeprefix("cannot list RunPodPools: ") for e in listing.errors),
            )
        else:
            self._listed = listing.objects
        return self._listed

    async def _locked(
        self, key: PoolKey, obj: Mapping[str, Any], shared: Shared, *, listed_at: float
    ) -> PoolResult | None:
        async with self._lock(key):
            if self._stopping():
                return None  # SIGTERM: finish what is under way, start nothing new
            if self._done_at.get(key, -math.inf) > listed_at:
                return None  # a spec change reconciled it after it was listed: fresher
            return await self._reconcile(key, obj, shared)

    def _stopping(self) -> bool:
        return self._stop is not None and self._stop.is_set()

    def _lock(self, key: PoolKey) -> asyncio.Lock:
        return self._locks.setdefault(key, asyncio.Lock())

    def _failures_in(self, namespace: str) -> ReconcileFailures:
        found = self._failures.get(namespace)
        if found is None:
            kube = self.namespaces.parts(namespace).kube
            found = ReconcileFailures(kube=kube, clock=self.clock, metrics=self.metrics)
            self._failures[namespace] = found
        return found

    async def _reconcile(self, key: PoolKey, obj: Mapping[str, Any], shared: Shared) -> PoolResult:
        """One pool, isolated: whatever it raises becomes its condition, not the loop's."""
        with pool_context(key[1]):
            return await self._isolated(key, obj, shared)

    async def _isolated(self, key: PoolKey, obj: Mapping[str, Any], shared: Shared) -> PoolResult:
        namespace, name = key
        # /healthz names a stuck pool: by name alone while one namespace is served.
        busy = name if len(self.namespaces.listers) == 1 else f"{namespace}/{name}"
        loop = asyncio.get_running_loop()
        self._generations[key] = max(self._generations.get(key, -1), generation(obj))
        self.progress.busy[busy] = loop.time()
        failures = self._failures_in(namespace)
        try:
            async with asyncio.timeout(self.pool_timeout):
                reconciler = self.namespaces.parts(namespace).reconciler
                result = await reconciler.reconcile(obj, shared)
        except Exception as err:  # isolation: one pool's bug must not stop the others
            if isinstance(err, TimeoutError):
                reason = "Timeout"
                message = f"the reconcile took longer than {self.pool_timeout:g}s and was stopped"
                log.error("%s", message)
            else:
                reason = type(err).__name__
                message = self._redact(f"the reconcile failed: {reason}: {err}")
                log.error("%s\n%s", message, self._trace(err))
            result = await failures.failed(obj, reason=reason, message=message)
        else:
            await failures.recovered(result)
        finally:
            self.progress.busy.pop(busy, None)
            self._done_at[key] = loop.time()
        if self.on_result is not None:
            self.on_result(result)  # the simulator's timeline
        return result

    def _redact(self, text: str) -> str:
        for secret in () if self.key is None else self.key.seen:
            text = text.replace(secret, "<redacted>")
        return text

    def _trace(self, err: BaseException) -> str:
        """The traceback of a bug, for the log, with the secrets cut out."""
        return self._redact("".join(traceback.format_exception(err)).rstrip())

    # -- running -------------------------------------------------------------------------

    async def run(self, *, stop: asyncio.Event, elector: LeaderElector | None = None) -> None:
        """Lead (or wait to) until `stop` is set; without an elector, always lead."""
        self._stop = stop
        while not stop.is_set():
            if elector is not None and not elector.is_leader:
                await _first(elector.wait_leading(), stop.wait())
                continue
            leading = asyncio.create_task(self._lead(stop), name="rpp-lead")
            lost = asyncio.create_task(
                elector.wait_lost() if elector is not None else asyncio.Event().wait(),
                name="rpp-lost",
            )
            try:
                await asyncio.wait({leading, lost}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                lost.cancel()
                if not leading.done():
                    # Leadership is gone: another replica may act from now on. Stop here,
                    # mid-action if need be; a create cut short is found by its name.
                    log.warning("lost leadership: stopping the loop now")
                    leading.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await leading
                self.progress.stopped_leading()
                if self.metrics is not None:
                    # Another replica reports the pools now; stale values here would keep
                    # an alert firing from the standby.
                    self.metrics.stand_by()
            if leading.done() and not leading.cancelled():
                leading.result()  # a bug in the loop itself surfaces here

    async def _lead(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        self.progress.started_leading(loop.time())
        for parts in self.namespaces.served():
            parts.reconciler.start_term()  # the last leader's writes are not a second controller
        watchers = [
            PoolWatch(
                kube=lister,
                seen=lambda key: self._generations.get(key, -1),
                reconcile_now=self.reconcile_now,
                forget=self._forget,
            )
            for lister in self.namespaces.listers
        ]
        watches = [asyncio.create_task(watcher.run(), name="rpp-watch") for watcher in watchers]
        try:
            while not stop.is_set():
                started = loop.time()
                try:
                    await self.loop_once()
                except Exception as err:  # a bug in the loop itself: report, keep looping
                    self.progress.last_error = self._redact(f"the loop failed: {err!r}")
                    log.error("%s\n%s", self.progress.last_error, self._trace(err))
                if self.after_loop is not None:
                    self.after_loop()
                wait = max(0.0, started + self.interval - loop.time())
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await stop.wait()
        finally:
            for watch in watches:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch
            for watcher in watchers:
                await watcher.finish(cancel=not stop.is_set())  # SIGTERM: they finish too

    def _forget(self, key: PoolKey) -> None:
        """A deleted pool: drop what the loop and the metrics keep about it."""
        namespace, name = key
        self._generations.pop(key, None)
        if self.metrics is not None:
            self.metrics.forget(key)
        self._failures_in(namespace).forget(name)

    def health(self) -> str | None:
        """None while the loop completes on time; otherwise why it does not (/healthz)."""
        return self.progress.stalled(
            now=asyncio.get_running_loop().time(),
            interval=self.interval,
            allowed=self.stall_after,
        )


async def _first(*aws: Any) -> None:
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
