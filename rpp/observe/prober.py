"""Probe every pool pod through RunPod's HTTP proxy, concurrently, once a loop.

Part of observe. For each pod the prober asks its health path (200 passes) and its
metrics path (200 passes, with the metrics token as a query parameter, and the pool's
required metric present) and records the verdict, both latencies, a short error text and
the process start time read from the metrics page. decide turns those into the warm-up
streak, the Unreachable and SlowScrape rules and restart detection.

Time: latencies are measured on the running event loop's clock and timeouts are
enforced with `asyncio.timeout`, so the simulator's virtual-time loop runs the same code
in no wall time. Concurrency is bounded (64 pods at a time by default) across every pool
that shares the prober.

Secrets: the metrics token travels in the URL, because that is how the pool's service
takes it. It never leaves this module: error texts are built from status codes and
exception types, then scrubbed of the token. Probes go straight to the httpx transport
(no client), so httpx's request log line, which prints full URLs, is never written for
them; httpcore's debug lines name no URL.

RunPod routes on the Host header (`{pod_id}-{port}.proxy.runpod.net`), so the prober
always sends that Host, which lets `url_pattern` point every pod at one base URL (a
local proxy emulation in tests, RUNPOD_PROXY_URL in a deployment).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import quote, quote_plus

import httpx

from rpp import __version__
from rpp.model import spec
from rpp.model.observations import ProbeResult
from rpp.model.proxy_hosts import DEFAULT_URL_PATTERN, proxy_host
from rpp.observe.metrics_text import MetricsTextError, parse_metrics_page

DEFAULT_CONCURRENCY = 64
USER_AGENT = f"runpod-pool-controller/{__version__} (prober)"
REDACTED = "<redacted>"


@dataclass(frozen=True, kw_only=True)
class ProbeSettings:
    """A pool's `spec.probe` and `spec.port`, as the prober needs them."""

    port: int = 80
    health_path: str = "/health"
    metrics_path: str = "/metrics"
    token_param: str = "token"
    require_metric: str | None = None
    timeout_s: float | None = None  # per request; None = the prober's default


def probe_settings_from_spec(pool: spec.RunPodPoolSpec) -> ProbeSettings:
    """Adapter from a pool's spec (`port` and the `probe` block)."""
    return ProbeSettings(
        port=pool.port,
        health_path=pool.probe.health_path,
        metrics_path=pool.probe.metrics_path,
        token_param=pool.probe.token_param,
        require_metric=pool.probe.require_metric,
        timeout_s=pool.probe.timeout,
    )


@dataclass(frozen=True, kw_only=True)
class ProbeTarget:
    """One pod to probe, with its pool's settings and metrics token."""

    pod_id: str
    settings: ProbeSettings = field(default_factory=ProbeSettings)
    metrics_token: str | None = field(default=None, repr=False)
    # Parsing the metrics page costs about 1 ms; only restart detection (a pod in an
    # in-place update) and requireMetric need it.
    read_process_start: bool = True


@dataclass(frozen=True)
class _Answer:
    ok: bool
    latency_s: float | None
    error: str | None = None
    body: bytes = b""


class Prober:
    """Probes pods through the proxy; one instance serves every pool."""

    def __init__(
        self,
        *,
        transport: httpx.AsyncBaseTransport,
        url_pattern: str = DEFAULT_URL_PATTERN,
        concurrency: int = DEFAULT_CONCURRENCY,
        timeout_s: float = 10.0,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"probe concurrency must be at least 1, got {concurrency}")
        if timeout_s <= 0:
            raise ValueError(f"probe timeout must be above 0 seconds, got {timeout_s}")
        proxy_url(url_pattern, pod_id="x", port=80)  # a bad pattern fails here, not per pod
        self._transport = transport
        self._url_pattern = url_pattern
        self._concurrency = concurrency
        self._timeout_s = timeout_s
        self._slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    async def probe(self, targets: Iterable[ProbeTarget]) -> dict[str, ProbeResult]:
        """Probe every target concurrently (bounded); returns {pod_id: result}."""
        targets = list(targets)
        results = await asyncio.gather(*(self.probe_one(t) for t in targets))
        return {t.pod_id: r for t, r in zip(targets, results, strict=True)}

    async def probe_one(self, target: ProbeTarget) -> ProbeResult:
        async with self._semaphore():
            health, metrics = await asyncio.gather(
                self._get(target, target.settings.health_path, with_token=False),
                self._get(target, target.settings.metrics_path, with_token=True),
            )
        return _verdict(target, health, metrics)

    def _semaphore(self) -> asyncio.Semaphore:
        # A semaphore belongs to one event loop; tests and the simulator may use several.
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:
            self._slots = (loop, asyncio.Semaphore(self._concurrency))
        return self._slots[1]

    async def _get(self, target: ProbeTarget, path: str, *, with_token: bool) -> _Answer:
        settings = target.settings
        timeout_s = settings.timeout_s or self._timeout_s
        token = target.metrics_token if with_token else None
        try:
            request = _probe_request(
                self._url_pattern,
                pod_id=target.pod_id,
                port=settings.port,
                path=path,
                token_param=settings.token_param,
                token=token,
            )
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            return _Answer(False, None, f"request failed ({type(error).__name__})")
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(timeout_s):
                # The transport, not a client: a probe needs no cookies (a pod's cookies
                # must not travel to the next pod), redirects, auth or URL merging, and
                # skipping them halves a probe's CPU on a sweep of many pods.
                response = await self._transport.handle_async_request(request)
                try:
                    body = await response.aread()
                finally:
                    await response.aclose()
        except TimeoutError:
            return _Answer(False, None, f"timed out after {timeout_s:g}s")
        except httpx.TimeoutException:
            return _Answer(False, None, "timed out (transport timeout)")
        except httpx.TransportError as error:
            reason = _redact(str(error), target.metrics_token) or "no detail"
            return _Answer(False, None, f"connection failed ({type(error).__name__}: {reason})")
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            return _Answer(False, None, f"request failed ({type(error).__name__})")
        latency = loop.time() - started
        if response.status_code != 200:
            return _Answer(False, latency, f"HTTP {response.status_code}")
        return _Answer(True, latency, body=body)


