"""Contract tests: the client and the fake both speak RunPod's published REST v2 API.

Every request the real client sends and every response the fake cloud returns is
validated by openapi-core against RunPod's own OpenAPI 3.1 document (vendored in
vendor/runpod/openapi-v2.json, its origin in vendor/runpod/SOURCE.md), never by
hand-written checks.
A battery drives all the operations the controller uses through success, refusals
and faults (400, 401, 402, 403, 404, 409, 422, 429, 5xx) and every pod status, plus
pod actions the client does not use but the fake serves. Then hypothesis checks that
the fake's 422s (its own small rule set) fall exactly where the spec's schema says.

Left out on purpose: the GraphQL query (not part of the REST spec; its shape is
tested in test_runpod_notices.py) and the MalformedJson fault (broken by design).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openapi_core import Config, OpenAPI
from openapi_core.datatypes import RequestParameters
from prometheus_client import CollectorRegistry
from werkzeug.datastructures import Headers, ImmutableMultiDict

from rpp.adapters.clock import ManualClock
from rpp.adapters.runpod import answers
from rpp.adapters.runpod.client import RunPodClient
from rpp.adapters.runpod.wire import PodRequest
from rpp.sim import faults
from rpp.sim.cloud import CloudError, FakeCloud
from rpp.sim.cloud_api import CloudApi
from rpp.sim.cloud_requests import check_create, check_update
from tests.fixtures_runpod import FAST, L40S, RTX4090, stocked_cloud

VENDORED = Path(__file__).parents[3] / "vendor" / "runpod"
SPEC = VENDORED / "openapi-v2.json"
SERVER = "https://api.runpod.io"


class SpecRequest:
    """An httpx request in the shape openapi-core validates."""

    def __init__(self, request: httpx.Request) -> None:
        self.host_url = SERVER
        self.path = request.url.path
        self.method = request.method.lower()
        self.body = request.content or None
        self.content_type = request.headers.get("content-type", "")
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(list(request.url.params.multi_items())),
            header=Headers(dict(request.headers)),
            cookie=ImmutableMultiDict(),
        )


class SpecResponse:
    def __init__(self, response: httpx.Response) -> None:
        self.status_code = response.status_code
        self.data = response.content
        self.content_type = response.headers.get("content-type", "")
        self.headers = Headers(dict(response.headers))


class Recorder(httpx.AsyncBaseTransport):
    """Keeps every (request, response) that crosses the transport."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.exchanges: list[tuple[httpx.Request, httpx.Response]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        await response.aread()
        self.exchanges.append((request, response))
        return response


@pytest.fixture(scope="module")
def openapi() -> OpenAPI:
    problem_json: dict[str, Callable[[bytes], Any]] = {"application/problem+json": json.loads}
    return OpenAPI.from_dict(
        json.loads(SPEC.read_text()),
        config=Config(extra_media_type_deserializers=problem_json),
    )


def test_vendored_spec_is_the_published_document_byte_for_byte() -> None:
    """SOURCE.md names the upstream blob and digest; a hand edit of the copy fails here."""
    data = SPEC.read_bytes()
    source = (VENDORED / "SOURCE.md").read_text()
    assert hashlib.sha256(data).hexdigest() in source
    git_blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    assert git_blob in source
    assert json.loads(data)["info"]["version"] == "2.0.0"


async def refused_call(c: RunPodClient, operation: str, pod_id: str, request: PodRequest) -> None:
    if operation == "createPod":
        await c.create_pod(request, gpu_type=L40S, datacenter="EU-SE-1", cloud="SECURE")
    else:
        await c.delete_pod(pod_id)


