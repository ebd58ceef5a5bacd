"""The fake RunPod cloud: the world model and its REST face, spoken to raw.

Covered: lifecycle on the injected clock; reproducible RunPod-like ids; stock taken
and given back; datacenter preference; PATCH semantics (same machine, env replaced,
container restarted, startedAt kept); DELETE then 404; pod actions and their 409s;
keys (missing -> 401, "ro-" -> 403 on writes only); 422 vs 400; 402; scheduled stock;
the catalog's levels; the per-minute quota; call recording; the fault queue.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
from typing import Any

import httpx
import pytest

from rpp.adapters.clock import ManualClock
from rpp.sim import faults
from rpp.sim.cloud import Call, FakeCloud
from rpp.sim.cloud_api import CloudApi
from tests.fixtures_runpod import L40S, RTX4090, ServerFarm, stocked_cloud

BODY = {"name": "rpp-p-1", "image": "img:1", "gpu": {"id": RTX4090, "count": 1}}


def api(cloud: FakeCloud, key: str | None = "k") -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=CloudApi(cloud)),
        base_url="https://api.runpod.io",
        headers=headers,
    )


async def create(cloud: FakeCloud, **changes: Any) -> httpx.Response:
    async with api(cloud) as http:
        return await http.post("/v2/pods", json={**BODY, **changes})


async def test_pod_moves_provisioning_starting_running_on_the_clock() -> None:
    clock = ManualClock()
    cloud = stocked_cloud(clock, boot_time=80, provisioning_time=20)
    pod_id = (await create(cloud)).json()["id"]
    seen = []
    async with api(cloud) as http:
        for step in (0, 19, 1, 59, 1):
            clock.advance(step)
            seen.append((await http.get(f"/v2/pods/{pod_id}")).json())
    assert [p["status"] for p in seen] == [
        "PROVISIONING",
        "PROVISIONING",
        "STARTING",
        "STARTING",
        "RUNNING",
    ]
    assert seen[0]["runtime"] is None
    assert seen[0]["startedAt"] is None
    assert seen[-1]["runtime"]["uptime"] == 0
    assert seen[-1]["actions"] == ["stop", "restart", "terminate"]


async def test_pod_ids_look_like_runpods_and_repeat_with_the_seed() -> None:
    async def ids(seed: int) -> list[str]:
        cloud = stocked_cloud(seed=seed)
        return [(await create(cloud, name=f"n{i}")).json()["id"] for i in range(3)]

    first, again, other = await ids(7), await ids(7), await ids(8)
    assert first == again
    assert first != other
    assert all(re.fullmatch(r"[a-z0-9]{14}", pod_id) for pod_id in first)
    assert len(set(first)) == 3


async def test_create_takes_stock_from_the_preferred_datacenter_and_delete_gives_it_back() -> None:
    cloud = stocked_cloud()
    response = await create(cloud, dataCenterIds=["EU-SE-1", "EU-RO-1"], env={"A": "1"})
    assert response.status_code == 201
    pod = response.json()
    assert pod["dataCenterId"] == "EU-SE-1"
    assert pod["cost"] == pytest.approx(0.74)
    assert pod["env"] == {"A": "1"}
    assert cloud.stock_count("EU-SE-1", RTX4090, "SECURE") == 3
    async with api(cloud) as http:
        assert (await http.delete(f"/v2/pods/{pod['id']}")).status_code == 204
        assert (await http.get(f"/v2/pods/{pod['id']}")).status_code == 404
        assert (await http.delete(f"/v2/pods/{pod['id']}")).status_code == 404
    assert cloud.stock_count("EU-SE-1", RTX4090, "SECURE") == 4


async def test_no_stock_in_the_asked_datacenter_is_runpods_400_wording() -> None:
    cloud = stocked_cloud()
    cloud.set_stock("EU-RO-1", RTX4090, "SECURE", 0)
    response = await create(cloud, dataCenterIds=["EU-RO-1"])
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == faults.NO_CAPACITY_DETAIL
    assert cloud.pods == {}


async def test_gpu_count_needs_that_many_free_gpus_in_one_datacenter() -> None:
    cloud = stocked_cloud()
    response = await create(cloud, gpu={"id": RTX4090, "count": 5})
    assert response.status_code == 400
    taken = await create(cloud, gpu={"id": RTX4090, "count": 4})
    assert taken.json()["cost"] == pytest.approx(4 * 0.69)


async def test_patch_keeps_machine_replaces_env_restarts_container_and_keeps_started_at() -> None:
    clock = ManualClock()
    farm = ServerFarm()
    cloud = stocked_cloud(clock, pod_server_factory=farm)
    created = (await create(cloud, env={"OLD": "x", "KEEP": "1"})).json()
    clock.advance(120)
    async with api(cloud) as http:
        before = (await http.get(f"/v2/pods/{created['id']}")).json()
        clock.advance(5)
        patched = await http.patch(
            f"/v2/pods/{created['id']}", json={"image": "img:2", "env": {"KEEP": "2"}}
        )
    after = patched.json()
    assert patched.status_code == 200
    assert after["image"] == "img:2"
    assert after["env"] == {"KEEP": "2"}
    assert (after["gpu"], after["dataCenterId"]) == (before["gpu"], before["dataCenterId"])
    assert after["startedAt"] == before["startedAt"]
    assert farm.servers[created["id"]].restarts == [clock.now()]


async def test_patch_without_env_leaves_env_untouched() -> None:
    cloud = stocked_cloud()
    created = (await create(cloud, env={"A": "1"})).json()
    async with api(cloud) as http:
        after = (await http.patch(f"/v2/pods/{created['id']}", json={"name": "renamed"})).json()
    assert after["env"] == {"A": "1"}
    assert after["name"] == "renamed"


async def test_actions_follow_runpods_per_status_rules() -> None:
    clock = ManualClock()
    farm = ServerFarm()
    cloud = stocked_cloud(clock, pod_server_factory=farm, boot_time=60)
    pod_id = (await create(cloud)).json()["id"]
    async with api(cloud) as http:

        async def act(action: str) -> httpx.Response:
            return await http.post(f"/v2/pods/{pod_id}/action", json={"action": action})

        refused = await act("restart")  # PROVISIONING allows stop/terminate only
        assert refused.status_code == 409
        assert "PROVISIONING" in refused.json()["detail"]
        clock.advance(60)
        stopped = (await act("stop")).json()
        assert (stopped["status"], stopped["cost"]) == ("EXITED", 0.0)
        assert farm.servers[pod_id].stopped
        assert (await act("start")).json()["status"] == "STARTING"
        clock.advance(60)
        assert (await act("restart")).json()["status"] == "RUNNING"
        terminated = await act("terminate")
        assert terminated.status_code == 204
        assert terminated.content == b""
        assert (await http.get(f"/v2/pods/{pod_id}")).status_code == 404


async def test_missing_key_is_401_and_read_only_key_is_403_on_every_write() -> None:
    cloud = stocked_cloud()
    pod = cloud.add_pod(name="p", image="i", gpu_type=RTX4090, datacenter="EU-RO-1")
    path = f"/v2/pods/{pod.info.pod_id}"
    async with api(cloud, key=None) as anonymous:
        assert (await anonymous.get("/v2/pods")).status_code == 401
    async with api(cloud, key="ro-abc") as read_only:
        assert (await read_only.get("/v2/pods")).status_code == 200
        assert (await read_only.get("/v2/catalog/gpus")).status_code == 200
        writes = [
            await read_only.post("/v2/pods", json=BODY),
            await read_only.patch(path, json={"image": "x"}),
            await read_only.delete(path),
            await read_only.post(f"{path}/action", json={"action": "stop"}),
        ]
    assert [w.status_code for w in writes] == [403, 403, 403, 403]
    assert "Read Only" in writes[0].json()["detail"]
    assert list(cloud.pods) == [pod.info.pod_id]
    assert cloud.pods[pod.info.pod_id].info.image == "i"


async def test_accepted_key_rejects_any_other_key() -> None:
    cloud = stocked_cloud(accepted_key="right")
    async with api(cloud, key="wrong") as http:
        assert (await http.get("/v2/pods")).status_code == 401
    async with api(cloud, key="right") as http:
        assert (await http.get("/v2/pods")).status_code == 200


@pytest.mark.parametrize(
    ("body", "status", "mentions"),
    [
        ({"image": "i", "gpu": {"id": RTX4090}}, 422, "body.name"),
        ({**BODY, "bogus": 1}, 422, "body.bogus"),
        ({**BODY, "gpu": {"id": RTX4090, "count": 0}}, 422, "body.gpu.count"),
        ({**BODY, "env": {"A": 1}}, 422, "body.env.A"),
        ({"name": "x", "gpu": {"id": RTX4090}}, 422, "body.image"),
        ({**BODY, "cloud": "MOON"}, 422, "body.cloud"),
        ({"name": "x", "image": "i"}, 400, "Exactly one of gpu or cpu"),
        ({**BODY, "gpu": {"id": "NVIDIA RTX 9999"}}, 400, "Invalid GPU type"),
        ({**BODY, "templateId": "tpl-missing"}, 404, "tpl-missing"),
    ],
)
async def test_contract_breaks_are_422_and_rule_breaks_are_400(
    body: dict[str, Any], status: int, mentions: str
) -> None:
    cloud = stocked_cloud()
    async with api(cloud) as http:
        response = await http.post("/v2/pods", json=body)
    assert response.status_code == status
    problem = response.json()
    assert mentions in problem["detail"] + " ".join(problem.get("errors", []))
    assert cloud.pods == {}


async def test_template_supplies_image_and_env_and_body_env_wins() -> None:
    cloud = stocked_cloud()
    cloud.add_template("tpl1", image="tmpl:1", env={"A": "t", "B": "t"}, ports=["8000/http"])
    body = {"name": "x", "templateId": "tpl1", "gpu": {"id": L40S}, "env": {"B": "body"}}
    async with api(cloud) as http:
        pod = (await http.post("/v2/pods", json=body)).json()
    assert pod["image"] == "tmpl:1"
    assert pod["env"] == {"A": "t", "B": "body"}
    assert pod["ports"] == ["8000/http"]
    assert pod["template"] is None  # RunPod keeps no link to the template


async def test_no_balance_is_402_for_creates() -> None:
    cloud = stocked_cloud()
    cloud.balance = 0.0
    response = await create(cloud)
    assert response.status_code == 402
    assert cloud.stock_count("EU-RO-1", RTX4090, "SECURE") == 4


async def test_scheduled_stock_out_takes_effect_at_its_time() -> None:
    clock = ManualClock()
    cloud = stocked_cloud(clock)
    at = clock.now() + dt.timedelta(hours=1)
    cloud.schedule_stock(at, "EU-RO-1", RTX4090, "SECURE", 0)
    cloud.schedule_stock(at, "EU-SE-1", RTX4090, "SECURE", 0)
    assert (await create(cloud)).status_code == 201
    clock.advance(3600)
    assert (await create(cloud)).status_code == 400


async def test_catalog_levels_follow_stock_and_omit_datacenters_when_none_anywhere() -> None:
    cloud = stocked_cloud()
    cloud.set_stock("EU-RO-1", RTX4090, "SECURE", 0)
    cloud.set_stock("EU-SE-1", RTX4090, "SECURE", 0)
    cloud.set_stock("EU-RO-1", L40S, "COMMUNITY", 2, 0.5)
    async with api(cloud) as http:
        secure = (
            await http.get("/v2/catalog/gpus?include=AVAILABILITY&product=POD&cloud=SECURE")
        ).json()
        community = (
            await http.get("/v2/catalog/gpus?include=AVAILABILITY&product=POD&cloud=COMMUNITY")
        ).json()
        plain = (await http.get("/v2/catalog/gpus")).json()
        no_product = await http.get("/v2/catalog/gpus?include=AVAILABILITY")
    by_id = {g["id"]: g for g in secure["gpus"]}
    assert by_id[RTX4090]["availability"] == "NONE"
    assert "dataCenters" not in by_id[RTX4090]
    assert by_id[L40S]["dataCenters"] == [
        {"id": "EU-SE-1", "name": "EU SE 1", "availability": "HIGH"}
    ]
    community_l40s = {g["id"]: g for g in community["gpus"]}[L40S]
    assert community_l40s["dataCenters"][0]["availability"] == "LOW"
    assert community_l40s["price"] == {"secure": 0.86, "community": 0.5}
    assert all("availability" not in g for g in plain["gpus"])
    assert no_product.status_code == 400


async def test_quota_answers_429_with_retry_after_and_ratelimit_headers() -> None:
    cloud = stocked_cloud(rate_limit_per_minute=2)
    async with api(cloud) as http:
        first = await http.get("/v2/pods")
        await http.get("/v2/pods")
        third = await http.get("/v2/pods")
    assert first.headers["ratelimit"] == '"minute";r=1;t=60'
    assert first.headers["ratelimit-policy"] == '"minute";q=2;w=60'
    assert third.status_code == 429
    assert third.headers["retry-after"] == "60"


async def test_every_request_is_recorded_so_tests_can_prove_no_write_happened() -> None:
    cloud = stocked_cloud()
    async with api(cloud, key="ro-x") as http:
        await http.get("/v2/pods")
        await http.post("/v2/pods", json=BODY)
        await http.get("/nope")
    assert cloud.calls == [
        Call("listPods", "GET", "/v2/pods"),
        Call("createPod", "POST", "/v2/pods"),
        Call("unknown", "GET", "/nope"),
    ]
    assert cloud.write_calls == [Call("createPod", "POST", "/v2/pods")]
    assert cloud.pods == {}


async def test_wrong_method_is_405_with_allow() -> None:
    async with api(stocked_cloud()) as http:
        response = await http.put("/v2/pods")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST"


async def test_timeout_fault_holds_the_answer_until_the_client_gives_up() -> None:
    cloud = stocked_cloud()
    cloud.faults.next("listPods", faults.Timeout())
    async with api(cloud) as http:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await http.get("/v2/pods")
        assert (await http.get("/v2/pods")).status_code == 200  # the fault was used up


def test_fault_queue_serves_queued_then_always_then_wildcard_faults() -> None:
    queue = faults.FaultQueue()
    queue.next("listPods", faults.ServerError(503), times=2)
    queue.always("listPods", faults.Slow(0.1))
    queue.next("*", faults.RateLimited())
    assert queue.take("listPods") == faults.ServerError(503)
    assert queue.take("listPods") == faults.ServerError(503)
    assert queue.take("getPod") == faults.RateLimited()
    assert queue.take("listPods") == faults.Slow(0.1)
    queue.clear("listPods")
    assert queue.take("listPods") is None
    with pytest.raises(faults.FaultError, match="unknown operation 'lisPods'"):
        queue.next("lisPods", faults.ServerError())


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "Explode"}, "unknown fault 'Explode'"),
        ({"kind": "ServerError", "stauts": 500}, "fault.stauts: ServerError has no such field"),
        ("ServerError", "expected a mapping"),
    ],
)
def test_fault_descriptions_are_checked_with_the_field_named(data: Any, message: str) -> None:
    with pytest.raises(faults.FaultError, match=re.escape(message)):
        faults.fault_from_dict(data)


def test_fault_descriptions_round_trip() -> None:
    for fault in (faults.ServerError(503), faults.Timeout(2.0, True), faults.NoCapacity()):
        assert faults.fault_from_dict(fault.to_dict()) == fault


async def test_a_listing_lag_hides_a_created_pod_from_list_and_get_until_it_passes() -> None:
    clock = ManualClock()
    cloud = stocked_cloud(clock)
    cloud.listing_lag = 90.0
    answered = await create(cloud)
    assert answered.status_code == 201
    pod_id = answered.json()["id"]
    async with api(cloud) as http:
        clock.advance(89)
        assert (await http.get("/v2/pods")).json()["pods"] == []
        assert (await http.get(f"/v2/pods/{pod_id}")).status_code == 404
        clock.advance(1)
        assert [p["id"] for p in (await http.get("/v2/pods")).json()["pods"]] == [pod_id]
        assert (await http.get(f"/v2/pods/{pod_id}")).status_code == 200


async def test_a_listing_lag_fault_delays_only_the_creates_it_strikes() -> None:
    clock = ManualClock()
    cloud = stocked_cloud(clock)
    cloud.faults.next("createPod", faults.ListingLag(seconds=150))
    late = (await create(cloud, name="rpp-p-1")).json()["id"]
    prompt = (await create(cloud, name="rpp-p-2")).json()["id"]
    async with api(cloud) as http:
        assert [p["id"] for p in (await http.get("/v2/pods")).json()["pods"]] == [prompt]
        clock.advance(150)
        listed = {p["id"] for p in (await http.get("/v2/pods")).json()["pods"]}
    assert listed == {late, prompt}
    with pytest.raises(faults.FaultError, match=r"ListingLag\.seconds"):
        faults.fault_from_dict({"kind": "ListingLag", "seconds": -1})
