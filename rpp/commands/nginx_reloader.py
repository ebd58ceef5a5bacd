"""`rpp nginx-reloader`: the sidecar that makes nginx serve the slots ConfigMap at once.

Runs in every nginx pod, from the controller's image (examples/nginx.yaml), beside nginx:
it watches the pool's slots ConfigMap through the API (get and watch on that one name),
writes its files into a volume nginx includes them from, and reloads nginx gracefully
(rpp/controller/slots_reload.py says how, and why not a restart). Before the controller
has written anything it writes placeholder files, so nginx starts and answers 503.

Configuration: flags, plus NAMESPACE (default: the ServiceAccount's), LOG_LEVEL and
LOG_FORMAT as for `rpp run`. `/healthz` and `/metrics` (runpod_pool_nginx_*) are served
on --listen. A bad flag or variable stops it with one line naming it (exit 2). Its watch
or its file writer stopping on an error is logged and ends the process (exit 1): the
kubelet restarts the container, where a sidecar running on would leave nginx stale.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

import uvicorn
from prometheus_client import CollectorRegistry, make_asgi_app

from rpp.adapters.clock import SystemClock
from rpp.adapters.kube.api import KubeSettings
from rpp.adapters.logs import configure_logging, layer_logger
from rpp.adapters.nginx import NginxMaster, SlotFiles
from rpp.controller.asgi import (
    ASGIApp,
    Receive,
    Scope,
    Send,
    Server,
    reject_non_http,
    send_bytes,
)
from rpp.controller.config import (
    ConfigError,
    parse_listen,
    parse_log_format,
    parse_log_level,
    read_namespace,
)
from rpp.controller.slots_reload import ReloaderDied, ReloaderMetrics, SlotsReloader
from rpp.decide.nginx_slots import upstream_name

log = layer_logger("rpp.commands")
COMPONENT = "rpp-nginx-reloader"
"""Its Events' source and the field manager of what it writes."""
RBAC_HINT = "the reloader's Role lacks this; apply the Role in examples/nginx.yaml"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "nginx-reloader",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("--pool", required=True, help="the RunPodPool whose slots nginx serves")
    parser.add_argument("--config-map", help="the slots ConfigMap (default: <pool>-nginx-slots)")
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path("/etc/nginx/slots"),
        help="where nginx includes the slots from: <dir>/current/*.conf (default %(default)s)",
    )
    parser.add_argument(
        "--pid-file",
        type=Path,
        default=Path("/tmp/nginx.pid"),
        help="nginx's pid file, as its `pid` directive names it (default %(default)s)",
    )
    parser.add_argument(
        "--status-port",
        type=_port,
        default=8079,
        help="127.0.0.1 port of the status server added to nginx (default %(default)s)",
    )
    parser.add_argument(
        "--listen", default="0.0.0.0:9101", help="/healthz and /metrics (default %(default)s)"
    )
    parser.add_argument(
        "--bind",
        help="make the slot ports listen on this address only (default: every address, "
        "so Prometheus can scrape each pod through its slot)",
    )
    parser.add_argument(
        "--reload-timeout",
        type=_seconds,
        default=10.0,
        help="seconds nginx may take to load new slots before they count as rejected",
    )
    parser.add_argument(
        "--kubeconfig", help="kubeconfig to use outside a pod (default: KUBECONFIG)"
    )
    parser.add_argument(
        "--init-only",
        action="store_true",
        help="write placeholder files when there are none (nginx answers 503), then exit: "
        "the init container that lets nginx start before the sidecar runs",
    )
    parser.set_defaults(func=run)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number, got {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be 1-65535, got {port}")
    return port


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0 seconds, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    try:
        host, port = parse_listen(args.listen, name="--listen")
        level = parse_log_level(os.environ.get("LOG_LEVEL") or "INFO")
        fmt = parse_log_format(os.environ.get("LOG_FORMAT") or "text")
        namespace = read_namespace(os.environ)
    except ConfigError as error:
        print(f"rpp nginx-reloader: {error}", file=sys.stderr)
        return 2
    configure_logging(level, fmt)
    files = SlotFiles(
        root=args.dir,
        upstream=upstream_name(args.pool),
        status_port=args.status_port,
        bind=args.bind,
    )
    if args.init_only:
        if files.written_version() is None:
            files.write_placeholders()
            log.info("placeholder slots written in %s/current: nginx answers 503", args.dir)
        return 0
    return asyncio.run(_main(args, files, host=host, port=port, given_namespace=namespace))


async def _main(
    args: argparse.Namespace,
    files: SlotFiles,
    *,
    host: str,
    port: int,
    given_namespace: str | None,
) -> int:
    from kubernetes.aio.client.api_client import ApiClient

    from rpp.adapters.kube.connect import ClusterConfigError, load_cluster_access
    from rpp.adapters.kube.real import RealKubeApi

    try:
        access = await load_cluster_access(kubeconfig=args.kubeconfig)
    except ClusterConfigError as error:
        log.error("%s", error)
        return 2
    namespace = given_namespace or access.namespace
    if not namespace:
        log.error("NAMESPACE: not set, and the credentials from %s name none", access.source)
        return 2
    name = args.config_map or f"{args.pool}-nginx-slots"
    settings = KubeSettings(namespace=namespace, component=COMPONENT, rbac_hint=RBAC_HINT)
    kube = RealKubeApi(ApiClient(access.configuration), settings)
    registry = CollectorRegistry()
    reloader = SlotsReloader(
        kube=kube,
        config_map=name,
        files=files,
        nginx=NginxMaster(pid_file=args.pid_file, status_port=args.status_port),
        metrics=ReloaderMetrics(registry, config_map=name),
        clock=SystemClock(),
        reload_timeout_s=args.reload_timeout,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if files.written_version() is None:
        files.write_placeholders()  # before /healthz answers: nginx may start now
    server = Server(
        uvicorn.Config(_app(registry), host=host, port=port, lifespan="off", log_level="warning")
    )
    log.info(
        "rpp nginx-reloader: ConfigMap %s in namespace %s (from %s) -> %s/current, nginx "
        "pid file %s, status port %d, listening on %s:%d",
        name,
        namespace,
        "NAMESPACE" if given_namespace else access.source,
        args.dir,
        args.pid_file,
        args.status_port,
        host,
        port,
    )
    serving = asyncio.create_task(server.serve())
    try:
        await reloader.run(stop)
    except ReloaderDied as error:
        # Through the process's redacting handler, with the traceback of the cause.
        log.error(
            "%s; exiting so Kubernetes restarts the sidecar", error, exc_info=error.__cause__
        )
        return 1
    finally:
        server.should_exit = True
        await serving
        await kube.close()
    return 0


def _app(registry: CollectorRegistry) -> ASGIApp:
    metrics = make_asgi_app(registry)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if await reject_non_http(scope, receive, send):
            return
        if scope["path"] == "/metrics":
            await metrics(scope, receive, send)
            return
        status, text = (200, b"ok\n") if scope["path"] == "/healthz" else (404, b"not found\n")
        await send_bytes(send, status, text, content_type="text/plain; charset=utf-8")

    return app
