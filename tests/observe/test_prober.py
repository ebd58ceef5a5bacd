"""The prober over real HTTP against fake inference pods behind a Host-routing proxy."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import AsyncIterator, MutableMapping

import pytest

from rpp.adapters.clock import ManualClock
from rpp.adapters.pod_http import PodHttpClient
from rpp.model.observations import ProbeResult
from rpp.model.proxy_hosts import DEFAULT_URL_PATTERN
from rpp.model.spec_load import load_spec
from rpp.observe.prober import (
    REDACTED,
    Prober,
    ProbeSettings,
    ProbeTarget,
    make_client,
    probe_settings_from_spec,
    proxy_url,
    url_pattern_from,
)
from rpp.sim.asgi_io import Receive, Scope, Send, send_bytes
from rpp.sim.in_process import InProcessPods
from rpp.sim.inference import FakeInferencePod, HostRouter
from rpp.sim.localhttp import serve_local

START = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
TOKEN = "tok-3f9a-very-secret"
SETTINGS = ProbeSettings()


class Fleet:
    """Fake pods behind one local proxy, and a prober pointed at it."""

    def __init__(self, port: int, pods: MutableMapping[str, FakeInferencePod]) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.pods = pods
        self.clock = ManualClock(START)

    def add(self, pod_id: str, **kwargs: object) -> FakeInferencePod:
        pod = FakeInferencePod(pod_id=pod_id, clock=self.clock, **kwargs)  # type: ignore[arg-type]
        self.pods[pod_id] = pod
        return pod


@pytest.fixture
async def fleet() -> AsyncIterator[Fleet]:
    pods: dict[str, FakeInferencePod] = {}
    async with serve_local(HostRouter(pods)) as port:
        yield Fleet(port, pods)
        for pod in pods.values():
            pod.recover()  # release hung requests so the server stops at once


@pytest.fixture
async def client() -> AsyncIterator[PodHttpClient]:
    # One base URL for every pod (the local proxy routes on Host), as RUNPOD_PROXY_URL gives.
    async with make_client(url_pattern="http://127.0.0.1:9") as client:
        yield client


def prober_for(fleet: Fleet, client: PodHttpClient, **kwargs: object) -> Prober:
    return Prober(client=client, url_pattern=fleet.base, **kwargs)  # type: ignore[arg-type]


async def probe_one(
    prober: Prober, pod_id: str, *, settings: ProbeSettings, metrics_token: str | None
) -> ProbeResult:
    target = ProbeTarget(pod_id=pod_id, settings=settings, metrics_token=metrics_token)
    return (await prober.probe([target]))[pod_id]


async def test_healthy_pod_passes_with_latencies_and_its_process_start(
    fleet: Fleet, client: PodHttpClient
) -> None:
    fleet.add("pod-a", metrics_token=TOKEN)
    result = await probe_one(
        prober_for(fleet, client), "pod-a", settings=SETTINGS, metrics_token=TOKEN
    )
    assert result.passed
    assert result.health_ok
    assert result.metrics_ok
    assert result.error is None
    assert result.health_latency_s is not None
    assert result.health_latency_s >= 0
    assert result.metrics_latency_s is not None
    assert result.process_start == START.timestamp()


async def test_dead_pod_fails_both_probes_with_the_proxy_status(
    fleet: Fleet, client: PodHttpClient
) -> None:
    fleet.add("pod-a").die()
    result = (await prober_for(fleet, client).probe([ProbeTarget(pod_id="pod-a")]))["pod-a"]
    assert not result.passed
    assert not result.health_ok
    assert not result.metrics_ok
    assert result.error == "health /health: HTTP 502; metrics /metrics: HTTP 502"


async def test_hung_pod_fails_after_the_timeout_not_later(
    fleet: Fleet, client: PodHttpClient
) -> None:
    fleet.add("pod-a").hang()
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await probe_one(
        prober_for(fleet, client, timeout_s=0.3), "pod-a", settings=SETTINGS, metrics_token=None
    )
    elapsed = loop.time() - started
    # The hang never ends, so any end at all is the timeout's; the wide upper bound is only
    # there so a loaded machine cannot fail the test.
    assert 0.3 <= elapsed < 10.0
    assert not result.passed
    assert result.health_latency_s is None
    assert result.metrics_latency_s is None
    assert result.error is not None
    assert "timed out after 0.3s" in result.error


async def test_slow_pod_passes_and_reports_its_metrics_latency(
    fleet: Fleet, client: PodHttpClient
) -> None:
    fleet.add("pod-a").slow(0.25)
    result = (await prober_for(fleet, client).probe([ProbeTarget(pod_id="pod-a")]))["pod-a"]
    assert result.passed
    assert result.metrics_latency_s is not None
    assert result.metrics_latency_s >= 0.25


async def test_rejected_or_missing_token_fails_metrics_with_the_pods_status(
    fleet: Fleet, client: PodHttpClient
) -> None:
    fleet.add("pod-a", metrics_token=TOKEN)
    prober = prober_for(fleet, client)
    wrong = "wrong-token-771"
    rejected = (await prober.probe([ProbeTarget(pod_id="pod-a", metrics_token=wrong)]))["pod-a"]
    absent = (await prober.probe([ProbeTarget(pod_id="pod-a")]))["pod-a"]
    assert rejected.health_ok
    assert not rejected.metrics_ok
    assert not rejected.passed
    assert rejected.error == "metrics /metrics: HTTP 403"
    assert absent.error == "metrics /metrics: HTTP 401"


class EchoingPod:
    """A pod whose metrics page quotes back the URL it was asked for: not Prometheus text,
    so the parse error the probe reports quotes the token the URL carried."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        asked = f"{scope['path']}?{scope['query_string'].decode()}"
        self.asked.append(asked)
        await send_bytes(send, 200, f"served {asked}\n".encode(), content_type="text/plain")


