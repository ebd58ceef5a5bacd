"""Probe every pool pod through RunPod's HTTP proxy, concurrently, once a loop.

Part of observe. For each pod the prober asks its health path (200 passes) and its
metrics path (200 passes, with the metrics token as a query parameter, and the pool's
required metric present) and records the verdict, both latencies, a short error text and
the process start time read from the metrics page, and whether it failed hard (no
connection, no answer within the timeout, or RunPod's proxy answering 404, 502 or 503).
A wired pod's hard failure is probed again CONFIRM_AFTER_S later, in the same loop, so
its two hard failures in a row (quarantine) take one loop. decide turns those into the
warm-up streak, the Unreachable and SlowScrape rules, quarantine and restart detection.

Time: latencies are measured on the running event loop's clock and timeouts are
enforced with `asyncio.timeout`, so the simulator's virtual-time loop runs the same code
in no wall time. Every pod of every pool that shares the prober is probed at once, up to
`concurrency` pods (PROBE_CONCURRENCY); the client (rpp/adapters/pod_http.py) gives
each pod its own connections, so no probe waits on another pod's.

A pod's answers are the pod's to write, so they are bounded: a health answer over
`health_limit` bytes or a metrics page over `metrics_limit` fails the probe with an error
naming the limit and its setting, without reading further; the page is parsed chunk by
chunk between other pods' probes and only until the probe's deadline (the request's
start plus its timeout; rpp/observe/metrics_text.py). What one pod sends changes only
that pod's verdict.

Secrets: the metrics token travels in the URL, because that is how the pool's service
takes it. It never leaves this module: error texts are built from status codes,
exception types and the parser's words on a pod's page (which may quote the URL back),
then scrubbed of the token. Probes go to a `PodClient` (rpp/adapters/pod_http.py,
aiohttp in `rpp run`), which logs no request and whose errors name the failure and the
host, not the URL.

RunPod routes on the Host header (`{pod_id}-{port}.proxy.runpod.net`), so the prober
always sends that Host, which lets `url_pattern` point every pod at one base URL (a
local proxy emulation in tests, RUNPOD_PROXY_URL in a deployment).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import quote, quote_plus, urlencode

from rpp import __version__
from rpp.adapters.pod_http import (
    PER_POD_CONNECTIONS,
    PodClient,
    PodHttpClient,
    PodRequest,
    PodRequestFailed,
    PodUnreachable,
)
from rpp.model import spec
from rpp.model.observations import ProbeResult
from rpp.model.proxy_hosts import DEFAULT_URL_PATTERN, proxy_host
from rpp.observe.metrics_text import (
    MetricsTextError,
    has_metric_within,
    parse_metrics_page_within,
)

DEFAULT_CONCURRENCY = 2000
"""Pods probed at once (PROBE_CONCURRENCY): above any one controller's fleet today."""
DEFAULT_HEALTH_LIMIT = 64 * 1024
"""Bytes read of a health answer (PROBE_HEALTH_MAX_KIB); "ok" is what a service sends."""
DEFAULT_METRICS_LIMIT = 1024 * 1024
"""Bytes read of a metrics page (PROBE_METRICS_MAX_KIB): several times a large inference
server's page, and parsed in about a third of a second."""
HEALTH_LIMIT_SETTING = "PROBE_HEALTH_MAX_KIB"
METRICS_LIMIT_SETTING = "PROBE_METRICS_MAX_KIB"
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
    # A wired pod: nginx sends it requests, so a hard failure is probed again at once
    # (CONFIRM_AFTER_S later) and two in a row take one loop, not two.
    confirm: bool = False


CONFIRM_AFTER_S = 5.0
"""The pause before a wired pod's hard failure is probed again: past a blip of the
network, and short enough that a dead pod leaves nginx within 60 s of dying at the
default 30 s interval (the probe that sees it starts within 30 s; a hung pod's two
probes then take two timeouts and this pause)."""

# RunPod's proxy answers these when the pod behind it is down, gone (404: terminated in
# the console, or nothing listens on the port) or being replaced. An app's own 404 on a
# wrong probe path fails every pod alike, which PoolWideDegradation and "never the last
# wired pod" keep from emptying nginx; no app answers a health probe with the others.
_HARD_STATUSES = frozenset({404, 502, 503})


