"""One simulated controller process: its parts, its connections to the world, its death.

Where it sits: the simulator (rpp/sim/world.py builds one `ControllerParts` per start
of the controller). The real controller loop, reconciler, executor, RunPod client,
prober and Prometheus client are built by the function `rpp run` builds them with
(rpp/controller/assembly.py `assemble`), with the same redactor and the same redacting
Kubernetes adapter; only their connections differ: every RunPod call, probe, Prometheus
query and Kubernetes request goes through this process's `ProcessTransport`,
`ProcessPods` or `ProcessKube`, which:

- report each RunPod call and each status or slots write to the world's `Crossings`
  before it is sent and after it is answered, so a scenario can kill the process at
  exactly that point (`do: controller-restart` with a `point`) and the invariant
  checker can see every pod the controller touches;
- refuse everything once the process is dead (`Lifeline`): a killed process does
  nothing more, not even in its `finally` blocks, as with `kill -9`.

Each process keeps time as `rpp run` does (rpp/adapters/clock.py `SteadyClock`): its host's
wall clock, which `do: clock-step` steps, counted on true elapsed time and anchored on the
in-memory API server's Date (true time), which `ProcessKube` reports with every answer.

Death is `ControllerKilled`, a BaseException: no `except Exception` in the controller
can catch it and carry on, so nothing after the crash point runs. The process's tasks
are then cancelled and a new process starts that knows only what Kubernetes and RunPod
hold (rpp/sim/world.py `run_controller`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any, NoReturn, Protocol

import httpx
from prometheus_client import CollectorRegistry

from rpp.adapters.clock import Clock, ServerDates, SteadyClock, http_date
from rpp.adapters.kube.api import (
    EventType,
    KubeApi,
    KubeSettings,
    PoolEvent,
    SecretData,
    StoredConfigMap,
)
from rpp.adapters.pod_http import PodAnswer, PodClient, PodRequest
from rpp.controller.assembly import assemble
from rpp.controller.config import Config
from rpp.controller.reconcile import PoolResult
from rpp.sim.cloud_api import operation_of
from rpp.sim.crash_points import EFFECTS, SLOTS_WRITE, STATUS_WRITE
from rpp.sim.kube_memory import MemoryKubeApi

API_URL = "http://api.runpod.fake"
API_HOST = "api.runpod.fake"


class ControllerKilled(BaseException):
    """The simulated controller process died right here; nothing after it runs."""


class Lifeline:
    """Whether one controller process is alive; each of its connections checks it."""

    def __init__(self) -> None:
        self.dead = False
        self.cause = ""
        self.died = asyncio.Event()

    def check(self) -> None:
        if self.dead:
            raise ControllerKilled(self.cause)

    def end(self, cause: str) -> None:
        """Mark the process dead (from outside it: its tasks are cancelled next)."""
        if not self.dead:
            self.dead, self.cause = True, cause
            self.died.set()

    def kill(self, cause: str) -> NoReturn:
        """Die here, in the process's own task: the call under way never returns."""
        self.end(cause)
        raise ControllerKilled(cause)


class Crossings(Protocol):
    """What the world does as a process crosses into it and back (crashes, checks)."""

    async def before(self, life: Lifeline, target: str, request: httpx.Request | None) -> None: ...

    async def after(self, life: Lifeline, target: str) -> None: ...


class ProcessTransport(httpx.AsyncBaseTransport):
    """The process's httpx transport: RunPod calls cross the world's `Crossings`."""

    def __init__(
        self, inner: httpx.AsyncBaseTransport, *, life: Lifeline, crossings: Crossings
    ) -> None:
        self.inner = inner
        self.life = life
        self.crossings = crossings

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.life.check()
        operation = (
            operation_of(request.method, request.url.path)
            if request.url.host == API_HOST
            else None
        )
        if operation is not None:
            await self.crossings.before(self.life, operation, request)
        response = await self.inner.handle_async_request(request)
        self.life.check()
        if operation is not None:
            await self.crossings.after(self.life, operation)
        return response


class ProcessPods:
    """The process's connections to the pods: dead with the process, like its transport."""

    def __init__(self, inner: PodClient, *, life: Lifeline) -> None:
        self.inner = inner
        self.life = life

    async def get(self, request: PodRequest, *, limit: int) -> PodAnswer:
        self.life.check()
        answer = await self.inner.get(request, limit=limit)
        self.life.check()
        return answer

    async def aclose(self) -> None:
        await self.inner.aclose()


