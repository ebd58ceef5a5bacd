"""Fake inference pods: the service a pool runs, with knobs for the ways it fails.

This sits outside observe -> decide -> act: it is what the controller observes. The
simulator and the fake RunPod cloud call it in-process (`respond`, through the proxy
in rpp/sim/proxy.py); the tests and the benchmark serve it over real HTTP (uvicorn on
127.0.0.1, its ASGI side). Either way the prober and Prometheus see the same thing a
real pod shows them:

- the health path answers 200;
- the metrics path answers Prometheus text, the page prometheus_client renders for the
  process's metrics (rpp/sim/pod_metrics.py): `process_start_time_seconds`, `*_created`
  samples, a request latency histogram, a request counter, a 5xx counter and a queue
  gauge;
- the app paths serve inference-shaped work (rpp/sim/inference_work.py): `/generate`
  (and `/`) a whole JSON answer after the request's own `seconds` or the pod's latency,
  `/stream` server-sent events; each piece of work goes into the shared `WorkLog`.

Time comes from the injected `Clock` (process start, `*_created`) and from the running
event loop (`asyncio.sleep`, latency measurement), so a virtual-time loop skips the
waits. Every `*_created` sample is the pod's process start, which is what a restarted
process would show and what restart detection reads.

Knobs: `die()` (the service stops; behind the proxy that is a 502), `hang()` (requests
never answer until released), `fail_after(s)` (every request fails s seconds into it),
`slow(s)` (every answer takes s seconds longer), `errors(ratio)` (that share of app
requests answers 500, deterministic from the seed), `restart(now)` (a new process: new
start time, counters reset), `stop()` (the pod was stopped or terminated), `recover()`
(clears die, hang, fail_after, slow and errors). die, hang and fail_after reach the
requests in flight at once, as a crashing process takes its requests with it.
`run_image(behaviour)` is the fake cloud saying which image the container runs: that
image's error share and latency hold until the next one, and an image that fails to
start never serves.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hmac
import random
from collections.abc import MutableMapping

from rpp.adapters.clock import Clock
from rpp.sim.asgi_io import Receive, Reply, Request, Scope, Send, asgi_app
from rpp.sim.cloud_model import ImageBehaviour
from rpp.sim.inference_work import (
    STREAM_PATH,
    ServiceMode,
    Work,
    WorkFailed,
    WorkLog,
    WorkRecord,
    answer,
    read_order,
    stream_events,
    wake_all,
)
from rpp.sim.pod_metrics import ProcessMetrics

METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # Prometheus text format
APP_PATHS = frozenset({"/", "/generate"})


class FakeInferencePod:
    """One pod's HTTP service (a responder, and an ASGI app), with failure knobs."""

    def __init__(
        self,
        *,
        pod_id: str,
        clock: Clock,
        process_start: dt.datetime | None = None,
        latency_s: float = 0.0,
        metrics_token: str | None = None,
        seed: int = 0,
        health_path: str = "/health",
        metrics_path: str = "/metrics",
        token_param: str = "token",
        work_log: WorkLog | None = None,
    ) -> None:
        if latency_s < 0:
            raise ValueError(f"latency_s must be >= 0 seconds, got {latency_s}")
        self.pod_id = pod_id
        self.latency_s = latency_s
        self.health_path = health_path
        self.metrics_path = metrics_path
        self.token_param = token_param
        self._token = metrics_token
        self.process_start = process_start or clock.now()
        self._metrics = ProcessMetrics(start=self.process_start.timestamp())
        self._asgi = asgi_app(self.respond)
        self._clock = clock
        self._work_log = work_log
        self._mode = ServiceMode.HEALTHY
        self._fail_after_s = 0.0
        self._slow_s = 0.0
        self._error_ratio = 0.0
        self._image = ImageBehaviour()
        # Error credit starts at a seed-dependent phase, so pods with different seeds
        # fail different requests but every pod fails exactly its share over time.
        self._error_credit = random.Random(seed).random()
        self._works: set[Work] = set()  # requests in flight, woken on every knob turn

    def __repr__(self) -> str:  # the token stays out of logs
        return f"FakeInferencePod(pod_id={self.pod_id!r}, serving={self.is_serving})"

    # -- knobs -------------------------------------------------------------------------

    @property
    def is_serving(self) -> bool:
        """False once the service died or the pod stopped: the proxy answers 502."""
        return self._mode is not ServiceMode.DIES

    @property
    def mode(self) -> ServiceMode:
        return self._mode

    @property
    def answers(self) -> bool:
        """Healthy (not dead, failing or hung): its probes pass (the simulator's
        invariant checker asks)."""
        return self._mode is ServiceMode.HEALTHY

    def answers_within(self, seconds: float) -> bool:
        """Healthy, and each answer (a probe's too) added no more than `seconds` of delay:
        a pod slower than the probe timeout fails its probes like a hung one."""
        return self.answers and self._slow_s < seconds

    def die(self) -> None:
        """The service dies: 502 at once, for new requests and those in flight."""
        self._set_mode(ServiceMode.DIES)

    def hang(self) -> None:
        """Nothing answers, new requests nor those in flight, until another knob turns."""
        self._set_mode(ServiceMode.HANGS)

    def fail_after(self, seconds: float) -> None:
        """Every request fails `seconds` into it (502, or a cut stream); in flight: at once."""
        if seconds < 0:
            raise ValueError(f"fail_after() needs seconds >= 0, got {seconds}")
        self._fail_after_s = seconds
        self._set_mode(ServiceMode.FAILS)

    def slow(self, latency_s: float) -> None:
        if latency_s < 0:
            raise ValueError(f"slow() needs latency_s >= 0 seconds, got {latency_s}")
        self._slow_s = latency_s

    def errors(self, ratio: float) -> None:
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"errors() needs a ratio between 0 and 1, got {ratio}")
        self._error_ratio = ratio

    def run_image(self, behaviour: ImageBehaviour | None) -> None:
        """The container runs an image that behaves so; one that fails to start dies."""
        self._image = behaviour or ImageBehaviour()
        if self._image.start_fails:
            self.die()

    def restart(self, now: dt.datetime) -> None:
        """A new process: new start time, fresh counters, serving, nothing hung."""
        self.process_start = now
        self._metrics = ProcessMetrics(start=now.timestamp())
        self._set_mode(ServiceMode.HEALTHY)

    def stop(self) -> None:
        """The pod was stopped or terminated; `restart(now)` brings it back."""
        self.die()

    def recover(self) -> None:
        self._slow_s = 0.0
        self._error_ratio = 0.0
        self._set_mode(ServiceMode.HEALTHY)

    def _set_mode(self, mode: ServiceMode) -> None:
        self._mode = mode
        # Knobs may be turned from another thread than the one serving (tests do).
        wake_all(self._works)

    def _service(self) -> tuple[ServiceMode, float]:
        return self._mode, self._fail_after_s

    # -- serving -----------------------------------------------------------------------

    def metrics_text(self) -> bytes:
        """The metrics page, as the metrics path serves it (rpp/sim/pod_metrics.py)."""
        return self._metrics.page()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The pod's service over ASGI (uvicorn in tests and benchmarks)."""
        await self._asgi(scope, receive, send)

    async def respond(self, request: Request) -> Reply:
        """One request to the pod's service (what the proxy forwards)."""
        if not self.is_serving:
            return _NOT_RUNNING
        path = request.path
        if path in APP_PATHS or path == STREAM_PATH:
            return await self._serve_work(request)
        if self._mode is not ServiceMode.HEALTHY or self._slow_s:
            # Probes suffer the same failure modes as the app, but are no logged work.
            record = WorkRecord(None, self.pod_id, "probe", started=0.0)
            work = Work(record=record, mode=self._service, clock=self._clock)
            self._works.add(work)
            try:
                await work.run_for(self._slow_s, failure=WorkFailed)
            except WorkFailed:
                return _NOT_RUNNING
            finally:
                self._works.discard(work)
        if path == self.health_path:
            return _OK
        if path == self.metrics_path:
            return self._serve_metrics(request)
        return Reply(404, b"not found\n", content_type="text/plain")

    def _serve_metrics(self, request: Request) -> Reply:
        if self._token is not None:
            given = request.query.get(self.token_param, [])
            if not given:
                return Reply(401, b"metrics token required\n", content_type="text/plain")
            if not hmac.compare_digest(given[0].encode(), self._token.encode()):
                return Reply(403, b"metrics token rejected\n", content_type="text/plain")
        return Reply(200, self.metrics_text(), content_type=METRICS_TYPE)

    async def _serve_work(self, request: Request) -> Reply:
        """An app request: generate (a whole answer) or stream (events); logged as work."""
        latency = self.latency_s if self._image.latency_s is None else self._image.latency_s
        order = read_order(request, default_s=latency)
        record = WorkRecord(
            request_id=request.header("x-request-id"),
            pod_id=self.pod_id,
            kind=order.kind,
            started=self._clock.now().timestamp(),
            body_bytes=len(request.body),
        )
        if self._work_log is not None:
            self._work_log.start(record)
        work = Work(record=record, mode=self._service, clock=self._clock)
        self._works.add(work)
        metrics = self._metrics
        started = asyncio.get_running_loop().time()
        metrics.started()
        if order.kind == "stream":
            return Reply(
                200,
                content_type="text/event-stream",
                headers=(("x-pod", self.pod_id),),
                chunks=stream_events(
                    work, order, done=lambda outcome: self._done(work, outcome, started)
                ),
            )
        outcome = "client-gone"  # cancelled: the client (the proxy, nginx) went away
        try:
            await work.run_for(self._slow_s + order.seconds, failure=WorkFailed)
            outcome = "ok"
        except WorkFailed:
            outcome = "failed"
            return _NOT_RUNNING
        finally:
            self._done(work, outcome, started)
        self._error_credit += max(self._error_ratio, self._image.error_ratio)
        if self._error_credit >= 1.0:
            self._error_credit -= 1.0
            metrics.errored()
            return Reply(500, b"inference failed\n", content_type="text/plain")
        return answer(work, order, self.pod_id)

    def _done(self, work: Work, outcome: str, started: float) -> None:
        """Work ended (any way): out of the queue, counted, logged."""
        self._works.discard(work)
        work.finish(outcome)
        metrics = self._metrics  # the process's now: a restart in between starts anew
        metrics.left()
        metrics.answered(duration=asyncio.get_running_loop().time() - started)