@dataclass(frozen=True)
class _Answer:
    ok: bool
    latency_s: float | None
    error: str | None = None
    body: bytes = b""
    deadline: float = 0.0  # the request's start + its timeout, on the loop's clock
    hard: bool = False  # no connection, no answer in time, or a 404, 502 or 503


def _pod_not_found(status: int, body: bytes, pod_id: str) -> bool:
    """RunPod's proxy's 404 for a pod it does not know: it names the pod (an app's own
    404 for a wrong health path does not), e.g. after a terminate in RunPod's console."""
    if status != 404:
        return False
    text = body[:1024].decode("utf-8", "replace").lower()
    return "not found" in text and pod_id.lower() in text


class Prober:
    """Probes pods through the proxy; one instance serves every pool."""

    def __init__(
        self,
        *,
        client: PodClient,
        url_pattern: str = DEFAULT_URL_PATTERN,
        concurrency: int = DEFAULT_CONCURRENCY,
        timeout_s: float = 10.0,
        health_limit: int = DEFAULT_HEALTH_LIMIT,
        metrics_limit: int = DEFAULT_METRICS_LIMIT,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"probe concurrency must be at least 1, got {concurrency}")
        if timeout_s <= 0:
            raise ValueError(f"probe timeout must be above 0 seconds, got {timeout_s}")
        if health_limit < 1 or metrics_limit < 1:
            raise ValueError("probe answer limits must be at least 1 byte")
        proxy_url(url_pattern, pod_id="x", port=80)  # a bad pattern fails here, not per pod
        self._client = client
        self._url_pattern = url_pattern
        self._concurrency = concurrency
        self._timeout_s = timeout_s
        self._health_limit = health_limit
        self._metrics_limit = metrics_limit
        self._slots: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None

    async def probe(self, targets: Iterable[ProbeTarget]) -> dict[str, ProbeResult]:
        """Probe every target at once (up to `concurrency`); returns {pod_id: result}."""
        targets = list(targets)
        results = await asyncio.gather(*(self.probe_one(t) for t in targets))
        return {t.pod_id: r for t, r in zip(targets, results, strict=True)}

    async def probe_one(self, target: ProbeTarget) -> ProbeResult:
        first = await self._probe_once(target)
        if not (target.confirm and first.hard_failure):
            return first
        await asyncio.sleep(CONFIRM_AFTER_S)
        again = await self._probe_once(target)
        # Failed hard twice in a row: two probes' worth. Anything else (a blip that
        # passed, a soft failure) is what the pod says now.
        return dataclasses.replace(again, hard_failures=2) if again.hard_failure else again

    async def _probe_once(self, target: ProbeTarget) -> ProbeResult:
        async with self._semaphore():
            health, metrics = await asyncio.gather(
                self._get(target, target.settings.health_path, with_token=False),
                self._get(target, target.settings.metrics_path, with_token=True),
            )
            return await _verdict(target, health, metrics)

    def _semaphore(self) -> asyncio.Semaphore:
        # A semaphore belongs to one event loop; tests and the simulator may use several.
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:
            self._slots = (loop, asyncio.Semaphore(self._concurrency))
        return self._slots[1]

    async def _get(self, target: ProbeTarget, path: str, *, with_token: bool) -> _Answer:
        settings = target.settings
        timeout_s = settings.timeout_s or self._timeout_s
        request = _probe_request(
            self._url_pattern,
            pod_id=target.pod_id,
            port=settings.port,
            path=path,
            token_param=settings.token_param,
            token=target.metrics_token if with_token else None,
        )
        loop = asyncio.get_running_loop()
        started = loop.time()
        limit, setting = (
            (self._metrics_limit, METRICS_LIMIT_SETTING)
            if with_token  # the metrics path
            else (self._health_limit, HEALTH_LIMIT_SETTING)
        )
        try:
            async with asyncio.timeout(timeout_s):
                answer = await self._client.get(request, limit=limit)
        except TimeoutError:
            # A hung pod: nginx's requests to it wait for RunPod's CDN (100 s), so its
            # health path's timeouts count as hard as a dead pod's 502s. A metrics page
            # alone that is slow is SlowScrape's to judge: the pod may serve well.
            failed = f"timed out after {timeout_s:g}s"
            return _Answer(False, None, failed, hard=not with_token)
        except PodUnreachable as error:
            reason = _redact(str(error), target.metrics_token) or "no detail"
            return _Answer(False, None, f"connection failed ({reason})", hard=True)
        except PodRequestFailed as error:
            reason = _redact(str(error), target.metrics_token)
            return _Answer(False, None, f"request failed ({reason})")
        latency = loop.time() - started
        status, body = answer.status, answer.body
        if status != 200:
            if _pod_not_found(status, body or b"", target.pod_id):
                return _Answer(
                    False, latency, "HTTP 404: RunPod's proxy: pod not found", hard=True
                )
            return _Answer(False, latency, f"HTTP {status}", hard=status in _HARD_STATUSES)
        if body is None:
            return _Answer(False, latency, f"answer over the {_size(limit)} limit ({setting})")
        return _Answer(True, latency, body=body, deadline=started + timeout_s)


