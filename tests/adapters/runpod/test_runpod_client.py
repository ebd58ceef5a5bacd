"""The RunPod client against the fake cloud, in-process (httpx ASGI transport).

Covered: mapping of RunPod's pod JSON; one list call for every pod; retries of reads,
updates and deletes on 5xx/429/timeouts within one deadline; Retry-After and RateLimit
honoured (and never waited past the deadline); creates never retried blindly (5xx,
timeout, a bad 201 -> Unknown, and the pod is then found by name), but resent after a
429; PATCH semantics; delete of a gone pod; headers sent; every call counted.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import httpx
import pytest
from prometheus_client import CollectorRegistry

from rpp import __version__
from rpp.adapters.clock import ManualClock
from rpp.adapters.runpod import answers
from rpp.adapters.runpod.call_metrics import ApiCallMetrics
from rpp.adapters.runpod.client import RunPodClient
from rpp.adapters.runpod.wire import PodRequest
from rpp.model.observations import PodStatus
from rpp.sim import faults
from rpp.sim.cloud import FakeCloud
from rpp.sim.cloud_api import CloudApi
from rpp.sim.virtual_time import VirtualClock, run_virtual
from tests.fixtures_runpod import FAST, L40S, RTX4090, ServerFarm, client_for, stocked_cloud

REQUEST = PodRequest(name="rpp-pool-a1", image="ghcr.io/acme/infer:1", env={"MODE": "fast"})


async def create_4090(client: RunPodClient) -> None:
    await client.create_pod(REQUEST, gpu_type=RTX4090, datacenter="EU-RO-1", cloud="SECURE")


def creates(cloud: FakeCloud) -> int:
    return sum(1 for c in cloud.calls if c.operation == "createPod")


async def test_list_pods_maps_runpods_fields_into_observations() -> None:
    clock = ManualClock()
    cloud = stocked_cloud(clock)
    pod = cloud.add_pod(
        name="rpp-pool-x", image="img:1", gpu_type=L40S, datacenter="EU-SE-1", env={"K": "v"}
    )
    async with client_for(cloud) as client:
        (listed,) = await client.list_pods()
    assert listed.id == pod.info.pod_id
    assert listed.name == "rpp-pool-x"
    assert listed.status is PodStatus.RUNNING
    assert (listed.gpu_type, listed.gpu_count, listed.datacenter) == (L40S, 1, "EU-SE-1")
    assert listed.cloud == "SECURE"
    assert listed.cost_per_hr == pytest.approx(0.86)
    assert listed.created_at == clock.now() - dt.timedelta(seconds=60)
    assert listed.env == {"K": "v"}
    assert "v" not in repr(listed)  # env stays out of reprs


async def test_listing_many_pods_is_one_call() -> None:
    cloud = stocked_cloud()
    for i in range(5):
        cloud.add_pod(name=f"p{i}", image="i", gpu_type=RTX4090, datacenter="EU-RO-1")
    async with client_for(cloud) as client:
        assert len(await client.list_pods()) == 5
    assert [c.operation for c in cloud.calls] == ["listPods"]


async def test_get_of_unknown_pod_raises_not_found_with_runpods_detail() -> None:
    async with client_for(stocked_cloud()) as client:
        with pytest.raises(answers.NotFound) as caught:
            await client.get_pod("nosuchpod00000")
    assert caught.value.detail == "Pod nosuchpod00000 not found."


async def test_read_is_retried_after_503_and_429_then_succeeds_and_each_call_counts() -> None:
    cloud = stocked_cloud()
    cloud.faults.next("listPods", faults.ServerError(503))
    cloud.faults.next("listPods", faults.RateLimited(retry_after=0))
    registry = CollectorRegistry()
    async with client_for(cloud, registry=registry) as client:
        assert await client.list_pods() == []
    metrics = ApiCallMetrics(registry)
    assert metrics.value("listPods", answers.CallOutcome.SERVER_ERROR) == 1
    assert metrics.value("listPods", answers.CallOutcome.RATE_LIMITED) == 1
    assert metrics.value("listPods", answers.CallOutcome.OK) == 1


def test_persistent_5xx_ends_at_the_deadline_with_the_last_error() -> None:
    """On virtual time (the client keeps its deadline on the loop's clock), so a loaded
    machine cannot stretch it: the retries end inside the deadline exactly."""
    cloud = stocked_cloud()
    cloud.faults.always("listPods", faults.ServerError(502))

    async def main(_: VirtualClock) -> tuple[float, answers.ServerError]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with client_for(cloud, retry_deadline=0.6) as client:
            with pytest.raises(answers.ServerError) as caught:
                await client.list_pods()
        return loop.time() - started, caught.value

    took, error = run_virtual(main)
    assert error.status == 502
    assert took <= 0.6
    assert len(cloud.calls) >= 3  # it did retry, with backoff, inside the deadline


def test_429_is_waited_at_least_its_retry_after() -> None:
    cloud = stocked_cloud()
    cloud.faults.next("listPods", faults.RateLimited(retry_after=1))

    async def main(_: VirtualClock) -> float:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with client_for(cloud, retry_deadline=3.0) as client:
            await client.list_pods()
        return loop.time() - started

    assert run_virtual(main) >= 1.0
    assert len(cloud.calls) == 2


def test_429_whose_retry_after_passes_the_deadline_is_raised_without_waiting() -> None:
    cloud = stocked_cloud()
    cloud.faults.next("listPods", faults.RateLimited(retry_after=30))

    async def main(_: VirtualClock) -> tuple[float, answers.RateLimited]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        async with client_for(cloud, retry_deadline=1.0) as client:
            with pytest.raises(answers.RateLimited) as caught:
                await client.list_pods()
        return loop.time() - started, caught.value

    took, error = run_virtual(main)
    assert took == 0.0
    assert error.retry_after == 30
    assert len(cloud.calls) == 1


async def test_exhausted_ratelimit_window_stops_calls_until_it_resets() -> None:
    cloud = stocked_cloud(rate_limit_per_minute=1)
    registry = CollectorRegistry()
    async with client_for(cloud, registry=registry) as client:
        await client.list_pods()  # answered with RateLimit: "minute";r=0;t=60
        with pytest.raises(answers.RateLimited) as caught:
            await client.get_pod("anything000000")
    assert len(cloud.calls) == 1  # the second call never left the client
    assert caught.value.retry_after == pytest.approx(60, abs=1)
    assert ApiCallMetrics(registry).value("getPod", answers.CallOutcome.RATE_LIMITED) == 0


async def test_create_after_5xx_is_not_retried_and_reports_unknown() -> None:
    cloud = stocked_cloud()
    cloud.faults.next("createPod", faults.ServerError(500))
    registry = CollectorRegistry()
    async with client_for(cloud, registry=registry) as client:
        with pytest.raises(answers.Unknown) as caught:
            await client.create_pod(
                REQUEST, gpu_type=RTX4090, datacenter="EU-RO-1", cloud="SECURE"
            )
    assert creates(cloud) == 1
    assert caught.value.cause.outcome is answers.CallOutcome.SERVER_ERROR
    assert ApiCallMetrics(registry).value("createPod", answers.CallOutcome.UNKNOWN) == 1


async def test_pod_made_before_a_500_is_found_by_its_name_on_the_next_list() -> None:
    cloud = stocked_cloud()
    cloud.faults.next("createPod", faults.CreatedButFailed())
    async with client_for(cloud) as client:
        with pytest.raises(answers.Unknown):
            await client.create_pod(
                REQUEST, gpu_type=RTX4090, datacenter="EU-RO-1", cloud="SECURE"
            )
        names = [p.name for p in await client.list_pods()]
    assert names == [REQUEST.name]
    assert creates(cloud) == 1


async def test_create_that_times_out_reports_unknown_and_is_not_resent() -> None:
    cloud = stocked_cloud()
    cloud.faults.next("createPod", faults.Timeout(applied=True))
    async with client_for(cloud, read_timeout=0.2, connect_timeout=0.1) as client:
        with pytest.raises(answers.Unknown) as caught:
            await client.create_pod(
                REQUEST, gpu_type=RTX4090, datacenter="EU-RO-1", cloud="SECURE"
            )
    assert caught.value.cause.outcome is answers.CallOutcome.TIMEOUT
    assert creates(cloud) == 1
    assert len(cloud.pods) == 1  # it was made: the next list adopts it


async def test_create_with_an_unreadable_201_reports_unknown() -> None:
    cloud = stocked_cloud()
    cloud.faults.next("createPod", faults.MalformedJson(status=201))
    async with client_for(cloud) as client:
        with pytest.raises(answers.Unknown) as caught:
            await client.create_pod(
                REQUEST, gpu_type=RTX4090, datacenter="EU-RO-1", cloud="SECURE"
            )
    assert caught.value.cause.outcome is answers.CallOutcome.BAD_RESPONSE


async def test_create_is_resent_after_a_429_because_runpod_did_not_act() -> None:
    cloud = stocked_cloud()
    cloud.faults.next("createPod", faults.RateLimited(retry_after=0))
    async with client_for(cloud) as client:
        pod = await client.create_pod(REQUEST, gpu_type=L40S, datacenter="EU-SE-1", cloud="SECURE")
    assert creates(cloud) == 2
    assert list(cloud.pods) == [pod.id]
    assert (pod.gpu_type, pod.datacenter, pod.status) == (L40S, "EU-SE-1", PodStatus.PROVISIONING)


async def test_create_refusals_are_raised_as_is_not_as_unknown() -> None:
    cloud = stocked_cloud()
    cloud.set_stock("EU-RO-1", RTX4090, "SECURE", 0)
    async with client_for(cloud) as client:
        with pytest.raises(answers.NoCapacity) as caught:
            await client.create_pod(
                REQUEST, gpu_type=RTX4090, datacenter="EU-RO-1", cloud="SECURE"
            )
    assert caught.value.detail.startswith("There are no longer any instances available")
    assert creates(cloud) == 1


async def test_update_sends_image_and_the_complete_env_and_keeps_the_machine() -> None:
    clock = ManualClock()
    farm = ServerFarm()
    cloud = stocked_cloud(clock, pod_server_factory=farm)
    pod = cloud.add_pod(
        name="p", image="img:1", gpu_type=L40S, datacenter="EU-SE-1", env={"OLD": "1", "K": "a"}
    )
    clock.advance(30)
    async with client_for(cloud) as client:
        updated = await client.update_pod(pod.info.pod_id, image="img:2", env={"K": "b"})
    assert updated.image == "img:2"
    assert updated.env == {"K": "b"}  # replaced wholesale: OLD is gone
    assert (updated.gpu_type, updated.datacenter, updated.id) == (L40S, "EU-SE-1", pod.info.pod_id)
    server = farm.servers[pod.info.pod_id]
    assert server.restarts == [clock.now()]
    assert server.info.image == "img:2"


async def test_update_and_delete_are_retried_after_a_5xx() -> None:
    cloud = stocked_cloud()
    pod = cloud.add_pod(name="p", image="i", gpu_type=RTX4090, datacenter="EU-RO-1")
    cloud.faults.next("updatePod", faults.ServerError(503))
    cloud.faults.next("deletePod", faults.ServerError(500))
    async with client_for(cloud) as client:
        await client.update_pod(pod.info.pod_id, image="i2", env={})
        assert await client.delete_pod(pod.info.pod_id) is True
    ops = [c.operation for c in cloud.calls]
    assert ops == ["updatePod", "updatePod", "deletePod", "deletePod"]
    assert cloud.pods == {}


async def test_delete_of_a_pod_that_is_already_gone_is_success() -> None:
    registry = CollectorRegistry()
    async with client_for(stocked_cloud(), registry=registry) as client:
        assert await client.delete_pod("gone0000000000") is False
    assert ApiCallMetrics(registry).value("deletePod", answers.CallOutcome.NOT_FOUND) == 1


async def test_malformed_json_on_a_read_is_a_bad_response_and_not_retried() -> None:
    cloud = stocked_cloud()
    cloud.faults.next("listPods", faults.MalformedJson())
    async with client_for(cloud) as client:
        with pytest.raises(answers.BadResponse) as caught:
            await client.list_pods()
    assert "not JSON" in str(caught.value)
    assert len(cloud.calls) == 1


async def test_read_that_never_answers_is_retried_then_raises_timeout() -> None:
    cloud = stocked_cloud()
    cloud.faults.always("listPods", faults.Timeout())
    async with client_for(cloud, read_timeout=0.15, connect_timeout=0.05, retry_deadline=0.6) as c:
        with pytest.raises(answers.Timeout):
            await c.list_pods()
    assert len(cloud.calls) >= 2


async def test_slow_answer_within_the_timeout_is_simply_waited_for() -> None:
    cloud = stocked_cloud()
    cloud.faults.next("listPods", faults.Slow(seconds=0.2))
    async with client_for(cloud) as client:
        assert await client.list_pods() == []
    assert len(cloud.calls) == 1


async def test_requests_carry_bearer_auth_user_agent_and_no_key_in_the_url() -> None:
    seen: list[httpx.Request] = []
    inner = httpx.ASGITransport(app=CloudApi(stocked_cloud()))

    class Recording(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            seen.append(request)
            return await inner.handle_async_request(request)

    client = RunPodClient(
        api_key="sekrit-key", transport=Recording(), registry=CollectorRegistry(), **FAST
    )
    async with client:
        await client.list_pods()
        await client.host_notices()
    assert [r.url.path for r in seen] == ["/v2/pods", "/graphql"]
    for request in seen:
        assert request.headers["authorization"] == "Bearer sekrit-key"
        assert request.headers["user-agent"].startswith(f"runpod-pool-controller/{__version__}")
        assert "sekrit" not in str(request.url)
    assert str(seen[0].url).startswith("https://api.runpod.io/v2/pods")


def test_client_refuses_an_empty_key_and_a_bad_base_url_with_clear_errors() -> None:
    with pytest.raises(ValueError, match="API key is empty"):
        RunPodClient(api_key="  ")
    with pytest.raises(ValueError, match="must start with https://"):
        RunPodClient(api_key="k", base_url="api.runpod.io")
    assert "k" not in repr(RunPodClient(api_key="k", base_url="https://x.test"))


async def test_catalog_reads_map_stock_levels_per_datacenter() -> None:
    cloud = stocked_cloud()
    cloud.set_stock("EU-RO-1", RTX4090, "SECURE", 1)
    async with client_for(cloud) as client:
        catalog = await client.gpu_catalog(cloud="SECURE")
        datacenters = {dc.id: dc for dc in await client.datacenters()}
    assert catalog.availability(RTX4090, "EU-RO-1").value == "LOW"
    assert catalog.availability(RTX4090, "EU-SE-1").value == "MEDIUM"
    assert catalog.availability(L40S, "EU-SE-1").value == "HIGH"
    assert catalog.availability(L40S, "EU-RO-1").value == "NONE"
    # One list price per GPU type: the fake lists the highest its datacenters bill.
    assert catalog.gpus[RTX4090].price_per_hr == pytest.approx(0.74)
    assert datacenters["EU-SE-1"].gpu_availability[L40S].value == "HIGH"
    assert datacenters["EU-SE-1"].region == "EUROPE"