async def test_a_token_the_pod_quotes_back_is_cut_from_the_error_and_no_log_carries_it(
    client: PodHttpClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    pod = EchoingPod()
    strict = ProbeSettings(require_metric="up")  # so the page's parse error is reported
    async with serve_local(pod) as port:
        prober = Prober(client=client, url_pattern=f"http://127.0.0.1:{port}")
        result = await probe_one(prober, "pod-a", settings=strict, metrics_token=TOKEN)
    assert f"/metrics?token={TOKEN}" in pod.asked  # the token went out, and came back
    quoted = f"could not convert string to float: '/metrics?token={REDACTED}'"
    assert result.error is not None
    assert result.error.endswith(f"not Prometheus text format: {quoted}"), result.error
    assert TOKEN not in result.error
    # Nothing on the probe's path logs its URL (an httpx client would, at INFO).
    assert [r.getMessage() for r in caplog.records if TOKEN in r.getMessage()] == []


async def test_token_goes_in_the_pools_query_parameter(
    fleet: Fleet, client: PodHttpClient
) -> None:
    fleet.add("pod-a", metrics_token=TOKEN, token_param="key")
    settings = ProbeSettings(token_param="key")
    result = await probe_one(
        prober_for(fleet, client), "pod-a", settings=settings, metrics_token=TOKEN
    )
    assert result.passed


async def test_unreachable_proxy_gives_a_connection_error_without_the_token(
    client: PodHttpClient,
) -> None:
    async with serve_local(HostRouter({})) as port:
        pass  # the port is now closed: nothing listens there
    prober = Prober(client=client, url_pattern=f"http://127.0.0.1:{port}")
    result = (await prober.probe([ProbeTarget(pod_id="pod-a", metrics_token=TOKEN)]))["pod-a"]
    assert not result.passed
    assert result.error is not None
    reason = "ClientConnectorError: Cannot connect to host 127.0.0.1"
    assert f"connection failed ({reason}" in result.error
    assert TOKEN not in result.error


async def test_missing_required_metric_fails_the_probe_and_names_the_metric(
    fleet: Fleet, client: PodHttpClient
) -> None:
    fleet.add("pod-a")
    prober = prober_for(fleet, client)
    missing = ProbeSettings(require_metric="vllm_num_requests_waiting")
    present = ProbeSettings(require_metric="app_queue_length")
    failed = await probe_one(prober, "pod-a", settings=missing, metrics_token=None)
    passed = await probe_one(prober, "pod-a", settings=present, metrics_token=None)
    assert not failed.passed
    assert failed.health_ok
    assert not failed.metrics_ok
    assert failed.error == (
        "metrics /metrics: required metric 'vllm_num_requests_waiting' is missing"
    )
    assert passed.passed


async def not_prometheus(scope: Scope, receive: Receive, send: Send) -> None:
    await send_bytes(send, 200, b"<html>metrics live elsewhere</html>", content_type="text/html")


async def test_unparseable_metrics_page_passes_unless_a_metric_is_required(
    client: PodHttpClient,
) -> None:
    async with serve_local(not_prometheus) as port:
        prober = Prober(client=client, url_pattern=f"http://127.0.0.1:{port}")
        plain = (await prober.probe([ProbeTarget(pod_id="x")]))["x"]
        strict = (
            await prober.probe(
                [ProbeTarget(pod_id="x", settings=ProbeSettings(require_metric="up"))]
            )
        )["x"]
    assert plain.passed
    assert plain.process_start is None
    assert not strict.passed
    assert strict.error is not None
    assert "not Prometheus text format" in strict.error


def big_page(required: str) -> bytes:
    other = "".join(
        f"# HELP vllm_other_{i} Other.\n# TYPE vllm_other_{i} counter\n"
        f'vllm_other_{i}_total{{model="m"}} {i}\n'
        for i in range(3000)
    )
    return (other + required + other).encode()


async def test_a_page_of_mostly_other_metrics_is_judged_on_its_required_metric(
    client: PodHttpClient,
) -> None:
    pages = {
        "with": big_page('# TYPE vllm_waiting gauge\nvllm_waiting{model="m"} 2\n'),
        "prefix": big_page("# TYPE vllm_waiting_total counter\nvllm_waiting_total 2\n"),
        "without": big_page(""),
    }

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] != "/metrics":
            await send_bytes(send, 200, b"ok", content_type="text/plain")
            return
        host = dict(scope.get("headers", [])).get(b"host", b"").decode()
        await send_bytes(send, 200, pages[host.split("-", 1)[0]], content_type="text/plain")

    settings = ProbeSettings(require_metric="vllm_waiting", timeout_s=30)
    async with serve_local(serve) as port:
        prober = Prober(client=client, url_pattern=f"http://127.0.0.1:{port}")
        results = await prober.probe(
            ProbeTarget(pod_id=pod, settings=settings, read_process_start=False) for pod in pages
        )
    assert results["with"].passed
    assert results["prefix"].passed  # a counter's family is its name without _total
    assert not results["without"].passed
    assert results["without"].error == (
        "metrics /metrics: required metric 'vllm_waiting' is missing"
    )