async def drive_the_client(cloud: FakeCloud, clock: ManualClock, recorder: Recorder) -> None:
    """Every operation the controller uses, through success, refusals and faults."""
    request = PodRequest(name="rpp-c-1", image="img:1", env={"A": "1"})

    def client(key: str = "k") -> RunPodClient:
        return RunPodClient(api_key=key, transport=recorder, registry=CollectorRegistry(), **FAST)

    async with client() as c:
        await c.list_pods()
        pod = await c.create_pod(request, gpu_type=RTX4090, datacenter="EU-RO-1", cloud="SECURE")
        for step in (0, 20, 40):  # PROVISIONING, STARTING, RUNNING
            clock.advance(step)
            await c.list_pods()
            await c.get_pod(pod.id)
        await c.update_pod(pod.id, image="img:2", env={"A": "2"})
        await c.gpu_catalog(cloud="SECURE")
        await c.gpu_catalog(cloud="COMMUNITY", gpu_count=2)
        await c.datacenters()
        start = clock.now() - dt.timedelta(hours=2)
        billed = await c.pod_billing(start=start, end=clock.now() + dt.timedelta(hours=1))
        assert {record.pod_id for record in billed} == {pod.id}
        cloud.faults.next("listPods", faults.ServerError(503))
        cloud.faults.next("getPod", faults.RateLimited(retry_after=0))
        await c.list_pods()
        await c.get_pod(pod.id)
        refusals: list[tuple[str, faults.Fault]] = [
            ("createPod", faults.NoCapacity()),
            ("createPod", faults.Refuse(status=402, detail="Insufficient balance.")),
            ("createPod", faults.Refuse(status=422, detail="bad body")),
            ("createPod", faults.CreatedButFailed()),
            ("deletePod", faults.Refuse(status=409, detail="cluster pod")),
        ]
        for operation, fault in refusals:
            cloud.faults.next(operation, fault)
            with pytest.raises(answers.RunPodError):
                await refused_call(c, operation, pod.id, request)
        assert await c.delete_pod(pod.id) is True
        assert await c.delete_pod(pod.id) is False
        with pytest.raises(answers.NotFound):
            await c.get_pod(pod.id)
    async with client("ro-key") as c:
        with pytest.raises(answers.Forbidden):
            await c.create_pod(request, gpu_type=RTX4090, datacenter="EU-RO-1", cloud="SECURE")
    cloud.accepted_keys = frozenset({"only-this"})
    async with client("not-that") as c:
        with pytest.raises(answers.Unauthorized):
            await c.list_pods()
    # A rotation: both keys pass until the old one is revoked, then only the new one.
    cloud.accepted_keys = frozenset({"old-key", "new-key"})
    async with client("old-key") as c:
        await c.list_pods()
        cloud.accepted_keys = frozenset({"new-key"})
        with pytest.raises(answers.Unauthorized):
            await c.list_pods()
        c.use_key("new-key")
        await c.list_pods()
    cloud.accepted_keys = None


async def drive_raw(cloud: FakeCloud, clock: ManualClock, recorder: Recorder) -> None:
    """What the client never sends but the fake serves: actions, bad bodies, conflicts."""
    async with httpx.AsyncClient(
        transport=recorder, base_url=SERVER, headers={"Authorization": "Bearer k"}
    ) as http:
        body = {"name": "raw", "image": "i", "gpu": {"id": RTX4090}}
        pod_id = (await http.post("/v2/pods", json=body)).json()["id"]
        action = f"/v2/pods/{pod_id}/action"
        await http.post(action, json={"action": "restart"})  # 409 while PROVISIONING
        clock.advance(60)
        for name in ("restart", "stop", "start", "terminate"):
            await http.post(action, json={"action": name})
        await http.post("/v2/pods", json={"name": "", "gpu": {"id": RTX4090}})  # 422
        await http.post("/v2/pods", json={"name": "x", "image": "i"})  # 400: no gpu or cpu
        await http.get("/v2/catalog/gpus", params={"include": "AVAILABILITY"})  # 400
        await http.delete("/v2/pods/nosuchpod00000")  # 404
        for query in (
            {"bucketSize": "day"},  # RunPod's defaults: the last 30 days
            {"podId": pod_id, "bucketSize": "hour", "startTime": "2026-01-01T00:00:00Z"},
            {"bucketSize": "week"},  # 400: the fake bills in hours and days
            {"bucketSize": "fortnight"},  # 422: no such bucket size
            {"startTime": "yesterday"},  # 422
        ):
            await http.get("/v2/billing/pods", params=query)