@lru_cache(maxsize=8192)
def _probe_request(
    pattern: str, *, pod_id: str, port: int, path: str, token_param: str, token: str | None
) -> httpx.Request:
    """A probe's request, built once per pod and path and sent every loop.

    Building it (URL parsing, header normalization) was a third of a probe's CPU. A
    bodiless GET is safe to send again: transports read it and never change it.
    """
    url = httpx.URL(proxy_url(pattern, pod_id=pod_id, port=port) + path)
    if token is not None:
        url = url.copy_merge_params({token_param: token})
    headers = {"Host": proxy_host(pod_id, port), "User-Agent": USER_AGENT}
    return httpx.Request("GET", url, headers=headers)


def _verdict(target: ProbeTarget, health: _Answer, metrics: _Answer) -> ProbeResult:
    errors = []
    if not health.ok:
        errors.append(f"health {target.settings.health_path}: {health.error}")
    metrics_ok = metrics.ok
    process_start = None
    required = target.settings.require_metric
    if metrics.ok and required is None and not target.read_process_start:
        pass  # a 200 is all this loop needs from the metrics page
    elif metrics.ok:
        try:
            # Prometheus's text format is UTF-8 by definition, whatever the header says.
            page = parse_metrics_page(metrics.body.decode("utf-8", "replace"))
        except MetricsTextError as error:
            # Only a pool that requires a metric needs the page to parse; for the others
            # an unparseable page merely means no restart detection.
            if required is not None:
                metrics_ok = False
                errors.append(f"metrics {target.settings.metrics_path}: {error}")
        else:
            process_start = page.process_start
            if required is not None and not page.has_metric(required):
                metrics_ok = False
                errors.append(
                    f"metrics {target.settings.metrics_path}: required metric "
                    f"{required!r} is missing"
                )
    else:
        errors.append(f"metrics {target.settings.metrics_path}: {metrics.error}")
    error_text = _redact("; ".join(errors), target.metrics_token) if errors else None
    return ProbeResult(
        passed=health.ok and metrics_ok,
        health_ok=health.ok,
        metrics_ok=metrics_ok,
        health_latency_s=health.latency_s,
        metrics_latency_s=metrics.latency_s,
        error=error_text,
        process_start=process_start,
    )


def proxy_url(pattern: str, *, pod_id: str, port: int) -> str:
    """The base URL of a pod's port, from a pattern with `{pod_id}` and `{port}`."""
    try:
        return pattern.format(pod_id=pod_id, port=port).rstrip("/")
    except (KeyError, IndexError, ValueError) as error:
        raise ValueError(
            f"proxy URL pattern {pattern!r} is invalid ({error!r}); use placeholders "
            "{pod_id} and {port} only, e.g. https://{pod_id}-{port}.proxy.runpod.net"
        ) from None


def url_pattern_from(runpod_proxy_url: str | None) -> str:
    """RUNPOD_PROXY_URL (one base for every pod, or a pattern) -> the prober's pattern."""
    if not runpod_proxy_url:
        return DEFAULT_URL_PATTERN
    if not runpod_proxy_url.startswith(("http://", "https://")):
        raise ValueError(
            f"RUNPOD_PROXY_URL {runpod_proxy_url!r} is not an http(s) URL; set it to e.g. "
            "http://127.0.0.1:9000 or unset it to use RunPod's proxy"
        )
    return runpod_proxy_url.rstrip("/")


def make_transport(*, concurrency: int = DEFAULT_CONCURRENCY) -> httpx.AsyncHTTPTransport:
    """A connection pool sized for the prober: two requests per pod in flight.

    No transport timeouts: the prober's own (`asyncio.timeout`) hold on a virtual-time
    loop too. Keep-alive stays at httpx's default of 20 idle connections: each pod is
    its own origin behind RunPod's proxy, so idle connections are rarely reused a loop
    later, and httpcore 1.0's pool scans its idle connections quadratically (measured
    through a client, 1,000 pods at concurrency 64: 6.2 s a sweep with 20 kept alive,
    27 s with 64, 47 s with 128; straight to this transport with 20, 4.7-5.1 s;
    benchmarks/bench_probe_sweep.py).
    """
    limits = httpx.Limits(max_connections=2 * concurrency, max_keepalive_connections=20)
    return httpx.AsyncHTTPTransport(limits=limits)


def _redact(text: str, secret: str | None) -> str:
    if not secret:
        return text
    for form in {secret, quote(secret, safe=""), quote_plus(secret)}:
        text = text.replace(form, REDACTED)
    return text