async def test_restart_shows_as_a_newer_process_start(fleet: Fleet, client: PodHttpClient) -> None:
    pod = fleet.add("pod-a")
    prober = prober_for(fleet, client)
    before = (await prober.probe([ProbeTarget(pod_id="pod-a")]))["pod-a"].process_start
    pod.restart(fleet.clock.advance(90))
    after = (await prober.probe([ProbeTarget(pod_id="pod-a")]))["pod-a"].process_start
    assert before == START.timestamp()
    assert after == START.timestamp() + 90


async def test_process_start_is_read_only_when_asked_but_a_required_metric_always_is(
    fleet: Fleet, client: PodHttpClient
) -> None:
    fleet.add("pod-a")
    prober = prober_for(fleet, client)
    quick = await prober.probe([ProbeTarget(pod_id="pod-a", read_process_start=False)])
    assert quick["pod-a"].passed
    assert quick["pod-a"].process_start is None
    strict_settings = ProbeSettings(require_metric="no_such_metric")
    strict = await prober.probe(
        [ProbeTarget(pod_id="pod-a", settings=strict_settings, read_process_start=False)]
    )
    assert not strict["pod-a"].passed
    assert "no_such_metric" in (strict["pod-a"].error or "")


async def test_concurrency_is_bounded_and_used(client: PodHttpClient) -> None:
    pods: dict[str, FakeInferencePod] = {}
    router = HostRouter(pods)
    in_flight: set[str] = set()
    peak = 0

    async def counting(scope: Scope, receive: Receive, send: Send) -> None:
        nonlocal peak
        host = dict(scope.get("headers", [])).get(b"host", b"").decode()
        in_flight.add(host)
        peak = max(peak, len(in_flight))
        try:
            await router(scope, receive, send)
        finally:
            in_flight.discard(host)

    clock = ManualClock(START)
    for i in range(9):
        pods[f"p{i}"] = FakeInferencePod(pod_id=f"p{i}", clock=clock)
        pods[f"p{i}"].slow(0.1)
    async with serve_local(counting) as port:
        prober = Prober(client=client, url_pattern=f"http://127.0.0.1:{port}", concurrency=3)
        loop = asyncio.get_running_loop()
        started = loop.time()
        results = await prober.probe(ProbeTarget(pod_id=p) for p in pods)
        elapsed = loop.time() - started
    assert all(r.passed for r in results.values())
    assert len(results) == 9
    assert peak == 3  # three pods at a time (health and metrics of one pod count once)
    assert elapsed >= 0.3  # 9 pods / 3 at a time x 0.1 s