@pytest.fixture(scope="module")
def exchanges() -> dict[str, list[tuple[httpx.Request, httpx.Response]]]:
    clock = ManualClock()
    cloud = stocked_cloud(clock, boot_time=60, provisioning_time=20)
    cloud.set_stock("EU-SE-1", L40S, "COMMUNITY", 3)
    client_side = Recorder(httpx.ASGITransport(app=CloudApi(cloud)))
    raw_side = Recorder(httpx.ASGITransport(app=CloudApi(cloud)))

    async def run() -> None:
        await drive_the_client(cloud, clock, client_side)
        await drive_raw(cloud, clock, raw_side)

    asyncio.run(run())
    return {"client": client_side.exchanges, "raw": raw_side.exchanges}


def rest(pairs: list[tuple[httpx.Request, httpx.Response]]) -> list[Any]:
    return [(q, r) for q, r in pairs if q.url.path.startswith("/v2/")]


def test_every_request_the_client_sends_matches_the_published_contract(
    openapi: OpenAPI, exchanges: dict[str, list[Any]]
) -> None:
    pairs = rest(exchanges["client"])
    for request, _ in pairs:
        openapi.validate_request(SpecRequest(request))
    sent = {(q.method, q.url.path.split("/")[2]) for q, _ in pairs}
    assert sent >= {("GET", "pods"), ("POST", "pods"), ("PATCH", "pods"), ("DELETE", "pods")}
    assert {q.url.path for q, _ in pairs} >= {
        "/v2/catalog/gpus",
        "/v2/catalog/datacenters",
        "/v2/billing/pods",
    }


def test_every_response_the_fake_returns_matches_the_published_contract(
    openapi: OpenAPI, exchanges: dict[str, list[Any]]
) -> None:
    pairs = rest(exchanges["client"]) + rest(exchanges["raw"])
    for request, response in pairs:
        openapi.validate_response(SpecRequest(request), SpecResponse(response))
    statuses = {r.status_code for _, r in pairs}
    assert statuses >= {200, 201, 204, 400, 401, 402, 403, 404, 409, 422, 429, 500, 503}
    pod_states = {
        pod["status"]
        for _, r in pairs
        if r.status_code == 200 and r.request.url.path == "/v2/pods"
        for pod in r.json()["pods"]
    }
    assert pod_states >= {"PROVISIONING", "STARTING", "RUNNING"}


def test_a_revoked_key_gets_runpods_401_and_the_rotated_key_its_listing(
    exchanges: dict[str, list[Any]],
) -> None:
    listings = [
        (q.headers["authorization"], r.status_code)
        for q, r in exchanges["client"]
        if (q.method, q.url.path) == ("GET", "/v2/pods")
    ]
    assert listings[-3:] == [
        ("Bearer old-key", 200),
        ("Bearer old-key", 401),
        ("Bearer new-key", 200),
    ]


def test_contract_checks_catch_a_drifted_answer(openapi: OpenAPI, exchanges: Any) -> None:
    """The validator is live: a pod without a required field fails it."""
    request, response = next((q, r) for q, r in exchanges["client"] if r.status_code == 201)
    broken = dict(response.json())
    del broken["ssh"]
    drifted = httpx.Response(201, json=broken, request=request)
    with pytest.raises(Exception, match="ssh"):
        openapi.validate_response(SpecRequest(request), SpecResponse(drifted))