class HostRouter:
    """RunPod's proxy in miniature: routes `{pod_id}-{port}.proxy.runpod.net` by Host.

    Unknown hosts get 404, a pod that is not serving gets 502, as RunPod's proxy does.
    `pods` is read on every request, so the caller may add and remove pods live.
    """

    def __init__(self, pods: MutableMapping[str, FakeInferencePod], *, port: int = 80) -> None:
        self.pods = pods
        self.port = port
        self._asgi = asgi_app(self.respond)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._asgi(scope, receive, send)

    async def respond(self, request: Request) -> Reply:
        pod = self.pods.get(pod_id_from_host(request.host, port=self.port) or "")
        if pod is None:
            return Reply(404, b"no such pod\n", content_type="text/plain")
        if not pod.is_serving:
            return _NOT_RUNNING
        return await pod.respond(request)


def pod_id_from_host(host: str, *, port: int) -> str | None:
    """`abc123-80.proxy.runpod.net` -> `abc123` (None when it is not a proxy host)."""
    name = host.split(":", 1)[0]
    suffix = f"-{port}.proxy.runpod.net"
    if not name.lower().endswith(suffix) or len(name) == len(suffix):
        return None
    return name[: -len(suffix)]


_OK = Reply(200, b"ok\n", content_type="text/plain")
_NOT_RUNNING = Reply(502, b"service is not running\n", content_type="text/plain")
