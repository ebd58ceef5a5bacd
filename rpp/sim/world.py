"""A whole simulated world: the real controller against fake RunPod, pods and Kubernetes.

Where it sits: under `rpp simulate` and the story tests. Only transports are swapped:
the real RunPod client, prober, Prometheus client, reconciler, decide, machines and
executor run against the fake RunPod cloud (REST v2 + GraphQL + the proxy, one ASGI
app reached through httpx's in-process transport), fake inference pods behind that
proxy, and the in-memory Kubernetes API. Time is whatever clock it is given; on a
`VirtualTimeLoop` with a `VirtualClock`, hours pass in seconds.

`restart_controller()` throws the controller away and builds a new one that knows only
what Kubernetes and RunPod hold, which is how tests prove status is the only memory.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import httpx
from prometheus_client import CollectorRegistry

from rpp.act.executor import Executor
from rpp.clock import Clock
from rpp.kube.api import KubeSettings
from rpp.kube.memory import MemoryKubeApi
from rpp.observe.prober import Prober
from rpp.observe.prometheus import PrometheusClient
from rpp.pool_metrics import PoolMetrics
from rpp.reconcile import PoolReconciler, PoolResult, Shared
from rpp.runpod import outcomes as oc
from rpp.runpod.client import RunPodClient
from rpp.sim.cloud import FakeCloud
from rpp.sim.cloud_api import CloudApi
from rpp.sim.cloud_model import FakePodInfo
from rpp.sim.inference import FakeInferencePod
from rpp.sim.proxy import ProxyApp, route_by_host

log = logging.getLogger("rpp.sim")

API_URL = "http://api.runpod.fake"
API_KEY = "sim-key-not-secret"


class Controller:
    """The controller's in-process parts, built fresh on every (re)start."""

    def __init__(
        self,
        *,
        transport: httpx.AsyncBaseTransport,
        kube: MemoryKubeApi,
        clock: Clock,
        api_key: str,
        prometheus_transport: httpx.AsyncBaseTransport | None,
        prometheus_url: str | None,
    ) -> None:
        self.registry = CollectorRegistry()
        self.runpod = RunPodClient(
            api_key=api_key,
            base_url=API_URL,
            transport=transport,
            retry_deadline=20.0,
            registry=self.registry,
        )
        self.http = httpx.AsyncClient(transport=transport)
        self.prom_http = httpx.AsyncClient(transport=prometheus_transport or transport)
        self.metrics = PoolMetrics(self.registry)
        self.reconciler = PoolReconciler(
            kube=kube,
            executor=Executor(runpod=self.runpod, kube=kube),
            prober=Prober(client=self.http),
            prometheus=PrometheusClient(base_url=prometheus_url, client=self.prom_http),
            clock=clock,
            metrics=self.metrics,
        )

    async def read_shared(self) -> Shared:
        """One listing and one notice query for every pool, as the real loop does."""
        try:
            pods: tuple[Any, ...] | None = tuple(await self.runpod.list_pods())
            error = None
        except oc.RunPodError as err:
            pods, error = None, str(err)
        try:
            notices: Mapping[str, Any] | None = await self.runpod.host_notices()
            notices_error = None
        except oc.RunPodError as err:
            notices, notices_error = None, str(err)
        return Shared(pods=pods, runpod_error=error, notices=notices, notices_error=notices_error)

    async def close(self) -> None:
        await self.runpod.aclose()
        await self.http.aclose()
        await self.prom_http.aclose()


class World:
    """Fake RunPod + fake pods + in-memory Kubernetes + one controller."""

    def __init__(
        self,
        *,
        clock: Clock,
        namespace: str = "runpod",
        boot_time: float = 60.0,
        seed: int = 0,
        api_key: str = API_KEY,
        token_key: str = "METRICS_TOKEN",
        prometheus_transport: httpx.AsyncBaseTransport | None = None,
        prometheus_url: str | None = None,
    ) -> None:
        self.clock = clock
        self.token_key = token_key
        self.pods: dict[str, FakeInferencePod] = {}
        self.cloud = FakeCloud(
            clock=clock, boot_time=boot_time, seed=seed, pod_server_factory=self._pod_server
        )
        self.app = route_by_host(CloudApi(self.cloud), ProxyApp(self.cloud))
        self.transport = httpx.ASGITransport(app=self.app)
        self.kube = MemoryKubeApi(KubeSettings(namespace=namespace), clock=clock)
        self.api_key = api_key
        self.prometheus_transport = prometheus_transport
        self.prometheus_url = prometheus_url
        self.controller = self._controller()

    def _controller(self) -> Controller:
        return Controller(
            transport=self.transport,
            kube=self.kube,
            clock=self.clock,
            api_key=self.api_key,
            prometheus_transport=self.prometheus_transport,
            prometheus_url=self.prometheus_url,
        )

    def _pod_server(self, info: FakePodInfo) -> FakeInferencePod:
        server = FakeInferencePod(
            pod_id=info.pod_id,
            clock=self.clock,
            process_start=info.started_at,
            metrics_token=info.env.get(self.token_key),
            seed=len(self.pods),
        )
        self.pods[info.pod_id] = server
        return server

    async def loop(self) -> list[PoolResult]:
        """One controller loop: one listing, then every pool in turn."""
        self.cloud.tick()
        shared = await self.controller.read_shared()
        results = []
        for obj in await self.kube.list_pools():
            results.append(await self.controller.reconciler.reconcile(obj, shared))
        return results

    async def restart_controller(self) -> None:
        """Discard the controller; the new one knows only Kubernetes and RunPod."""
        await self.controller.close()
        self.controller = self._controller()

    async def close(self) -> None:
        await self.controller.close()