# Valid and contract-breaking values per field. Bodies start valid and get at most two
# breaks, so both verdicts are common; a purely random body is almost always invalid.
CONTAINER_VALID: dict[str, list[Any]] = {
    "image": ["img:1", ""],
    "env": [{}, {"A": "b"}],
    "ports": [["80/http"], []],
    "disk": [20],
    "args": ["--fast"],
    "registry": [None, "reg-1"],
    "mounts": [
        {},
        {"persistent": {"size": 20, "path": "/w"}},
        {"network": [{"volumeId": "v", "path": "/n"}]},
    ],
}
CONTAINER_BROKEN: dict[str, list[Any]] = {
    "image": [7],
    "env": [{"A": 1}, ["A"]],
    "ports": ["80/http", [80]],
    "disk": [0, "20", True],
    "args": [3],
    "registry": [1],
    "mounts": [
        {"persistent": {"size": 5, "path": "/w"}},
        {"persistent": {"size": 20}},
        {"network": [{"volumeId": "v", "path": "/n"}, {"volumeId": "w", "path": "/m"}]},
        {"other": 1},
    ],
    "bogus": [1],
}
CREATE_VALID: dict[str, list[Any]] = {
    **CONTAINER_VALID,
    "templateId": ["tpl"],
    "gpu": [
        {"id": RTX4090, "count": 1},
        {"id": RTX4090},
        {"id": RTX4090, "minCudaVersion": "12.8"},
        {"id": RTX4090, "allowedCudaVersions": ["12.4"]},
    ],
    "cloud": ["SECURE", "COMMUNITY"],
    "dataCenterIds": [["EU-RO-1"], []],
    "startSsh": [True],
    "globalNetworking": [False],
}
CREATE_BROKEN: dict[str, list[Any]] = {
    **CONTAINER_BROKEN,
    "name": ["", 5],
    "templateId": ["", 3],
    "gpu": [
        {"id": RTX4090, "count": 0},
        {"count": 1},
        {"id": RTX4090, "bogus": 1},
        {"id": RTX4090, "minCudaVersion": "12"},
        {"id": RTX4090, "allowedCudaVersions": ["12.4", "x"]},
        RTX4090,
    ],
    "cloud": ["MOON"],
    "dataCenterIds": [[1], "EU"],
    "startSsh": ["yes"],
    "globalNetworking": [0],
}
UPDATE_VALID: dict[str, list[Any]] = {
    **CONTAINER_VALID,
    "name": ["renamed"],
    "locked": [True],
    "templateId": ["tpl", ""],
}
UPDATE_BROKEN: dict[str, list[Any]] = {
    **CONTAINER_BROKEN,
    "name": [""],
    "locked": ["no"],
    "templateId": [3],
}


@st.composite
def bodies(
    draw: st.DrawFn,
    valid: dict[str, list[Any]],
    broken: dict[str, list[Any]],
    base: dict[str, Any],
) -> dict[str, Any]:
    body = dict(base)
    for key, values in valid.items():
        if draw(st.booleans()):
            body[key] = draw(st.sampled_from(values))
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from([*sorted(broken), "-drop-"]))
        if key == "-drop-" and body:
            body.pop(draw(st.sampled_from(sorted(body))))
        elif key != "-drop-":
            body[key] = draw(st.sampled_from(broken[key]))
    return body


CREATE_BODIES = bodies(
    CREATE_VALID, CREATE_BROKEN, {"name": "pod-a", "image": "img:1", "gpu": {"id": RTX4090}}
)
UPDATE_BODIES = bodies(UPDATE_VALID, UPDATE_BROKEN, {})


def spec_accepts(openapi: OpenAPI, method: str, path: str, body: Any) -> bool:
    request = httpx.Request(
        method, f"{SERVER}{path}", json=body, headers={"Authorization": "Bearer k"}
    )
    try:
        openapi.validate_request(SpecRequest(request))
    except Exception:
        return False
    return True


def fake_accepts(check: Any, body: Any) -> bool:
    try:
        check(body)
    except CloudError as error:
        return error.status != 422  # a 400 rule break is past the contract check
    return True


@settings(max_examples=100, deadline=None)
@given(body=CREATE_BODIES)
def test_fake_answers_422_for_exactly_the_create_bodies_the_spec_rejects(
    openapi: OpenAPI, body: dict[str, Any]
) -> None:
    assert fake_accepts(check_create, body) == spec_accepts(openapi, "POST", "/v2/pods", body)


@settings(max_examples=60, deadline=None)
@given(body=UPDATE_BODIES)
def test_fake_answers_422_for_exactly_the_update_bodies_the_spec_rejects(
    openapi: OpenAPI, body: dict[str, Any]
) -> None:
    path = "/v2/pods/abc"
    assert fake_accepts(check_update, body) == spec_accepts(openapi, "PATCH", path, body)
