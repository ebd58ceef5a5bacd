"""RunPod's HTTP proxy, emulated: Host `{podId}-{port}.proxy.runpod.net` -> that pod.

Covered: a RUNNING pod's service answers through its proxy host; 502 while the pod
boots, when its service is down or not listening, for an undeclared port and after
a stop; 524 past the CDN limit (loop time); 404 for an unknown pod; and one server
serving both the API and the proxy, routed on the Host header.
"""

from __future__ import annotations

import httpx
import pytest

from rpp.adapters.clock import ManualClock
from rpp.model.proxy_hosts import proxy_host
from rpp.sim.cloud import FakeCloud
from rpp.sim.cloud_api import CloudApi
from rpp.sim.in_process import ResponderTransport
from rpp.sim.proxy import ProxyApp, route_by_host
from tests.fixtures_runpod import RTX4090, ServerFarm, stocked_cloud

# Every test runs over both ways the proxy is served: ASGI (what `rpp fake-runpod`
# serves over HTTP) and in-process, a transport that calls `respond` as the simulator's
# pod client does.
KINDS = pytest.mark.parametrize("kind", ["asgi", "in-process"])


def world(
    kind: str, *, delay_s: float = 0.0, limit_s: float = 100.0
) -> tuple[ManualClock, FakeCloud, ServerFarm, httpx.AsyncClient]:
    clock = ManualClock()
    farm = ServerFarm(delay_s=delay_s)
    cloud = stocked_cloud(clock, pod_server_factory=farm, boot_time=60)
    proxy = ProxyApp(cloud, limit_s=limit_s)
    transport: httpx.AsyncBaseTransport
    if kind == "asgi":
        transport = httpx.ASGITransport(app=route_by_host(CloudApi(cloud), proxy))
    else:
        transport = ResponderTransport(proxy.respond)
    return clock, cloud, farm, httpx.AsyncClient(transport=transport)


def url(pod_id: str, port: int = 80, path: str = "/health") -> str:
    return f"https://{proxy_host(pod_id, port)}{path}"


@KINDS
async def test_running_pods_service_answers_through_its_proxy_host(kind: str) -> None:
    _, cloud, _, http = world(kind)
    one = cloud.add_pod(name="a", image="img:1", gpu_type=RTX4090, datacenter="EU-RO-1")
    two = cloud.add_pod(name="b", image="img:2", gpu_type=RTX4090, datacenter="EU-RO-1")
    async with http:
        first = await http.get(url(one.info.pod_id))
        second = await http.get(url(two.info.pod_id, path="/metrics"))
    assert first.status_code == 200
    assert first.text == f"ok {one.info.pod_id} /health image=img:1"
    assert second.text == f"ok {two.info.pod_id} /metrics image=img:2"


@KINDS
async def test_booting_pod_is_502_until_running(kind: str) -> None:
    clock, cloud, _, http = world(kind)
    pod = cloud.add_pod(name="a", image="i", gpu_type=RTX4090, datacenter="EU-RO-1", booted=False)
    async with http:
        booting = await http.get(url(pod.info.pod_id))
        clock.advance(60)
        running = await http.get(url(pod.info.pod_id))
    assert booting.status_code == 502
    assert running.status_code == 200


@KINDS
async def test_dead_or_refusing_service_and_undeclared_port_are_502(kind: str) -> None:
    _, cloud, farm, http = world(kind)
    pod = cloud.add_pod(name="a", image="i", gpu_type=RTX4090, datacenter="EU-RO-1")
    server = farm.servers[pod.info.pod_id]
    async with http:
        wrong_port = await http.get(url(pod.info.pod_id, port=8888))
        server.refuse = True
        refused = await http.get(url(pod.info.pod_id))
        server.refuse, server.serving = False, False
        dead = await http.get(url(pod.info.pod_id))
    assert [wrong_port.status_code, refused.status_code, dead.status_code] == [502, 502, 502]


@KINDS
async def test_stopped_pod_is_502_and_unknown_pod_is_404(kind: str) -> None:
    _, cloud, _, http = world(kind)
    pod = cloud.add_pod(name="a", image="i", gpu_type=RTX4090, datacenter="EU-RO-1")
    cloud.pod_action(pod.info.pod_id, "stop")
    async with http:
        stopped = await http.get(url(pod.info.pod_id))
        unknown = await http.get(url("nosuchpod00000"))
    assert stopped.status_code == 502
    assert unknown.status_code == 404


@KINDS
async def test_answer_slower_than_the_cdn_limit_is_524(kind: str) -> None:
    _, cloud, _, http = world(kind, delay_s=0.5, limit_s=0.1)
    pod = cloud.add_pod(name="a", image="i", gpu_type=RTX4090, datacenter="EU-RO-1")
    async with http:
        response = await http.get(url(pod.info.pod_id))
    assert response.status_code == 524


async def test_one_server_routes_api_and_proxy_on_the_host_header() -> None:
    _, cloud, _, http = world("asgi")  # as `rpp fake-runpod` serves both on one port
    pod = cloud.add_pod(name="a", image="i", gpu_type=RTX4090, datacenter="EU-RO-1")
    async with http:
        api = await http.get(
            "https://api.runpod.io/v2/pods", headers={"Authorization": "Bearer k"}
        )
        proxied = await http.get(url(pod.info.pod_id))
    assert api.json()["pods"][0]["id"] == pod.info.pod_id
    assert proxied.status_code == 200
    assert [c.operation for c in cloud.calls] == ["listPods"]  # proxy traffic is not API