def _size(limit: int) -> str:
    if limit % (1024 * 1024) == 0:
        return f"{limit // (1024 * 1024)} MiB"
    if limit % 1024 == 0:
        return f"{limit // 1024} KiB"
    return f"{limit} bytes"


@lru_cache(maxsize=16384)
def _probe_request(
    pattern: str, *, pod_id: str, port: int, path: str, token_param: str, token: str | None
) -> PodRequest:
    """A probe's request, built once per pod and path and sent every loop."""
    url = proxy_url(pattern, pod_id=pod_id, port=port) + path
    if token is not None:
        url += ("&" if "?" in path else "?") + urlencode({token_param: token})
    return PodRequest(url=url, host=proxy_host(pod_id, port), user_agent=USER_AGENT)


async def _verdict(target: ProbeTarget, health: _Answer, metrics: _Answer) -> ProbeResult:
    errors = []
    if not health.ok:
        errors.append(f"health {target.settings.health_path}: {health.error}")
    process_start = None
    metrics_ok = metrics.ok
    if metrics.ok:
        problem, process_start = await _judge_page(target, metrics)
        if problem is not None:
            metrics_ok = False
            errors.append(f"metrics {target.settings.metrics_path}: {problem}")
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
        hard_failures=1 if health.hard or metrics.hard else 0,
    )


async def _judge_page(target: ProbeTarget, metrics: _Answer) -> tuple[str | None, float | None]:
    """A 200 metrics page: what is wrong with it for the pool (None: nothing), and the
    process start when the target asks for it."""
    required = target.settings.require_metric
    if required is None and not target.read_process_start:
        return None, None  # a 200 is all this loop needs from the metrics page
    # Prometheus's text format is UTF-8 by definition, whatever the header says.
    text = metrics.body.decode("utf-8", "replace")
    start = None
    try:
        if required is not None and not target.read_process_start:
            # The steady case: only the lines that can name the metric are parsed.
            present = await has_metric_within(text, required, deadline=metrics.deadline)
        else:
            page = await parse_metrics_page_within(text, deadline=metrics.deadline)
            present = required is None or page.has_metric(required)
            start = page.process_start
    except MetricsTextError as error:
        # Only a pool that requires a metric needs the page to parse; for the others
        # an unparseable page merely means no restart detection.
        return (None if required is None else str(error)), None
    if not present:
        return f"required metric {required!r} is missing", start
    return None, start


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


def make_client(*, url_pattern: str = DEFAULT_URL_PATTERN) -> PodHttpClient:
    """The prober's client for `rpp run`: two connections per pod's origin.

    When RUNPOD_PROXY_URL sends every pod to one base URL (a local proxy emulation),
    all pods share one origin, so the per-origin limit is lifted; `concurrency` bounds it.
    """
    one_origin_per_pod = "{pod_id}" in url_pattern
    return PodHttpClient(per_host=PER_POD_CONNECTIONS if one_origin_per_pod else 0)


def _redact(text: str, secret: str | None) -> str:
    if not secret:
        return text
    for form in {secret, quote(secret, safe=""), quote_plus(secret)}:
        text = text.replace(form, REDACTED)
    return text
