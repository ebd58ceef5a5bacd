"""The controller loop: every pool, every interval, and at once when a pool's spec changes.

Where it sits: it orchestrates observe -> decide -> act for all pools and decides
nothing itself. Each loop reads the controller's RunPod key file again, if the key comes
from one (rpp/controller/runpod_key.py: a rotated key is used without a restart), lists
the RunPodPools, reads what every pool shares once (one RunPod pod listing and one
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
from rpp.controller.reconcile import PoolReconciler, PoolResult
from rpp.controller.reconcile_failed import ReconcileFailures
from rpp.controller.runpod_key import FROM_ENVIRONMENT, ControllerKey
from rpp.controller.watch import PoolWatch, generation, pool_name
from rpp.observe.shared import Shared, read_shared

log = layer_logger("rpp.controller")


class ControllerLoop:
    """Reconciles every pool of one namespace; one per controller process."""

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
        self._locks: dict[str, asyncio.Lock] = {}
        self._listed: tuple[Mapping[str, Any], ...] = ()  # the last listing of the pools
        self._generations: dict[str, int] = {}
        self._done_at: dict[str, float] = {}
        self._stop: asyncio.Event | None = None
        self.progress = LoopProgress()
        self.failures = ReconcileFailures(kube=kube, clock=clock, metrics=metrics)

    # -- one loop ------------------------------------------------------------------------

    async def loop_once(self) -> list[PoolResult]:
        """List the pools, read the shared facts once, reconcile every pool concurrently."""
        loop = asyncio.get_running_loop()
        listed_at = loop.time()
        if self.key is not None:
            self.key.refresh()
        try:
            pools = await self.kube.list_pools()
        except KubeError as err:
            self.progress.last_error = f"cannot list RunPodPools: {err}"
            log.error("%s", self.progress.last_error)
            return []
        self._listed = tuple(pools)
        shared = await self._read_shared() if pools else Shared(pods=())
        shared = dataclasses.replace(shared, pools=self._listed)
        results = await asyncio.gather(
            *(self._locked(obj, shared, listed_at=listed_at) for obj in pools)
        )
        self.progress.completed(loop.time())
        return [r for r in results if r is not None]

    async def reconcile_now(self, name: str) -> PoolResult | None:
        """Reconcile one pool at once (its spec changed), unless that generation was seen."""
        with pool_context(name):
            return await self._reconcile_changed(name)

    async def _reconcile_changed(self, name: str) -> PoolResult | None:
        async with self._lock(name):
            if self._stopping():
                return None
            try:
                obj = await self.kube.get_pool(name)
            except NotFound:
                return None
            except KubeError as err:
                log.warning("cannot read the pool after a change: %s", err)
                return None
            if generation(obj) <= self._generations.get(name, -1):
                return None  # the periodic loop already reconciled this generation
            what = "spec changed" if name in self._generations else "new pool"
            log.info("%s (generation %d), reconciling now", what, generation(obj))
            shared = dataclasses.replace(await self._read_shared(), pools=await self._list())
            return await self._reconcile(obj, shared)

    async def _read_shared(self) -> Shared:
        source = FROM_ENVIRONMENT if self.key is None else self.key.source
        return await read_shared(self.runpod, key=source)

    async def _list(self) -> tuple[Mapping[str, Any], ...]:
        """The pools as they are now, for a reconcile between loops: two pools applied
        together must each see the other, or both act before a loop lists them both."""
        try:
            self._listed = tuple(await self.kube.list_pools())
        except KubeError as err:
            log.warning("cannot list the pools, judging against the last listing: %s", err)
        return self._listed

    async def _locked(
        self, obj: Mapping[str, Any], shared: Shared, *, listed_at: float
    ) -> PoolResult | None:
        name = pool_name(obj)
        async with self._lock(name):
            if self._stopping():
                return None  # SIGTERM: finish what is under way, start nothing new
            if self._done_at.get(name, -math.inf) > listed_at:
                return None  # a spec change reconciled it after it was listed: fresher
            return await self._reconcile(obj, shared)

    def _stopping(self) -> bool:
        return self._stop is not None and self._stop.is_set()

    def _lock(self, name: str) -> asyncio.Lock:
        return self._locks.setdefault(name, asyncio.Lock())

    async def _reconcile(self, obj: Mapping[str, Any], shared: Shared) -> PoolResult:
        """One pool, isolated: whatever it raises becomes its condition, not the loop's."""
        with pool_context(pool_name(obj)):
            return await self._isolated(obj, shared)

    async def _isolated(self, obj: Mapping[str, Any], shared: Shared) -> PoolResult:
        name = pool_name(obj)
        loop = asyncio.get_running_loop()
        self._generations[name] = max(self._generations.get(name, -1), generation(obj))
        self.progress.busy[name] = loop.time()
        try:
            async with asyncio.timeout(self.pool_timeout):
                result = await self.reconciler.reconcile(obj, shared)
        except Exception as err:  # isolation: one pool's bug must not stop the others
            if isinstance(err, TimeoutError):
                reason = "Timeout"
                message = f"the reconcile took longer than {self.pool_timeout:g}s and was stopped"
                log.error("%s", message)
            else:
                reason = type(err).__name__
                message = self._redact(f"the reconcile failed: {reason}: {err}")
                log.error("%s\n%s", message, self._trace(err))
            result = await self.failures.failed(obj, reason=reason, message=message)
        else:
            await self.failures.recovered(result)
        finally:
            self.progress.busy.pop(name, None)
            self._done_at[name] = loop.time()
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
        self.reconciler.start_term()  # what the last leader wrote is not a second controller
        watcher = PoolWatch(
            kube=self.kube,
            seen=lambda name: self._generations.get(name, -1),
            reconcile_now=self.reconcile_now,
            forget=self._forget,
        )
        watch = asyncio.create_task(watcher.run(), name="rpp-watch")
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
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
            await watcher.finish(cancel=not stop.is_set())  # SIGTERM: they finish too

    def _forget(self, name: str) -> None:
        """A deleted pool: drop what the loop and the metrics keep about it."""
        self._generations.pop(name, None)
        if self.metrics is not None:
            self.metrics.forget(name)
        self.failures.forget(name)

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