class ProcessKube:
    """The in-memory Kubernetes as one process sees it; status and slots writes cross."""

    def __init__(
        self,
        inner: MemoryKubeApi,
        *,
        life: Lifeline,
        crossings: Crossings,
        dates: ServerDates | None = None,
        server_clock: Clock | None = None,
    ) -> None:
        self.inner = inner
        self.life = life
        self.crossings = crossings
        self.dates = dates
        self.server_clock = server_clock

    def _enter(self) -> None:
        """Dead, or the API server answers, with its `Date` (true time: the cluster's)."""
        self.life.check()
        if self.dates is not None and self.server_clock is not None:
            sent = self.dates.elapsed()
            self.dates.server_answered(http_date(self.server_clock.now()), sent=sent)

    @property
    def settings(self) -> KubeSettings:
        return self.inner.settings

    async def list_pools(self) -> list[dict[str, Any]]:
        self._enter()
        return await self.inner.list_pools()

    async def get_pool(self, name: str) -> dict[str, Any]:
        self._enter()
        return await self.inner.get_pool(name)

    async def replace_pool_status(
        self, name: str, *, status: Mapping[str, Any], resource_version: str
    ) -> dict[str, Any]:
        self._enter()
        await self.crossings.before(self.life, STATUS_WRITE, None)
        stored = await self.inner.replace_pool_status(
            name, status=status, resource_version=resource_version
        )
        await self.crossings.after(self.life, STATUS_WRITE)
        return stored

    async def set_pool_finalizers(
        self, name: str, *, finalizers: Sequence[str], resource_version: str
    ) -> dict[str, Any]:
        self._enter()
        return await self.inner.set_pool_finalizers(
            name, finalizers=finalizers, resource_version=resource_version
        )

    async def annotate_pool(self, name: str, *, annotations: Mapping[str, str]) -> dict[str, Any]:
        self._enter()
        return await self.inner.annotate_pool(name, annotations=annotations)

    async def read_config_map(self, name: str) -> StoredConfigMap | None:
        self._enter()
        return await self.inner.read_config_map(name)

    async def create_config_map(
        self,
        name: str,
        *,
        data: Mapping[str, str],
        labels: Mapping[str, str],
        annotations: Mapping[str, str] | None = None,
    ) -> StoredConfigMap:
        self._enter()
        await self.crossings.before(self.life, SLOTS_WRITE, None)
        stored = await self.inner.create_config_map(
            name, data=data, labels=labels, annotations=annotations
        )
        await self.crossings.after(self.life, SLOTS_WRITE)
        return stored

    async def replace_config_map(
        self, current: StoredConfigMap, *, data: Mapping[str, str]
    ) -> StoredConfigMap:
        self._enter()
        await self.crossings.before(self.life, SLOTS_WRITE, None)
        stored = await self.inner.replace_config_map(current, data=data)
        await self.crossings.after(self.life, SLOTS_WRITE)
        return stored

    async def read_secret(self, name: str) -> SecretData | None:
        self._enter()
        return await self.inner.read_secret(name)

    async def emit_event(
        self,
        pool: Mapping[str, Any],
        *,
        type_: EventType,
        reason: str,
        message: str,
        now: dt.datetime,
    ) -> None:
        self._enter()
        await self.inner.emit_event(pool, type_=type_, reason=reason, message=message, now=now)

    async def watch_pools(self) -> AsyncGenerator[PoolEvent, None]:
        self.life.check()
        async for event in self.inner.watch_pools():
            self.life.check()
            yield event

    async def get_lease(self, name: str) -> dict[str, Any] | None:
        self._enter()
        return await self.inner.get_lease(name)

    async def create_lease(self, name: str, *, spec: Mapping[str, Any]) -> dict[str, Any]:
        self._enter()
        return await self.inner.create_lease(name, spec=spec)

    async def replace_lease(
        self, name: str, *, spec: Mapping[str, Any], resource_version: str
    ) -> dict[str, Any]:
        self._enter()
        return await self.inner.replace_lease(name, spec=spec, resource_version=resource_version)

    async def close(self) -> None:
        return None


class ControllerParts:
    """The controller's in-process parts, built fresh on every (re)start."""

    def __init__(
        self,
        *,
        transport: httpx.AsyncBaseTransport,
        pods: PodClient,
        kube: MemoryKubeApi,
        clock: Clock,
        host: Clock | None = None,
        api_key: str,
        prometheus_transport: httpx.AsyncBaseTransport | None,
        prometheus_url: str | None,
        crossings: Crossings,
        interval: float = 30.0,
        on_result: Callable[[PoolResult], None] | None = None,
        identity: str = "simulator",
    ) -> None:
        self.life = Lifeline()
        self.registry = CollectorRegistry()
        # The process keeps time as `rpp run` does: its host's wall clock (`host`, which a
        # scenario may step), counted on a monotonic clock (true elapsed time) and anchored
        # on the API server's Date (true time). `clock` is the world's true time.
        origin = clock.now()
        self.clock = steady = SteadyClock(
            host=host or clock, monotonic=lambda: (clock.now() - origin).total_seconds()
        )

        async def between_effects(point: str) -> None:
            await crossings.before(self.life, EFFECTS, None)

        # The settings `rpp run` would read from its environment: the defaults, but for
        # the fake RunPod's address, the fake Prometheus and the scenario's interval.
        config = Config(
            runpod_api_key=api_key,
            namespace=kube.settings.namespace,
            runpod_api_url=API_URL,
            prometheus_url=prometheus_url,
            reconcile_interval=interval,
        )
        self.core = assemble(
            config,
            kube=ProcessKube(
                kube, life=self.life, crossings=crossings, dates=steady, server_clock=clock
            ),
            clock=steady,
            runpod_transport=ProcessTransport(transport, life=self.life, crossings=crossings),
            pod_client=ProcessPods(pods, life=self.life),
            prometheus_transport=ProcessTransport(
                prometheus_transport or transport, life=self.life, crossings=crossings
            ),
            registry=self.registry,
            identity=identity,
            runpod_retry_deadline=20.0,
            between_effects=between_effects,
            on_result=on_result,
        )
        self.redactor = self.core.redactor
        self.kube = self.core.kube
        self.metrics = self.core.metrics
        self.runpod = self.core.runpod
        self.reconciler = self.core.reconciler
        self.loop = self.core.loop

    async def close(self) -> None:
        await self.core.close()


def _is_a_kube_api(kube: ProcessKube) -> KubeApi:
    """Never called: mypy checks here that a process's view satisfies the protocol."""
    return kube
