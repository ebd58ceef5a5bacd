"""One controller process's working parts, built in one place for `rpp run` and the simulator.

Where it sits: the process around observe -> decide -> act. `rpp run`
(rpp/commands/run.py) and every simulated controller process (rpp/sim/process.py) call
`assemble`, so the simulator runs the very process `rpp run` deploys. What differs
between the two is only how the process reaches the world, given as arguments:

- the Kubernetes API: the cluster's, or the in-memory one as one simulated process sees it;
- the RunPod and Prometheus transports: httpx's own, or the fake cloud's and fake Prometheus's;
- the pod HTTP client: aiohttp, or the in-process proxy;
- the clock, the metrics registry (`rpp run` adds the process collectors), the
  configuration (`rpp run` reads it from the environment, the simulator states it);

- the namespaces served: `rpp run` gives, beside its own namespace's adapter, the
  adapters that list the served namespaces (`listers`) and one per namespace
  (`kube_for`); without them, the one namespace of `kube` is served, as before;

and the hooks only one of them uses: `rpp run` gives freed heap back after each loop,
the simulator crosses its crash points between effects and hears each pool's result.

Everything else is decided here, once. In particular the secrets: one `Redactor` per
process (the RunPod API key, each key rotated in since through RUNPOD_API_KEY_FILE, and
each pool's env Secret values as the reconciler reads them), and the Kubernetes adapter
wrapped in `RedactingKube`, so status and Events are scrubbed on their way out whether
`rpp run` writes them or the simulator does. The controller's key is one `ControllerKey`
(rpp/controller/runpod_key.py), which the loop refreshes and which swaps a rotated key
into the one RunPod client and the redactor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx
from prometheus_client import CollectorRegistry

from rpp.act.executor import Checkpoint, Executor
from rpp.adapters.clock import Clock
from rpp.adapters.kube.api import KubeApi
from rpp.adapters.kube.redacting import RedactingKube
from rpp.adapters.pod_http import PodClient
from rpp.adapters.redaction import Redactor
from rpp.adapters.runpod.client import RunPodClient
from rpp.controller.config import Config
from rpp.controller.loop import ControllerLoop
from rpp.controller.pool_metrics import PoolMetrics
from rpp.controller.pool_namespaces import NamespaceParts, PoolNamespaces
from rpp.controller.reconcile import PoolReconciler, PoolResult
from rpp.controller.runpod_key import ControllerKey
from rpp.observe.prober import Prober
from rpp.observe.prometheus import PrometheusClient


@dataclass(frozen=True, kw_only=True)
class ControllerCore:
    """The parts `assemble` built; it closes what it opened (the RunPod and Prometheus
    clients), the caller what it gave (the Kubernetes adapter, the pod client)."""

    redactor: Redactor
    kube: KubeApi
    """The Kubernetes adapter given, scrubbing the status and Events it writes."""
    registry: CollectorRegistry
    metrics: PoolMetrics
    runpod: RunPodClient
    prometheus_http: httpx.AsyncClient
    reconciler: PoolReconciler
    loop: ControllerLoop

    async def close(self) -> None:
        await self.runpod.aclose()
        await self.prometheus_http.aclose()


def assemble(
    config: Config,
    *,
    kube: KubeApi,
    clock: Clock,
    runpod_transport: httpx.AsyncBaseTransport | None,
    pod_client: PodClient,
    prometheus_transport: httpx.AsyncBaseTransport | None,
    registry: CollectorRegistry,
    identity: str,
    redactor: Redactor | None = None,
    runpod_retry_deadline: float | None = None,
    between_effects: Checkpoint | None = None,
    on_result: Callable[[PoolResult], None] | None = None,
    after_loop: Callable[[], object] | None = None,
    listers: Sequence[KubeApi] = (),
    kube_for: Callable[[str], KubeApi] | None = None,
) -> ControllerCore:
    """The controller loop and everything under it, on the connections given.

    `redactor`: the process's one redactor, when the caller already needs it (`rpp run`
    scrubs its log with it); otherwise one is made for the API key.
    `runpod_retry_deadline`: None for the RunPod client's own (`rpp run`); the
    simulator's processes have always given up retrying a RunPod call after 20 s.
    `listers`, `kube_for`: the served namespaces' listing adapters and each namespace's
    adapter (rpp/controller/pool_namespaces.py); both or neither.
    """
    redactor = redactor or Redactor(always=(config.runpod_api_key,))
    # Status and Events are scrubbed on their way out, whoever wrote their texts.
    kube = RedactingKube(kube, redactor)
    metrics = PoolMetrics(registry)
    runpod = RunPodClient(
        api_key=config.runpod_api_key,
        base_url=config.runpod_api_url,
        transport=runpod_transport,
        registry=registry,
        max_answer_bytes=config.runpod_max_answer_mb << 20,
        **({} if runpod_retry_deadline is None else {"retry_deadline": runpod_retry_deadline}),
    )
    prometheus_http = httpx.AsyncClient(transport=prometheus_transport)
    # One prober for every namespace: PROBE_CONCURRENCY bounds the process, not a namespace.
    prober = Prober(
        client=pod_client,
        url_pattern=config.proxy_pattern,
        concurrency=config.probe_concurrency,
        health_limit=config.probe_health_limit,
        metrics_limit=config.probe_metrics_limit,
    )
    prometheus = PrometheusClient(base_url=config.prometheus_url, client=prometheus_http)

    def reconciler_over(scoped: KubeApi) -> PoolReconciler:
        executor = (
            Executor(runpod=runpod, kube=scoped)
            if between_effects is None
            else Executor(runpod=runpod, kube=scoped, checkpoint=between_effects)
        )
        return PoolReconciler(
            kube=scoped,
            executor=executor,
            prober=prober,
            prometheus=prometheus,
            clock=clock,
            metrics=metrics,
            proxy_url=config.proxy_pattern,
            group=config.crd_group,
            redactor=redactor,
            identity=identity,
        )

    reconciler = reconciler_over(kube)
    namespaces = None
    if kube_for is not None:
        home = NamespaceParts(kube=kube, reconciler=reconciler)

        def build(namespace: str) -> NamespaceParts:
            scoped = RedactingKube(kube_for(namespace), redactor)
            return NamespaceParts(kube=scoped, reconciler=reconciler_over(scoped))

        namespaces = PoolNamespaces(
            listers=listers, build=build, built={kube.settings.namespace: home}
        )
    loop = ControllerLoop(
        kube=kube,
        runpod=runpod,
        reconciler=reconciler,
        clock=clock,
        interval=config.reconcile_interval,
        metrics=metrics,
        key=ControllerKey(
            key=config.runpod_api_key,
            path=config.runpod_api_key_file,
            runpod=runpod,
            redactor=redactor,
        ),
        on_result=on_result,
        after_loop=after_loop,
        namespaces=namespaces,
    )
    return ControllerCore(
        redactor=redactor,
        kube=kube,
        registry=registry,
        metrics=metrics,
        runpod=runpod,
        prometheus_http=prometheus_http,
        reconciler=reconciler,
        loop=loop,
    )
