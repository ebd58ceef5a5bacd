"""A whole simulated world: the real controller against fake RunPod, pods and Kubernetes.

Where it sits: under `rpp simulate` and the story tests. Only transports are swapped:
the real controller loop (rpp/controller/loop.py), RunPod client, prober, Prometheus client,
reconciler, decide, machines and executor run against the fake RunPod cloud (REST v2 and
GraphQL through httpx's ASGI transport, the proxy through the prober's in-process client,
rpp/sim/in_process.py), fake inference pods behind that proxy, the in-memory Kubernetes
API and, when asked for, a fake Prometheus (rpp/sim/fake_prometheus.py). Time is
whatever clock it is given; on a `VirtualTimeLoop` with a `VirtualClock`, a simulated
day takes about half a minute.

The world also plays the parts around the controller: it sends app traffic to every
wired pod through the proxy, as nginx would (`send_traffic`), which is what the fake
Prometheus answers from; and it reports the cloud's ground truth, whoever caused it
(`on_cloud`: created, deleted, updated), for the simulator's timeline. A scenario's
knobs turn it through rpp/sim/knobs.py.

`restart_controller()` throws the controller away and builds a new one that knows only
what Kubernetes and RunPod hold, which is how tests prove status is the only memory.
`run_controller()` runs controller processes one after the other: when a scenario kills
one (`kill_controller`, or an armed crash point, rpp/sim/crash_points.py), the next
starts at once, as Kubernetes restarts a crashed pod. Each process reaches the world
only through its own connections (rpp/sim/process.py), which the world watches
(rpp/sim/crossings.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import httpx

from rpp.adapters.clock import Clock
from rpp.adapters.kube.api import KubeSettings
from rpp.adapters.pod_http import PodRequest, PodUnreachable
from rpp.controller.reconcile import PoolResult
from rpp.decide.nginx_slots import wired_pods
from rpp.model.proxy_hosts import proxy_host
from rpp.model.spec import RunPodPoolSpec
from rpp.model.spec_load import load_pool
from rpp.observe.prometheus import queries_from_spec
from rpp.sim.cloud import FakeCloud
from rpp.sim.cloud_api import CloudApi
from rpp.sim.cloud_model import FakePod, FakePodInfo
from rpp.sim.cloud_scenario import CloudScenario
from rpp.sim.crossings import WorldCrossings
from rpp.sim.fake_prometheus import FakePrometheus
from rpp.sim.in_process import InProcessPods, ResponderTransport
from rpp.sim.inference import FakeInferencePod
from rpp.sim.kube_memory import MemoryKubeApi, merge_patch
from rpp.sim.process import ControllerParts
from rpp.sim.proxy import ProxyApp
from rpp.sim.virtual_time import SteppedClock

PROMETHEUS_URL = "http://prometheus.fake"
API_KEY = "sim-key-not-secret"
METRICS_TOKEN = "sim-metrics-token"
HF_TOKEN = "sim-hf-token"  # the other value of each pool's env Secret
APP_LATENCY_S = 0.25
"""How long a healthy fake pod takes per app request; peers need some for RelativeLatency."""
TRAFFIC_TIMEOUT_S = 120.0  # nginx's readTimeout; the proxy's own 524 comes first anyway
APP_LIMIT = 1 << 20  # bytes of an app answer read; a fake pod's is a few hundred


@dataclass(frozen=True)
class CloudChange:
    """One change of the fake cloud's ground truth, for the timeline."""

    kind: str  # created | deleted | updated | fault
    pod_id: str | None
    name: str | None = None
    datacenter: str | None = None
    gpu_type: str | None = None
    image: str | None = None
    detail: str = ""
    api: bool = False  # made through the API (a create), not by the scenario


CloudListener = Callable[[CloudChange], None]


