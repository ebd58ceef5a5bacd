"""The fake inference pod: what the prober and Prometheus see, and every failure knob."""

from __future__ import annotations

import asyncio
import datetime as dt
import math

import httpx
import pytest

from rpp.adapters.clock import ManualClock
from rpp.observe.metrics_text import parse_metrics_page_within
from rpp.sim.inference import FakeInferencePod, HostRouter, pod_id_from_host
from rpp.sim.localhttp import ServerThread, serve_local
from rpp.sim.virtual_time import VirtualClock, run_virtual

START = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
TOKEN = "s3cret-metrics-token"


def make_pod(**kwargs: object) -> FakeInferencePod:
    defaults: dict[str, object] = {"pod_id": "pod-a", "clock": ManualClock(START)}
    defaults.update(kwargs)
    return FakeInferencePod(**defaults)  # type: ignore[arg-type]


def client_for(app: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),  # type: ignore[arg-type]
        base_url="http://pod-a-80.proxy.runpod.net",
    )


def samples(text: str) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        s.name + (str(sorted(s.labels.items())) if s.labels else ""): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


async def test_health_answers_200_and_unknown_paths_404() -> None:
    async with client_for(make_pod()) as client:
        assert (await client.get("/health")).status_code == 200
        assert (await client.get("/nope")).status_code == 404


async def test_metrics_show_process_start_created_samples_histogram_5xx_counter_queue() -> None:
    pod = make_pod()
    async with client_for(pod) as client:
        await client.post("/generate", json={"prompt": "hi"})
        text = (await client.get("/metrics")).text
    values = samples(text)
    assert values["process_start_time_seconds"] == START.timestamp()
    created = {k: v for k, v in values.items() if k.endswith("_created")}
    assert set(created) == {
        "app_requests_created",
        "app_requests_failed_created",
        "app_request_duration_seconds_created",
    }
    assert set(created.values()) == {START.timestamp()}
    assert values["app_requests_total"] == 1
    assert values["app_requests_failed_total"] == 0
    assert values["app_request_duration_seconds_count"] == 1
    assert values["app_queue_length"] == 0
    page = await parse_metrics_page_within(text, deadline=math.inf)
    assert page.process_start == START.timestamp()


async def test_metrics_require_the_token_when_the_pod_has_one() -> None:
    async with client_for(make_pod(metrics_token=TOKEN)) as client:
        assert (await client.get("/metrics")).status_code == 401
        wrong = await client.get("/metrics", params={"token": "guess"})
        assert wrong.status_code == 403
        assert TOKEN not in wrong.text
        assert (await client.get("/metrics", params={"token": TOKEN})).status_code == 200
    assert TOKEN not in repr(make_pod(metrics_token=TOKEN))


async def test_error_share_is_exact_and_the_same_for_the_same_seed() -> None:
    codes: list[list[int]] = []
    for seed in (7, 7, 8):
        pod = make_pod(seed=seed)
        pod.errors(0.25)
        async with client_for(pod) as client:
            codes.append([(await client.get("/generate")).status_code for _ in range(100)])
        values = samples(pod.metrics_text().decode())
        assert values["app_requests_failed_total"] == 25
        assert values["app_requests_total"] == 100
    assert [c.count(500) for c in codes] == [25, 25, 25]
    assert codes[0] == codes[1]
    assert codes[0] != codes[2]


async def test_app_latency_is_served_and_recorded_in_the_histogram() -> None:
    pod = make_pod(latency_s=0.05)
    loop = asyncio.get_running_loop()
    async with client_for(pod) as client:
        started = loop.time()
        assert (await client.get("/generate")).status_code == 200
        elapsed = loop.time() - started
    assert elapsed >= 0.05
    values = samples(pod.metrics_text().decode())
    assert values["app_request_duration_seconds_sum"] >= 0.05


