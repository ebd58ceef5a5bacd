"""Every outcome the client classifies, over real HTTP against `rpp fake-runpod`.

The fake runs as the real CLI in a subprocess (`rpp fake-runpod --port 0 --scenario
FILE`), scripted through its `/_fake/` control endpoints, so these tests cross a real
socket, uvicorn and httpx's connection handling exactly as production does.

Covered: OK, NoCapacity, Rejected (400 and 422), InsufficientBalance, Unauthorized,
Forbidden (naming the operation), NotFound, Conflict, RateLimited (Retry-After kept),
ServerError, Timeout, ConnectionFailed, BadResponse, Unknown (create after a 5xx,
then found by name), plus the proxy reaching a pod's fake inference service.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from rpp.adapters.runpod import answers
from rpp.adapters.runpod.client import RunPodClient
from rpp.adapters.runpod.wire import PodRequest
from rpp.model.proxy_hosts import proxy_host
from tests.fixtures_runpod import FAST, L40S, RTX4090, FakeRunPodProcess, running_fake_runpod

SCENARIO = f"""
cloud:
  bootTime: 0s
  seed: 3
  stock:
    - {{datacenter: EU-RO-1, gpuType: {RTX4090}, cloud: SECURE, count: 3, costPerHr: 0.69}}
    - {{datacenter: EU-SE-1, gpuType: {RTX4090}, cloud: SECURE, count: 0}}
    - {{datacenter: EU-SE-1, gpuType: {L40S}, cloud: SECURE, count: 2}}