class ObservedCloud(FakeCloud):
    """The fake cloud, reporting every pod created, deleted, updated or broken."""

    listener: CloudListener | None = None

    def _report(self, kind: str, pod: FakePod, *, detail: str, api: bool = False) -> None:
        if self.listener is not None:
            info = pod.info
            self.listener(
                CloudChange(
                    kind,
                    info.pod_id,
                    info.name,
                    info.datacenter,
                    info.gpu_type,
                    info.image,
                    detail,
                    api,
                )
            )

    def create_pod(self, body: Mapping[str, Any]) -> FakePod:
        pod = super().create_pod(body)
        detail = f"created through the API, ${pod.cost_per_hr:g}/h"
        self._report("created", pod, detail=detail, api=True)
        return pod

    def add_pod(self, **kwargs: Any) -> FakePod:
        pod = super().add_pod(**kwargs)
        self._report("created", pod, detail="running before the start")
        return pod

    def update_pod(self, pod_id: str, body: Mapping[str, Any]) -> FakePod:
        before = self.get(pod_id).info.image
        pod = super().update_pod(pod_id, body)
        change = f"image {before} -> {pod.info.image}" if before != pod.info.image else "updated"
        self._report("updated", pod, detail=f"{change}; container restarted on the same machine")
        return pod

    def delete_pod(self, pod_id: str) -> None:
        pod = self.get(pod_id)
        super().delete_pod(pod_id)
        self._report("deleted", pod, detail="terminated; its GPU went back to stock")


