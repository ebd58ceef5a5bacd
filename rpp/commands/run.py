"""`rpp run`: the controller process, as deployed (deploy/controller.yaml, the Helm chart).

Reads its configuration from the environment (rpp/controller/config.py; a bad value stops it with
one line naming the variable), connects to the cluster (the pod's ServiceAccount, else
a kubeconfig), builds the process on the real connections (rpp/controller/assembly.py
`assemble`, which builds every simulated process too) and runs, all at once:

- the HTTP endpoints on LISTEN_ADDRESS (/healthz, /metrics, /sd/<pool>), on every replica,
  and /healthz alone on HEALTH_LISTEN_ADDRESS when it is set (the chart's probe port);
- leader election on the Lease `runpod-pool-controller`: only the holder reconciles;
- the controller loop (rpp/controller/loop.py), while this replica leads.

Time is kept on the monotonic clock, anchored on the API server's `Date` header (the
adapter reads it off every answer): a step of the host's clock moves no cap or rule
duration, and is logged once with its size (rpp/adapters/clock.py `SteadyClock`).

SIGTERM (or SIGINT): the loop under way finishes (its actions carried out, its status
written), the Lease is released so the standby takes over at once, the HTTP server
stops, and the process exits 0.

Pointed at `rpp fake-runpod` (RUNPOD_API_URL and RUNPOD_PROXY_URL), it rehearses a pool on
any cluster without spending money: docs/rehearsal.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import signal
import socket
import sys
import uuid
from typing import Any

import httpx
import uvicorn
from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

from rpp import __version__
from rpp.adapters.clock import Clock, SteadyClock
from rpp.adapters.kube import light_import
from rpp.adapters.kube.api import KubeApi, KubeSettings
from rpp.adapters.logs import configure_logging, layer_logger
from rpp.adapters.process_memory import (
    collect_less_often,
    freeze_startup_objects,
    release_free_heap,
    trim_socket_buffers,
    trim_tls_buffers,
)
from rpp.adapters.redaction import Redactor
from rpp.controller.asgi import ASGIApp, Server
from rpp.controller.assembly import assemble
from rpp.controller.config import Config, ConfigError, load_config
from rpp.controller.http_api import HttpApi
from rpp.controller.leader import LeaderElector, LeaseTiming
from rpp.controller.pool_namespaces import ServedAdapters
from rpp.observe.prober import make_client

log = layer_logger("rpp.commands")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "run",
        description="Run the controller. Configuration comes from the environment: "
        "RUNPOD_API_KEY or RUNPOD_API_KEY_FILE (one of them: the key, or a file holding it "
        "that is read again every loop, so a rotated key needs no restart), NAMESPACE or "
        "NAMESPACES (a comma-separated list, or * for every namespace), "
        "CRD_GROUP, PROMETHEUS_URL, RECONCILE_INTERVAL, "
        "LISTEN_ADDRESS, HEALTH_LISTEN_ADDRESS, LOG_LEVEL, LOG_FORMAT, RUNPOD_API_URL, "
        "RUNPOD_PROXY_URL, "
        "RUNPOD_MAX_ANSWER_MB.",
    )
    parser.add_argument(
        "--kubeconfig", help="kubeconfig to use outside a pod (default: KUBECONFIG)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(os.environ)
    except ConfigError as error:
        print(f"rpp run: {error}", file=sys.stderr)
        return 2
    # One redactor for the whole process: the log, status, Events and /metrics scrub the
    # same secrets (the API key now, each key rotated in through RUNPOD_API_KEY_FILE later,
    # each pool's env Secret values as they are read).
    redactor = Redactor(always=(config.runpod_api_key,))
    configure_logging(config.log_level, config.log_format, redactor=redactor)
    # Two TLS connections per pod: 4 KiB read buffers instead of 256 KiB each.
    trim_tls_buffers()
    trim_socket_buffers()
    # The Kubernetes client's few classes the adapter uses, not its 900 generated ones.
    light_import.install()
    return asyncio.run(_main(config, kubeconfig=args.kubeconfig, redactor=redactor))


async def _main(config: Config, *, kubeconfig: str | None, redactor: Redactor) -> int:
    from kubernetes.aio.client.api_client import ApiClient

    from rpp.adapters.kube.connect import ClusterConfigError, load_cluster_access
    from rpp.adapters.kube.real import RealKubeApi

    try:
        access = await load_cluster_access(kubeconfig=kubeconfig)
    except ClusterConfigError as error:
        log.error("%s", error)
        return 2
    namespace = config.namespace or access.namespace
    if not namespace:
        log.error(
            "NAMESPACE: not set, and the credentials from %s name no namespace; set NAMESPACE",
            access.source,
        )
        return 2
    settings = KubeSettings(namespace=namespace, crd_group=config.crd_group)
    # Time by the monotonic clock, anchored on (and checked against) the API server's Date.
    clock = SteadyClock()
    kube = RealKubeApi(ApiClient(access.configuration), settings, dates=clock)
    served = ServedAdapters(
        home=kube,
        make=lambda other: RealKubeApi(
            ApiClient(access.configuration),
            dataclasses.replace(settings, namespace=other),
            dates=clock,
        ),
        watched=config.watched,
    )
    process = ControllerProcess(config, kube=kube, clock=clock, redactor=redactor, served=served)
    collect_less_often()  # a loop's objects die by their refcounts, not the collector
    freeze_startup_objects()  # what start built lives as long as the process
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _stopper(stop, sig))
    log.info(
        "runpod-pool-controller %s starting as %s: namespace %s (from %s), serving %s, "
        "CRD group %s, "
        "RunPod %s (the key from %s), pod traffic %s, Prometheus %s, every %gs, listening on "
        "%s:%d",
        __version__,
        process.identity,
        namespace,
        "NAMESPACE" if config.namespace else access.source,
        config.watched.describe(namespace),
        config.crd_group,
        config.runpod_api_url,
        "RUNPOD_API_KEY"
        if config.runpod_api_key_file is None
        else f"RUNPOD_API_KEY_FILE={config.runpod_api_key_file}, read every loop",
        config.proxy_pattern,
        config.prometheus_display,
        config.reconcile_interval,
        config.listen_host,
        config.listen_port,
    )
    return await process.serve(stop)


def _stopper(stop: asyncio.Event, sig: signal.Signals) -> Any:
    def handler() -> None:
        if not stop.is_set():
            log.info("%s: finishing the loop under way, then releasing the Lease", sig.name)
        stop.set()

    return handler


class ControllerProcess:
    """Every part of one controller process, wired together: what `assemble` builds
    (rpp/controller/assembly.py, the simulator's processes too), plus the Lease and the
    HTTP endpoints, which only a deployed process has."""

    def __init__(
        self,
        config: Config,
        *,
        kube: KubeApi,
        clock: Clock,
        identity: str | None = None,
        timing: LeaseTiming | None = None,
        runpod_transport: httpx.AsyncBaseTransport | None = None,
        redactor: Redactor | None = None,
        served: ServedAdapters | None = None,
    ) -> None:
        self.config = config
        self.served = served
        host = config.pod_name or socket.gethostname()
        # Unique per process: a restarted replica must not mistake the old Lease for its own.
        self.identity = identity or f"{host}_{uuid.uuid4().hex[:8]}"
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.pod_client = make_client(url_pattern=config.proxy_pattern)
        self.core = assemble(
            config,
            kube=kube,
            clock=clock,
            runpod_transport=runpod_transport,
            pod_client=self.pod_client,
            prometheus_transport=None,
            registry=self.registry,
            identity=self.identity,
            redactor=redactor,
            after_loop=release_free_heap,
            listers=() if served is None or served.single else served.listers,
            kube_for=None if served is None or served.single else served.kube_for,
        )
        self.redactor = self.core.redactor
        self.kube = kube = self.core.kube
        self.metrics = self.core.metrics
        self.runpod = self.core.runpod
        self.loop = self.core.loop
        self.elector = LeaderElector(
            kube=kube,
            identity=self.identity,
            clock=clock,
            timing=timing,
            on_change=lambda leading: self.metrics.leader.set(1 if leading else 0),
        )
        self.api = HttpApi(
            registry=self.registry, health=self.loop.health, kube=kube, redactor=self.redactor
        )

    async def serve(self, stop: asyncio.Event) -> int:
        """Serve HTTP, elect, run the loop until `stop`; then release and close."""
        listens: list[tuple[str, ASGIApp, str, int]] = [
            ("LISTEN_ADDRESS", self.api, self.config.listen_host, self.config.listen_port)
        ]
        if self.config.health_listen is not None:
            host, port = self.config.health_listen
            listens.append(("HEALTH_LISTEN_ADDRESS", self.api.health_app, host, port))
        servers: list[tuple[Server, asyncio.Task[None]]] = []
        for variable, app, host, port in listens:
            # asgi3 said outright: uvicorn's guess takes a bound method for an ASGI2 app.
            config = uvicorn.Config(
                app,
                host=host,
                port=port,
                interface="asgi3",
                lifespan="off",
                log_level="warning",
                access_log=False,
            )
            server = Server(config)
            serving = asyncio.create_task(server.serve(), name=f"rpp-http-{port}")
            servers.append((server, serving))
            while not server.started and not serving.done():
                await asyncio.sleep(0.02)
            if not server.started:
                with contextlib.suppress(BaseException):
                    serving.result()
                log.error(
                    "%s: cannot listen on %s:%d (in use, or not an address of this host); "
                    "set another %s",
                    variable,
                    host,
                    port,
                    variable,
                )
                await self._stop_serving(servers)
                await self.close()
                return 1
        electing = asyncio.create_task(self.elector.run(), name="rpp-leader")
        try:
            await self.loop.run(stop=stop, elector=self.elector)
        finally:
            electing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await electing
            await self.elector.release()
            await self._stop_serving(servers)
            await self.close()
        log.info("stopped")
        return 0

    @staticmethod
    async def _stop_serving(servers: list[tuple[Server, asyncio.Task[None]]]) -> None:
        for server, _ in servers:
            server.should_exit = True
        for _, serving in servers:
            with contextlib.suppress(BaseException):
                await serving

    async def close(self) -> None:
        await self.core.close()
        await self.pod_client.aclose()
        if self.served is not None:
            await self.served.close()
        await self.kube.close()
