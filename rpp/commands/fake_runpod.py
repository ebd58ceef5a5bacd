"""`rpp fake-runpod`: the fake RunPod cloud over real HTTP, for rehearsals and e2e tests.

Serves, on one port, RunPod REST v2 (`/v2/...`), the GraphQL notice query
(`/graphql`), the control endpoints (`/_fake/...`, see rpp.sim.cloud_control) and the
RunPod HTTP proxy (requests whose Host is `{podId}-{port}.proxy.runpod.net`). Point a
controller at it with its RunPod base URL, use any non-empty API key ("ro-..." acts as
a Read Only key), and rehearse a pool without spending money. Time is the wall clock.

`--port 0` picks a free port; the first line on stdout says which one was bound.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
from pathlib import Path

import uvicorn

from rpp.adapters.clock import Clock, SystemClock
from rpp.model.documents import clip
from rpp.sim.asgi_io import CUT_STREAM_LOG, ASGIApp
from rpp.sim.cloud import FakePodInfo, PodServer, PodServerFactory
from rpp.sim.cloud_api import CloudApi
from rpp.sim.cloud_scenario import CloudScenario, ScenarioError, build_cloud, load_cloud_scenario
from rpp.sim.inference import FakeInferencePod
from rpp.sim.inference_work import WorkLog
from rpp.sim.proxy import CDN_LIMIT_S, ProxyApp, route_by_host

CLIP_LINE = 400  # an error line: the field's path and sentence, and a clipped value
KEEP_ALIVE_S = 75  # idle client connections kept this long (nginx's default)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--port must be a number, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"--port must be 0-65535 (0: any free port), got {port}")
    return port


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "fake-runpod",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("--port", type=_port, required=True, help="port to listen on (0: any)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--scenario", type=Path, help="YAML file whose `cloud:` section sets stock and pods"
    )
    parser.add_argument(
        "--proxy-limit",
        type=float,
        default=CDN_LIMIT_S,
        help=f"seconds before the proxy answers 524 (default {CDN_LIMIT_S:g})",
    )
    parser.add_argument(
        "--pod-latency",
        type=float,
        default=0.0,
        help="seconds every fake pod takes to answer (default 0)",
    )
    parser.add_argument("--certfile", type=Path, help="serve over TLS with this certificate (PEM)")
    parser.add_argument("--keyfile", type=Path, help="the certificate's private key (PEM)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        scenario = load_cloud_scenario(args.scenario) if args.scenario else CloudScenario()
    except ScenarioError as error:
        for line in str(error).splitlines():
            print(clip(f"rpp fake-runpod: {line}", CLIP_LINE), file=sys.stderr)
        return 2
    if args.proxy_limit <= 0:
        print("rpp fake-runpod: --proxy-limit must be positive seconds", file=sys.stderr)
        return 2
    if args.pod_latency < 0:
        print("rpp fake-runpod: --pod-latency must be 0 or more seconds", file=sys.stderr)
        return 2
    if (args.certfile is None) != (args.keyfile is None):
        print("rpp fake-runpod: give --certfile and --keyfile together", file=sys.stderr)
        return 2
    clock = SystemClock()
    work = WorkLog()
    pods = _inference_pods(clock, work, latency_s=args.pod_latency)
    cloud = build_cloud(scenario, clock=clock, pod_server_factory=pods)
    app = route_by_host(CloudApi(cloud, work_log=work), ProxyApp(cloud, limit_s=args.proxy_limit))
    tls = (args.certfile, args.keyfile) if args.certfile is not None else None
    return asyncio.run(_serve(app, host=args.host, port=args.port, tls=tls))


def _inference_pods(clock: Clock, work: WorkLog, *, latency_s: float = 0.0) -> PodServerFactory:
    """Every pod runs the fake inference service, its process starting when it boots.

    The metrics token is the pod's METRICS_TOKEN env value (the README's example key).
    `latency_s`: every answer (health, metrics, app) takes that long, as a far pod's would.
    Every pod logs its work in `work` (GET /_fake/work).
    """

    def factory(info: FakePodInfo) -> PodServer:
        pod = FakeInferencePod(
            pod_id=info.pod_id,
            clock=clock,
            process_start=info.started_at,
            metrics_token=info.env.get("METRICS_TOKEN"),
            work_log=work,
        )
        if latency_s:
            pod.slow(latency_s)
        return pod

    return factory


class _CutStreams(logging.Filter):
    """A stream a failing pod cuts is the fake doing its job, not a server error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != CUT_STREAM_LOG


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, bound here rather than inside uvicorn, so a port in
    use is one line from us instead of uvicorn's log and a traceback. OSError if not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(socket.SOMAXCONN)
    except OSError:
        sock.close()
        raise
    return sock


async def _serve(
    app: ASGIApp, *, host: str, port: int, tls: tuple[Path, Path] | None = None
) -> int:
    try:
        sock = listen(host, port)
    except OSError as error:
        hint = "; pick another --port (0: any free port)" if port else ""
        print(
            f"rpp fake-runpod: cannot listen on {host}:{port}: "
            f"{(error.strerror or str(error)).lower()}{hint}",
            file=sys.stderr,
        )
        return 2
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_level="warning",
        access_log=False,
        # A controller probes every pod every loop (30 s by default): keep its
        # connections open across loops, as a long-lived proxy does, not uvicorn's 5 s.
        timeout_keep_alive=KEEP_ALIVE_S,
        ssl_certfile=str(tls[0]) if tls else None,
        ssl_keyfile=str(tls[1]) if tls else None,
    )
    server = uvicorn.Server(config)
    logging.getLogger("uvicorn.error").addFilter(_CutStreams())
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if sock.family == socket.AF_INET6 else bound_host
    url = f"{'https' if tls else 'http'}://{shown}:{bound_port}"
    print(f"fake RunPod listening on {url}", flush=True)
    print(
        f"  REST v2 {url}/v2  GraphQL {url}/graphql  control {url}/_fake/  "
        "proxy: Host <podId>-<port>.proxy.runpod.net",
        flush=True,
    )
    with sock:
        await server.serve(sockets=[sock])
    return 0