class World:
    """Fake RunPod + fake pods + in-memory Kubernetes (+ fake Prometheus) + one controller."""

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
        cloud: CloudScenario | None = None,
        interval: float = 30.0,
        fake_prometheus: bool = False,
        on_cloud: CloudListener | None = None,
        on_result: Callable[[PoolResult], None] | None = None,
    ) -> None:
        self.clock = clock
        self.token_key = token_key
        self.interval = interval
        self.result_listeners: list[Callable[[PoolResult], None]] = []
        if on_result is not None:
            self.result_listeners.append(on_result)
        self.cloud_listeners: list[CloudListener] = []
        if on_cloud is not None:
            self.cloud_listeners.append(on_cloud)
        self.pods: dict[str, FakeInferencePod] = {}
        self.created: list[tuple[str, str]] = []  # (pod id, name), every pod ever, in order
        self._specs: dict[str, RunPodPoolSpec] = {}
        self._manifests: dict[str, Mapping[str, Any]] = {}  # as applied, every patch merged in
        # Per pool: the slots ConfigMap's name and resourceVersion, and its wired pods.
        self._targets: dict[str, tuple[str, str, list[str]]] = {}
        self._queries: dict[str, tuple[str, str]] = {}
        self._traffic_tasks: set[asyncio.Task[None]] = set()
        self.cloud = ObservedCloud(
            clock=clock,
            boot_time=cloud.boot_time if cloud else boot_time,
            provisioning_time=cloud.provisioning_time if cloud else None,
            seed=cloud.seed if cloud else seed,
            pod_server_factory=lambda info: self._pod_server(info),
            rate_limit_per_minute=cloud.rate_limit_per_minute if cloud else None,
        )
        self.cloud.listener = self._cloud_changed
        if cloud is not None:
            self._build_cloud(cloud)
        self.transport = httpx.ASGITransport(app=CloudApi(self.cloud))  # RunPod's API
        self.pod_client = InProcessPods(ProxyApp(self.cloud).respond)  # pods, by proxy
        self.kube = MemoryKubeApi(KubeSettings(namespace=namespace), clock=clock)
        self.host_clock = SteppedClock(clock)  # the controller's host: `do: clock-step`
        self.crossings = WorldCrossings(self.kube, clock)
        self.restarts = 0
        self.prometheus: FakePrometheus | None = None
        if fake_prometheus:
            self.prometheus = FakePrometheus(
                clock=clock, resolve=self._queries.get, targets=self.targets
            )
            prometheus_transport = ResponderTransport(self.prometheus.respond)
            prometheus_url = PROMETHEUS_URL
        self.api_key = api_key
        self.prometheus_transport = prometheus_transport
        self.prometheus_url = prometheus_url
        self.controller = self.new_controller()

    def new_controller(
        self,
        *,
        on_result: Callable[[PoolResult], None] | None = None,
        identity: str = "simulator",
    ) -> ControllerParts:
        """A fresh controller process on this world (another replica, or a restart)."""
        return ControllerParts(
            identity=identity,
            transport=self.transport,
            pods=self.pod_client,
            kube=self.kube,
            clock=self.clock,
            host=self.host_clock,
            api_key=self.api_key,
            prometheus_transport=self.prometheus_transport,
            prometheus_url=self.prometheus_url,
            crossings=self.crossings,
            interval=self.interval,
            on_result=on_result or self._result,
        )

    def scrub(self, text: str) -> str:
        """`text` with the running controller process's secrets cut out, by its own
        redactor (the API key, each pool's env Secret values once a loop read them)."""
        return self.controller.redactor.scrub(text)

    def _result(self, result: PoolResult) -> None:
        for listener in self.result_listeners:
            listener(result)

    def _build_cloud(self, scenario: CloudScenario) -> None:
        """The scenario's starting cloud (as rpp.sim.cloud_scenario.build_cloud does)."""
        self.cloud.balance = scenario.balance
        self.cloud.listing_lag = scenario.listing_lag
        self.cloud.images = dict(scenario.images)
        for s in scenario.stock:
            self.cloud.set_stock(s.datacenter, s.gpu_type, s.cloud, s.count, s.cost_per_hr)
        for template_id, image, env, ports in scenario.templates:
            self.cloud.add_template(template_id, image=image, env=env, ports=ports)
        for p in scenario.existing:
            pod = self.cloud.add_pod(
                name=p.name,
                image=p.image,
                gpu_type=p.gpu_type,
                datacenter=p.datacenter,
                cloud=p.cloud,
                env={self.token_key: METRICS_TOKEN, **p.env},
                ports=p.ports,
                gpu_count=p.gpu_count,
                booted=p.booted,
                pod_id=p.pod_id,
            )
            if p.note:
                self.cloud.set_machine_note(pod.info.pod_id, p.note)
        scenario.start_faults(self.cloud)

    def _pod_server(self, info: FakePodInfo) -> FakeInferencePod:
        server = FakeInferencePod(
            pod_id=info.pod_id,
            clock=self.clock,
            process_start=info.started_at,
            latency_s=APP_LATENCY_S,
            metrics_token=info.env.get(self.token_key),
            seed=len(self.pods),
        )
        self.pods[info.pod_id] = server
        return server

    def _cloud_changed(self, change: CloudChange) -> None:
        if change.kind == "created" and change.pod_id and change.name:
            self.created.append((change.pod_id, change.name))
        for listener in self.cloud_listeners:
            listener(change)

    # -- pools -------------------------------------------------------------------------

    def setup_pool(self, manifest: Mapping[str, Any], *, default_image: str) -> None:
        """What a human applies before the controller can act: the pool and its Secret (the
        controller creates the slots ConfigMap itself)."""
        obj = self.apply_pool(manifest)
        spec = self._specs[obj["metadata"]["name"]]
        if spec.env_from_secret:
            data = {"HF_TOKEN": HF_TOKEN}
            if spec.metrics_token_key:
                data[spec.metrics_token_key] = METRICS_TOKEN
            self.kube.put_secret(spec.env_from_secret, data)
        if spec.template_id and spec.template_id not in self.cloud.templates:
            self.cloud.add_template(spec.template_id, image=spec.image or default_image)

    def apply_pool(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        obj = self.kube.apply_pool(manifest)
        self._manifests[obj["metadata"]["name"]] = manifest
        self._remember(obj)
        return obj

    def patch_pool(self, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """A human's `kubectl apply` of the pool's spec changed by `patch`: a merge patch
        while the pool exists (being deleted too); once it is gone, the pool created again
        from its manifest with every patch so far merged in, as `kubectl apply` would."""
        manifest = self._manifests.get(name)
        if manifest is not None:
            spec = merge_patch(manifest.get("spec") or {}, patch)
            self._manifests[name] = manifest = {**manifest, "spec": spec}
        if manifest is None or self.kube.has_pool(name):
            obj = self.kube.patch_pool_spec(name, patch)
        else:
            obj = self.kube.apply_pool(manifest)
        self._remember(obj)
        return obj

    def _remember(self, obj: Mapping[str, Any]) -> None:
        pool, problems = load_pool(obj)
        if pool is None:
            raise ValueError(f"invalid pool: {'; '.join(str(p) for p in problems)}")
        self._specs[pool.name] = pool.spec
        for key in [k for k, v in self._queries.items() if v[0] == pool.name]:
            del self._queries[key]
        for field, promql in queries_from_spec(pool.spec).configured().items():
            self._queries[promql.strip()] = (pool.name, field)

    def targets(self, pool: str) -> list[str]:
        """The pods in the pool's nginx slots: nginx's upstreams and /sd/<pool>'s targets."""
        spec = self._specs.get(pool)
        if spec is None:
            return []
        name = spec.nginx.slots_config_map
        # Read again only when the ConfigMap changed: the traffic and every Prometheus
        # query ask this, and parsing the slot index each time was a tenth of a query.
        version = self.kube.config_map_version(name)
        known = self._targets.get(pool)
        if known is not None and known[:2] == (name, version):
            return list(known[2])
        stored = self.kube.config_map(name)
        found = sorted(set(wired_pods(stored.data if stored else None).values()))
        self._targets[pool] = (name, version, found)
        return list(found)

    def pool_pod(self, pool: str, number: int) -> str | None:
        """The id of the pool's `number`th pod by creation (from 1), or None."""
        spec = self._specs[pool]
        mine = [
            pod_id
            for pod_id, name in self.created
            if name.startswith(spec.name_prefix) or pod_id in spec.adopt
        ]
        return mine[number - 1] if 0 < number <= len(mine) else None

    # -- the controller ----------------------------------------------------------------

    async def loop(self) -> list[PoolResult]:
        """One controller loop: one listing, then every pool, concurrently."""
        self.cloud.tick()
        return await self.controller.loop.loop_once()

    async def restart_controller(self) -> None:
        """Discard the controller; the new one knows only Kubernetes and RunPod."""
        self.controller.life.end("restarted")
        await self.controller.close()
        self.controller = self.new_controller()
        self.restarts += 1

    def kill_controller(self, cause: str) -> None:
        """Kill the running controller process now; `run_controller` starts the next."""
        self.controller.life.end(cause)

    async def run_controller(
        self, *, stop: asyncio.Event, on_restart: Callable[[str], None] | None = None
    ) -> None:
        """Run controller processes until `stop`: each killed one is replaced at once."""
        while True:
            parts = self.controller
            running = asyncio.create_task(parts.loop.run(stop=stop), name="rpp-controller")
            died = asyncio.create_task(parts.life.died.wait(), name="rpp-controller-death")
            try:
                await asyncio.wait({running, died}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not running.done():
                    running.cancel()  # killed, or the simulation itself is cancelled
                died.cancel()
                await asyncio.gather(running, died, return_exceptions=True)
            if not parts.life.dead:
                running.result()  # stopped as asked, or a bug in the loop surfaces
                return
            await self.restart_controller()
            if on_restart is not None:
                on_restart(parts.life.cause)

    # -- traffic -----------------------------------------------------------------------

    def send_traffic(self) -> None:
        """One app request to every wired pod of every pool, through the proxy."""
        if self.prometheus is None:
            return
        for pool, spec in sorted(self._specs.items()):
            for pod_id in self.targets(pool):
                task = asyncio.create_task(self._request(pod_id, spec.port))
                self._traffic_tasks.add(task)
                task.add_done_callback(self._traffic_tasks.discard)

    async def _request(self, pod_id: str, port: int) -> None:
        assert self.prometheus is not None
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(TRAFFIC_TIMEOUT_S):
                # Straight to the pods' in-process client: the world's own load needs no
                # HTTP client, whose per-request work would be a third of the simulation.
                answer = await self.pod_client.get(_app_request(pod_id, port), limit=APP_LIMIT)
        except (TimeoutError, PodUnreachable):
            return
        if answer.status in (200, 500):  # the pod answered: its counters moved
            self.prometheus.record(
                pod_id, duration=loop.time() - started, failed=answer.status == 500
            )

    async def close(self) -> None:
        for task in list(self._traffic_tasks):
            task.cancel()
        await asyncio.gather(*self._traffic_tasks, return_exceptions=True)
        await self.controller.close()


@lru_cache(maxsize=4096)
def _app_request(pod_id: str, port: int) -> PodRequest:
    """One app request to a pod, built once and sent again (a bodiless GET never changes)."""
    host = proxy_host(pod_id, port)
    return PodRequest(url=f"http://{host}/generate", host=host, user_agent="simulated-client")