def test_queue_gauge_counts_requests_in_flight() -> None:
    """On virtual time: 0.05 s into three 0.2 s requests, all three are in flight, however
    loaded the machine (a wall-clock wait could overshoot past their end)."""
    pod = make_pod(latency_s=0.2)

    async def main(_: VirtualClock) -> tuple[float, float]:
        async with client_for(pod) as client:
            pending = [asyncio.create_task(client.get("/generate")) for _ in range(3)]
            await asyncio.sleep(0.05)
            during = samples(pod.metrics_text().decode())["app_queue_length"]
            await asyncio.gather(*pending)
        return during, samples(pod.metrics_text().decode())["app_queue_length"]

    assert run_virtual(main) == (3, 0)


async def test_dead_pod_is_not_serving_and_answers_502_until_it_recovers() -> None:
    pod = make_pod()
    pod.die()
    assert not pod.is_serving
    async with client_for(pod) as client:
        assert (await client.get("/health")).status_code == 502
        pod.recover()
        assert pod.is_serving
        assert (await client.get("/health")).status_code == 200


async def test_slow_pod_delays_every_answer_including_metrics() -> None:
    pod = make_pod()
    pod.slow(0.1)
    loop = asyncio.get_running_loop()
    async with client_for(pod) as client:
        for path in ("/health", "/metrics"):
            started = loop.time()
            assert (await client.get(path)).status_code == 200
            assert loop.time() - started >= 0.1


async def test_hung_pod_never_answers_until_released_by_recover() -> None:
    pod = make_pod()
    pod.hang()
    async with client_for(pod) as client:
        request = asyncio.create_task(client.get("/health"))
        done, _ = await asyncio.wait({request}, timeout=0.2)
        assert not done
        pod.recover()
        assert (await request).status_code == 200


async def test_restart_gives_a_new_start_time_and_fresh_counters() -> None:
    clock = ManualClock(START)
    pod = make_pod(clock=clock)
    async with client_for(pod) as client:
        await client.get("/generate")
        pod.die()
        later = clock.advance(600)
        pod.restart(later)
        assert pod.is_serving
        text = (await client.get("/metrics")).text
    values = samples(text)
    assert values["process_start_time_seconds"] == later.timestamp()
    assert values["app_requests_created"] == later.timestamp()
    assert values["app_requests_total"] == 0


async def test_stopped_pod_answers_502_and_a_restart_brings_it_back() -> None:
    pod = make_pod()
    pod.stop()
    async with client_for(pod) as client:
        assert (await client.get("/health")).status_code == 502
        pod.restart(START + dt.timedelta(minutes=5))
        assert (await client.get("/health")).status_code == 200


def test_bad_knob_values_are_refused_with_the_value_named() -> None:
    pod = make_pod()
    with pytest.raises(ValueError, match=r"ratio between 0 and 1, got 1\.5"):
        pod.errors(1.5)
    with pytest.raises(ValueError, match="got -1"):
        pod.slow(-1)


def test_host_names_map_to_pod_ids_only_for_the_proxy_domain() -> None:
    assert pod_id_from_host("abc123-80.proxy.runpod.net", port=80) == "abc123"
    assert pod_id_from_host("abc123-80.proxy.runpod.net:443", port=80) == "abc123"
    assert pod_id_from_host("abc123-8000.proxy.runpod.net", port=80) is None
    assert pod_id_from_host("-80.proxy.runpod.net", port=80) is None
    assert pod_id_from_host("example.com", port=80) is None


async def test_router_serves_by_host_over_real_http_and_502s_a_dead_pod() -> None:
    pods = {"pod-a": make_pod(), "pod-b": make_pod(pod_id="pod-b")}
    pods["pod-b"].die()
    async with (
        serve_local(HostRouter(pods)) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client,
    ):

        async def status(host: str) -> int:
            return (await client.get("/health", headers={"Host": host})).status_code

        assert await status("pod-a-80.proxy.runpod.net") == 200
        assert await status("pod-b-80.proxy.runpod.net") == 502
        assert await status("pod-c-80.proxy.runpod.net") == 404


def test_server_thread_serves_each_app_on_its_own_port() -> None:
    apps = [make_pod(), make_pod(pod_id="pod-b")]
    with ServerThread(apps) as ports:
        assert len(set(ports)) == 2
        for port in ports:
            assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