other-section: ignored by the cloud loader
"""
REQUEST = PodRequest(name="rpp-http-1", image="img:1", env={"METRICS_TOKEN": "tok"})


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeRunPodProcess]:
    scenario = tmp_path_factory.mktemp("fake") / "scenario.yaml"
    scenario.write_text(SCENARIO)
    yield from running_fake_runpod("--scenario", str(scenario))


@pytest.fixture(autouse=True)
def clean(fake: FakeRunPodProcess) -> None:
    fake.control("DELETE", "faults")
    fake.control("DELETE", "calls")
    fake.control("POST", "balance", {"balance": None})
    fake.control("POST", "auth", {"acceptedKey": None})


def client(fake: FakeRunPodProcess, key: str = "key-1", **overrides: Any) -> RunPodClient:
    settings = {**FAST, **overrides}
    return RunPodClient(api_key=key, base_url=fake.url, registry=CollectorRegistry(), **settings)


def fault(fake: FakeRunPodProcess, operation: str, spec: dict[str, Any], **kw: Any) -> None:
    fake.control("POST", "faults", {"operation": operation, "fault": spec, **kw})


async def create(c: RunPodClient, gpu: str = RTX4090, dc: str = "EU-RO-1") -> Any:
    return await c.create_pod(REQUEST, gpu_type=gpu, datacenter=dc, cloud="SECURE")


async def test_ok_create_then_list_and_delete(fake: FakeRunPodProcess) -> None:
    async with client(fake) as c:
        pod = await create(c)
        assert pod.id in {p.id for p in await c.list_pods()}
        assert await c.delete_pod(pod.id) is True


async def test_no_capacity(fake: FakeRunPodProcess) -> None:
    async with client(fake) as c:
        with pytest.raises(answers.NoCapacity) as caught:
            await create(c, dc="EU-SE-1")
    assert caught.value.status == 400
    assert "no longer any instances" in caught.value.detail


async def test_rejected_400_rule_and_422_contract(fake: FakeRunPodProcess) -> None:
    async with client(fake) as c:
        with pytest.raises(answers.Rejected) as rule:
            await create(c, gpu="NVIDIA RTX 9999")
        fault(fake, "createPod", {"kind": "Refuse", "status": 422, "detail": "bad body"})
        with pytest.raises(answers.Rejected) as contract:
            await create(c)
    assert (rule.value.status, contract.value.status) == (400, 422)


async def test_insufficient_balance(fake: FakeRunPodProcess) -> None:
    fake.control("POST", "balance", {"balance": 0})
    async with client(fake) as c:
        with pytest.raises(answers.InsufficientBalance) as caught:
            await create(c)
    assert caught.value.status == 402


async def test_unauthorized(fake: FakeRunPodProcess) -> None:
    fake.control("POST", "auth", {"acceptedKey": "the-right-key"})
    async with client(fake, key="a-wrong-key") as c:
        with pytest.raises(answers.Unauthorized) as caught:
            await c.list_pods()
    assert caught.value.status == 401
    assert "a-wrong-key" not in str(caught.value)


async def test_forbidden_names_the_operation(fake: FakeRunPodProcess) -> None:
    async with client(fake, key="ro-readonly") as c:
        assert isinstance(await c.list_pods(), list)  # reads work with a Read Only key
        with pytest.raises(answers.Forbidden) as caught:
            await create(c)
    assert "createPod" in str(caught.value)
    assert "Read Only" in str(caught.value)
    calls = fake.control("GET", "calls")["calls"]
    assert [call[0] for call in calls] == ["listPods", "createPod"]  # no retry of a 403


async def test_not_found_and_conflict(fake: FakeRunPodProcess) -> None:
    fault(fake, "deletePod", {"kind": "Refuse", "status": 409, "detail": "cluster pod"})
    async with client(fake) as c:
        with pytest.raises(answers.NotFound):
            await c.get_pod("nosuchpod00000")
        with pytest.raises(answers.Conflict):
            await c.delete_pod("nosuchpod00000")


async def test_rate_limited_keeps_retry_after(fake: FakeRunPodProcess) -> None:
    fault(fake, "listPods", {"kind": "RateLimited", "retry_after": 5})
    async with client(fake, retry_deadline=1.0) as c:
        with pytest.raises(answers.RateLimited) as caught:
            await c.list_pods()
    assert caught.value.retry_after == 5


async def test_server_error_after_retries(fake: FakeRunPodProcess) -> None:
    fault(fake, "getPod", {"kind": "ServerError", "status": 503}, always=True)
    async with client(fake, retry_deadline=0.5) as c:
        with pytest.raises(answers.ServerError) as caught:
            await c.get_pod("whatever000000")
    assert caught.value.status == 503
    assert len(fake.control("GET", "calls")["calls"]) >= 2


async def test_timeout(fake: FakeRunPodProcess) -> None:
    fault(fake, "listPods", {"kind": "Timeout"}, always=True)
    async with client(fake, read_timeout=0.3, connect_timeout=0.3, retry_deadline=0.8) as c:
        with pytest.raises(answers.Timeout):
            await c.list_pods()


async def test_connection_refused_is_a_connection_error_even_for_create() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the client connects
    settings = {**FAST, "retry_deadline": 0.3}
    c = RunPodClient(
        api_key="k", base_url=f"http://127.0.0.1:{port}", registry=CollectorRegistry(), **settings
    )
    async with c:
        with pytest.raises(answers.ConnectionFailed) as read:
            await c.list_pods()
        with pytest.raises(answers.ConnectionFailed) as write:
            await create(c)  # never sent, so certainly not made: not Unknown
    assert read.value.sent is False
    assert write.value.sent is False


async def test_bad_response(fake: FakeRunPodProcess) -> None:
    fault(fake, "listPods", {"kind": "MalformedJson"})
    async with client(fake) as c:
        with pytest.raises(answers.BadResponse):
            await c.list_pods()


async def test_unknown_create_is_found_by_name_on_the_next_list(fake: FakeRunPodProcess) -> None:
    fault(fake, "createPod", {"kind": "CreatedButFailed", "status": 502})
    async with client(fake) as c:
        with pytest.raises(answers.Unknown) as caught:
            await create(c, gpu=L40S, dc="EU-SE-1")
        found = [p for p in await c.list_pods() if p.gpu_type == L40S]
        assert [p.name for p in found] == [REQUEST.name]
        await c.delete_pod(found[0].id)
    assert caught.value.cause.status == 502


async def test_proxy_reaches_the_pods_fake_inference_service(fake: FakeRunPodProcess) -> None:
    async with client(fake) as c:
        pod = await create(c)
    try:
        async with httpx.AsyncClient(base_url=fake.url, timeout=5) as http:
            health = await http.get("/health", headers={"Host": proxy_host(pod.id, 80)})
            missing = await http.get("/health", headers={"Host": proxy_host("nopod00000", 80)})
        assert health.status_code == 200
        assert missing.status_code == 404
    finally:
        async with client(fake) as c:
            await c.delete_pod(pod.id)


def test_scenario_file_is_what_the_fake_serves(fake: FakeRunPodProcess) -> None:
    catalog = httpx.get(
        f"{fake.url}/v2/catalog/gpus",
        params={"include": "AVAILABILITY", "product": "POD"},
        headers={"Authorization": "Bearer k"},
    ).json()
    levels = {g["id"]: g["availability"] for g in catalog["gpus"]}
    assert levels == {RTX4090: "MEDIUM", L40S: "LOW"}
    assert Path(__file__).name  # keeps the module importable without the fixture
