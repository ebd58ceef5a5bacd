"""Fake pods serve inference-shaped work through RunPod's emulated proxy, over real HTTP.

Covered: a POST's JSON body reaches the pod whole and the answer names the pod, the
request id and the prompt's size; a stream sends its events chunked and ends with
[DONE]; every piece of work is logged with its request id; and each failure mode
reaches new requests and those in flight: a dead service (502 at once, in-flight
streams cut), one that fails a set time into each request (502 after the work started,
a stream cut after its headers), a hang (the CDN's 524; a silent stream cut), a pod
terminated in the console (the proxy's 404), all scripted through /_fake/ endpoints;
and the simulator's in-process transport, which streams the same way.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from rpp.adapters.clock import SystemClock
from rpp.model.proxy_hosts import proxy_host
from rpp.sim.cloud import FakeCloud, FakePodInfo
from rpp.sim.cloud_api import CloudApi
from rpp.sim.in_process import ResponderTransport
from rpp.sim.inference import FakeInferencePod
from rpp.sim.inference_work import WorkLog
from rpp.sim.localhttp import serve_local
from rpp.sim.proxy import ProxyApp, route_by_host
from tests.fixtures_runpod import RTX4090

CHUNK = {"chunk_seconds": 0.02}


@dataclass
class Fake:
    """`rpp fake-runpod` in miniature: a cloud with one running pod, served over HTTP."""

    cloud: FakeCloud
    work: WorkLog
    pod_id: str
    http: httpx.AsyncClient

    @property
    def host(self) -> str:
        return proxy_host(self.pod_id, 80)

    @property
    def server(self) -> FakeInferencePod:
        server = self.cloud.pods[self.pod_id].server
        assert isinstance(server, FakeInferencePod)
        return server

    async def post(self, path: str, body: dict[str, object], rid: str) -> httpx.Response:
        headers = {"Host": self.host, "X-Request-Id": rid}
        return await self.http.post(path, json=body, headers=headers)

    async def control(self, method: str, path: str, body: object = None) -> httpx.Response:
        return await self.http.request(method, f"/_fake/{path}", json=body)


@pytest.fixture
async def fake() -> AsyncIterator[Fake]:
    clock = SystemClock()
    work = WorkLog()

    def pods(info: FakePodInfo) -> FakeInferencePod:
        return FakeInferencePod(pod_id=info.pod_id, clock=clock, work_log=work)

    cloud = FakeCloud(clock=clock, boot_time=0, pod_server_factory=pods)
    pod = cloud.add_pod(name="a", image="img:1", gpu_type=RTX4090, datacenter="EU-RO-1")
    app = route_by_host(CloudApi(cloud, work_log=work), ProxyApp(cloud, limit_s=0.3))
    async with (
        serve_local(app) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http,
    ):
        yield Fake(cloud, work, pod.info.pod_id, http)


async def read_events(response: httpx.Response, *, after_first: asyncio.Event) -> list[str]:
    events: list[str] = []
    async for chunk in response.aiter_text():
        events += [e for e in chunk.split("\n\n") if e]
        after_first.set()
    return events


async def test_a_post_body_reaches_the_pod_and_its_answer_says_who_did_the_work(
    fake: Fake,
) -> None:
    answer = await fake.post("/generate", {"prompt": "héllo", "seconds": 0.01}, rid="post-1")
    assert answer.status_code == 200
    assert answer.headers["x-pod"] == fake.pod_id
    assert answer.json() == {
        "output": "ok",
        "pod": fake.pod_id,
        "request_id": "post-1",
        "prompt_bytes": len("héllo".encode()),
    }
    logged = (await fake.control("GET", "work")).json()["work"]
    assert [(w["request_id"], w["kind"], w["outcome"]) for w in logged] == [
        ("post-1", "generate", "ok")
    ]
    assert logged[0]["ended"] >= logged[0]["started"]


async def test_a_stream_sends_each_event_chunked_and_ends_with_done(fake: Fake) -> None:
    headers = {"Host": fake.host, "X-Request-Id": "stream-1"}
    body = {"seconds": 0.1, **CHUNK}
    async with fake.http.stream("POST", "/stream", json=body, headers=headers) as response:
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["transfer-encoding"] == "chunked"
        events = await read_events(response, after_first=asyncio.Event())
    assert events == [f"data: {i}" for i in range(5)] + ["data: [DONE]"]
    assert [w.outcome for w in fake.work.records()] == ["ok"]


async def test_a_dead_service_answers_502_at_once_and_cuts_the_streams_in_flight(
    fake: Fake,
) -> None:
    headers = {"Host": fake.host, "X-Request-Id": "stream-1"}
    first = asyncio.Event()
    async with fake.http.stream(
        "POST", "/stream", json={"seconds": 30, **CHUNK}, headers=headers
    ) as response:
        reading = asyncio.create_task(read_events(response, after_first=first))
        await first.wait()
        assert (await fake.control("POST", f"pods/{fake.pod_id}/service", {"mode": "dies"})).json()
        with pytest.raises(httpx.RemoteProtocolError):
            await reading
    assert (await fake.post("/generate", {}, rid="post-2")).status_code == 502
    # The new POST never reached the app: no work started for it.
    assert [(w.request_id, w.outcome) for w in fake.work.records()] == [("stream-1", "cut")]


async def test_a_service_failing_into_its_requests_starts_the_work_then_answers_502(
    fake: Fake,
) -> None:
    await fake.control("POST", f"pods/{fake.pod_id}/service", {"mode": "fails", "after": 0.05})
    answer = await fake.post("/generate", {"seconds": 0.01}, rid="post-1")
    assert answer.status_code == 502
    headers = {"Host": fake.host, "X-Request-Id": "stream-1"}
    async with fake.http.stream("POST", "/stream", json=CHUNK, headers=headers) as response:
        assert response.status_code == 200  # the headers went out before the failure
        with pytest.raises(httpx.RemoteProtocolError):
            await read_events(response, after_first=asyncio.Event())
    # Probes fail the same way: the controller can tell.
    assert (await fake.http.get("/health", headers={"Host": fake.host})).status_code == 502
    outcomes = [(w.request_id, w.kind, w.outcome) for w in fake.work.records()]
    assert outcomes == [("post-1", "generate", "failed"), ("stream-1", "stream", "cut")]
    await fake.control("POST", f"pods/{fake.pod_id}/service", {"mode": "healthy"})
    assert (await fake.post("/generate", {}, rid="post-2")).status_code == 200


async def test_a_hung_service_gets_the_cdn_524_and_its_silent_stream_is_cut(fake: Fake) -> None:
    headers = {"Host": fake.host, "X-Request-Id": "stream-1"}
    first = asyncio.Event()
    async with fake.http.stream(
        "POST", "/stream", json={"seconds": 30, **CHUNK}, headers=headers
    ) as response:
        reading = asyncio.create_task(read_events(response, after_first=first))
        await first.wait()
        await fake.control("POST", f"pods/{fake.pod_id}/service", {"mode": "hangs"})
        with pytest.raises(httpx.RemoteProtocolError):
            await reading
    answer = await fake.post("/generate", {}, rid="post-1")
    assert answer.status_code == 524
    assert [w.request_id for w in fake.work.records()] == ["stream-1", "post-1"]


async def test_a_pod_terminated_in_the_console_is_a_404_from_the_proxy(fake: Fake) -> None:
    headers = {"Host": fake.host, "X-Request-Id": "stream-1"}
    first = asyncio.Event()
    async with fake.http.stream(
        "POST", "/stream", json={"seconds": 30, **CHUNK}, headers=headers
    ) as response:
        reading = asyncio.create_task(read_events(response, after_first=first))
        await first.wait()
        assert (await fake.control("DELETE", f"pods/{fake.pod_id}")).status_code == 200
        with pytest.raises(httpx.RemoteProtocolError):
            await reading
    answer = await fake.post("/generate", {}, rid="post-1")
    assert answer.status_code == 404
    assert answer.text == f"pod {fake.pod_id} not found\n"


async def test_the_service_and_work_endpoints_refuse_bad_input_with_the_reason(
    fake: Fake,
) -> None:
    service = f"pods/{fake.pod_id}/service"
    bad = await fake.control("POST", service, {"mode": "melts"})
    assert bad.status_code == 400
    assert "mode must be one of healthy, dies, fails, hangs, got 'melts'" in bad.json()["error"]
    no_after = await fake.control("POST", service, {"mode": "fails"})
    assert no_after.json() == {"error": "after is required"}
    unknown = await fake.control("POST", "pods/nosuchpod/service", {"mode": "dies"})
    assert unknown.status_code == 404
    await fake.post("/generate", {}, rid="post-1")
    assert (await fake.control("DELETE", "work")).json() == {"ok": True}
    assert (await fake.control("GET", "work")).json() == {"work": []}


async def test_a_body_that_is_not_json_asks_for_the_default_work() -> None:
    pod = FakeInferencePod(pod_id="pod-a", clock=SystemClock(), work_log=(work := WorkLog()))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=pod), base_url="http://pod-a-80.proxy.runpod.net"
    ) as client:
        answer = await client.post("/generate", content=b"\xff not json")
    assert answer.status_code == 200
    assert json.loads(answer.text)["prompt_bytes"] == 0
    assert [r.body_bytes for r in work.records()] == [10]


async def test_the_simulators_transport_streams_too_and_reads_a_cut_as_a_closed_peer() -> None:
    clock = SystemClock()
    cloud = FakeCloud(
        clock=clock,
        boot_time=0,
        pod_server_factory=lambda info: FakeInferencePod(pod_id=info.pod_id, clock=clock),
    )
    pod = cloud.add_pod(name="a", image="img:1", gpu_type=RTX4090, datacenter="EU-RO-1")
    transport = ResponderTransport(ProxyApp(cloud).respond)
    url = f"https://{proxy_host(pod.info.pod_id, 80)}/stream"
    async with httpx.AsyncClient(transport=transport) as http:
        whole = await http.post(url, json={"seconds": 0.04, **CHUNK})
        assert whole.text == "data: 0\n\ndata: 1\n\ndata: [DONE]\n\n"
        server = cloud.pods[pod.info.pod_id].server
        assert isinstance(server, FakeInferencePod)
        server.fail_after(0.01)
        with pytest.raises(httpx.RemoteProtocolError):
            await http.post(url, json=CHUNK)