async def test_in_process_client_probes_without_sockets() -> None:
    pods = {"pod-a": FakeInferencePod(pod_id="pod-a", clock=ManualClock(START))}
    prober = Prober(client=InProcessPods(HostRouter(pods).respond), url_pattern="http://x.invalid")
    result = (await prober.probe([ProbeTarget(pod_id="pod-a")]))["pod-a"]
    assert result.passed
    assert result.process_start == START.timestamp()


async def test_a_pod_id_that_makes_no_valid_url_fails_its_probe_not_the_sweep(
    client: PodHttpClient,
) -> None:
    bad = "x\r\nInjected: 1"
    prober = Prober(client=client, url_pattern="http://{pod_id}.invalid:{port}")
    results = await prober.probe([ProbeTarget(pod_id=bad)])
    assert not results[bad].passed
    assert results[bad].error == (
        "health /health: request failed (InvalidURL); "
        "metrics /metrics: request failed (InvalidURL)"
    )


def test_proxy_urls_follow_runpods_pattern_or_one_base() -> None:
    assert url_pattern_from(None) == DEFAULT_URL_PATTERN
    assert proxy_url(DEFAULT_URL_PATTERN, pod_id="abc", port=8000) == (
        "https://abc-8000.proxy.runpod.net"
    )
    assert url_pattern_from("http://127.0.0.1:9000/") == "http://127.0.0.1:9000"


def test_bad_proxy_settings_are_refused_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match=r"RUNPOD_PROXY_URL 'ftp://x' is not an http\(s\) URL"):
        url_pattern_from("ftp://x")
    client = PodHttpClient()
    with pytest.raises(ValueError, match=r"pattern 'https://\{podid\}' is invalid"):
        Prober(client=client, url_pattern="https://{podid}")
    with pytest.raises(ValueError, match="concurrency must be at least 1, got 0"):
        Prober(client=client, concurrency=0)


def test_probe_settings_come_from_the_pool_spec() -> None:
    pool, problems = load_spec(
        "inference",
        {"port": 8000, "probe": {"healthPath": "/ready", "timeout": "5s", "requireMetric": "up"}},
    )
    assert problems == []
    assert pool is not None
    assert probe_settings_from_spec(pool) == ProbeSettings(
        port=8000,
        health_path="/ready",
        metrics_path="/metrics",
        token_param="token",
        require_metric="up",
        timeout_s=5.0,
    )
