"""Hostile RunPod answers, through the real client over real HTTP against `rpp fake-runpod`.

The fake runs as the real CLI in a subprocess and is scripted through `/_fake/faults`
with the hostile kinds (RawAnswer, OddFields, ExtraPods), so every answer crosses a
real socket, uvicorn and httpx's streaming exactly as production does.

Covered (issue 15, items 1 and 3):
- one pod with an odd field (gpu.count null, "two" or 1e300, an unknown status, a
  cost of "inf", an unreadable time, env that is not strings, a name that is a number)
  is listed, marked unreadable with the field named, counted in the gauge, and every
  other pod reads as before;
- entries without a usable pod id (or repeating one) are skipped and counted;
- only an answer that is not RunPod's shape at all (not JSON, no `pods` array, a
  nesting 100,000 deep) fails, and then as BadResponse, never another exception;
- GraphQL: `errors: 5`, maintenance times "inf" and 1e300, pod entries without an id;
- size: a listing over the limit is refused unread (announced or chunked), and the
  memory the call takes stays near the limit, not the answer's size; a 5 MB error
  detail comes back cut, with its size, and the retry log lines stay short.
"""

from __future__ import annotations

import json
import logging
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from rpp.adapters.runpod import answers
from rpp.adapters.runpod.client import RunPodClient
from rpp.adapters.runpod.wire import PodRequest
from rpp.model.observations import PodStatus
from tests.fixtures_runpod import FAST, RTX4090, FakeRunPodProcess, running_fake_runpod

SCENARIO = f"""
cloud:
  bootTime: 0s
  seed: 5
  stock:
    - {{datacenter: EU-RO-1, gpuType: {RTX4090}, cloud: SECURE, count: 8, costPerHr: 0.69}}
"""
UNREADABLE = "runpod_pool_runpod_unreadable_pods"


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeRunPodProcess]:
    scenario = tmp_path_factory.mktemp("fake") / "scenario.yaml"
    scenario.write_text(SCENARIO)
    yield from running_fake_runpod("--scenario", str(scenario))


@pytest.fixture(scope="module")
def pod_ids(fake: FakeRunPodProcess) -> list[str]:
    """Three pods of the account, made once through the real API."""
    import asyncio

    async def make() -> list[str]:
        async with client(fake) as c:
            made = [
                await c.create_pod(
                    PodRequest(name=f"rpp-web-{n}", image="img:1", env={"PORT": "80"}),
                    gpu_type=RTX4090,
                    datacenter="EU-RO-1",
                    cloud="SECURE",
                )
                for n in ("a1", "b2", "c3")
            ]
        return [p.id for p in made]

    return asyncio.run(make())


@pytest.fixture(autouse=True)
def clean(fake: FakeRunPodProcess) -> None:
    fake.control("DELETE", "faults")


def client(fake: FakeRunPodProcess, **overrides: Any) -> RunPodClient:
    settings = {**FAST, "registry": CollectorRegistry(), **overrides}
    return RunPodClient(api_key="key-1", base_url=fake.url, **settings)


def fault(fake: FakeRunPodProcess, operation: str, spec: dict[str, Any], **kw: Any) -> None:
    fake.control("POST", "faults", {"operation": operation, "fault": spec, **kw})


def gauge(c: RunPodClient) -> float | None:
    return c._metrics._registry.get_sample_value(UNREADABLE)


ODD_FIELDS = {
    "gpu.count null": ({"gpu.count": None}, "gpu.count is missing"),
    "gpu.count two": ({"gpu.count": "two"}, "gpu.count is 'two'"),
    "gpu.count 1e300": ({"gpu.count": 1e300}, "gpu.count is 1e+300"),
    "unknown status": ({"status": "HIBERNATING"}, "'HIBERNATING' is not a status"),
    "status null": ({"status": None}, "status is missing"),
    "cost inf": ({"cost": "inf"}, "cost is 'inf'"),
    "cost negative": ({"cost": -3}, "cost is -3"),
    "createdAt": ({"createdAt": "yesterday"}, "createdAt 'yesterday' is not a timestamp"),
    "env numbers": ({"env": {"PORT": 80}}, "env is not a map of strings"),
    "name number": ({"name": 7}, "name is 7"),
    "gpu a list": ({"gpu": [1, 2]}, "gpu is a list of 2"),
}


@pytest.mark.parametrize("case", list(ODD_FIELDS), ids=list(ODD_FIELDS))
async def test_one_pod_with_an_odd_field_is_listed_marked_and_counted_the_rest_read(
    fake: FakeRunPodProcess, pod_ids: list[str], case: str
) -> None:
    changes, said = ODD_FIELDS[case]
    odd = pod_ids[1]
    fault(fake, "listPods", {"kind": "OddFields", "set": changes, "pods": [odd]})
    async with client(fake) as c:
        pods = {p.id: p for p in await c.list_pods()}
        assert set(pod_ids) <= set(pods)
        unreadable = pods[odd].unreadable
        assert unreadable is not None
        assert said in unreadable
        assert all(pods[i].unreadable is None for i in pod_ids if i != odd)
        assert pods[pod_ids[0]].status is PodStatus.RUNNING
        assert gauge(c) == 1
        # The next listing reads cleanly again: the gauge follows it.
        await c.list_pods()
        assert gauge(c) == 0


async def test_pods_without_a_usable_id_are_skipped_and_counted(
    fake: FakeRunPodProcess, pod_ids: list[str]
) -> None:
    extra = [
        {"id": 5, "name": "rpp-web-zz"},
        {"name": "no id at all"},
        "a string, not a pod",
        {"id": "x" * 100_000},
        {"id": pod_ids[0], "name": "a second pod with the first one's id"},
    ]
    fault(fake, "listPods", {"kind": "ExtraPods", "pods": extra})
    async with client(fake) as c:
        pods = await c.list_pods()
        assert {p.id for p in pods} >= set(pod_ids)
        assert [p.name for p in pods if p.id == pod_ids[0]] == ["rpp-web-a1"]
        assert all(len(p.id) < 100 for p in pods)
        assert gauge(c) == 5


NOT_RUNPODS_SHAPE: dict[str, tuple[dict[str, Any], str]] = {
    "not json": ({"body": "<html>Bad gateway</html>"}, "not JSON"),
    "no pods array": ({"body": '{"pods": 5}'}, "no 'pods' array"),
    "a list": ({"body": "[]"}, "no 'pods' array"),
    "nested 100000 deep": ({"body": "[", "repeat": 100_000}, "nests deeper"),
    "object nested deep": (
        {
            "prefix": '{"pods": [{"id": "deep0000000001", "env": ',
            "body": '{"a":',
            "repeat": 50_000,
        },
        "nests deeper",
    ),
}


@pytest.mark.parametrize("case", list(NOT_RUNPODS_SHAPE), ids=list(NOT_RUNPODS_SHAPE))
async def test_an_answer_that_is_not_runpods_shape_is_one_bad_response(
    fake: FakeRunPodProcess, case: str
) -> None:
    body, said = NOT_RUNPODS_SHAPE[case]
    fault(fake, "listPods", {"kind": "RawAnswer", **body}, always=True)
    async with client(fake) as c:
        with pytest.raises(answers.BadResponse) as caught:
            await c.list_pods()
    assert said in str(caught.value)
    assert len(str(caught.value)) < 400


GRAPHQL_ERRORS = {
    "errors 5": '{"errors": 5}',
    "errors of strings": '{"errors": ["a", "b"], "data": null}',
    "data a string": '{"data": "nope"}',
}


@pytest.mark.parametrize("case", list(GRAPHQL_ERRORS), ids=list(GRAPHQL_ERRORS))
async def test_a_graphql_answer_of_any_shape_fails_as_one_bad_response(
    fake: FakeRunPodProcess, case: str
) -> None:
    fault(fake, "hostNotices", {"kind": "RawAnswer", "body": GRAPHQL_ERRORS[case]})
    async with client(fake) as c:
        with pytest.raises(answers.BadResponse, match="GraphQL notice query failed"):
            await c.host_notices()


@pytest.mark.parametrize("value", ["inf", 1e300, "-inf", "nan", {"at": 1}, "9" * 400])
async def test_an_unreadable_maintenance_time_keeps_the_notice_and_says_what_came(
    fake: FakeRunPodProcess, pod_ids: list[str], value: Any
) -> None:
    odd = pod_ids[2]
    changes = {"machine.maintenanceStart": value}
    fault(fake, "hostNotices", {"kind": "OddFields", "set": changes, "pods": [odd]})
    fault(fake, "hostNotices", {"kind": "ExtraPods", "pods": [{"machine": {"note": "x"}}, 3]})
    async with client(fake) as c:
        notices = await c.host_notices()
    notice = notices[odd]
    assert notice.active
    assert notice.maintenance_start is None
    assert "maintenanceStart" in (notice.maintenance_note or "")
    assert len(notice.describe()) < 300
    assert not any(notices[i].active for i in pod_ids if i != odd)


POD = (
    '{"id": "big%06d", "name": "rpp-other-x", "status": "RUNNING", "image": "i", '
    '"env": {"PAD": "' + "p" * 1500 + '"}, "gpu": {"id": "G", "count": 1}, "cost": 0.5}'
)


@pytest.mark.parametrize("announced", [True, False], ids=["content-length", "chunked"])
async def test_a_listing_over_the_limit_is_refused_unread_in_bounded_memory(
    fake: FakeRunPodProcess, announced: bool
) -> None:
    limit = 2 << 20
    huge = {  # about 50 MB of valid listing
        "kind": "RawAnswer",
        "prefix": '{"pods": [',
        "body": POD,
        "separator": ",",
        "repeat": 32_000,
        "suffix": "]}",
        "length": announced,
    }
    fault(fake, "listPods", huge, always=True)
    async with client(fake, max_answer_bytes=limit, read_timeout=30.0) as c:
        tracemalloc.start()
        try:
            with pytest.raises(answers.BadResponse) as caught:
                await c.list_pods()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert "2,097,152" in str(caught.value)
    assert "this controller reads (RUNPOD_MAX_ANSWER_MB)" in str(caught.value)
    if announced:  # the size RunPod announced is given
        size = len('{"pods": [') + 32_000 * len(POD) + 31_999 + len("]}")
        assert f"is {size:,} bytes" in str(caught.value)
    assert peak < 3 * limit, f"the refused call held {peak:,} bytes"


async def test_a_5mb_error_detail_is_cut_with_its_size_and_logged_short(
    fake: FakeRunPodProcess, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    problem = {
        "kind": "RawAnswer",
        "status": 503,
        "prefix": '{"title": "Service Unavailable", "detail": "',
        "body": "overloaded ",
        "repeat": 500_000,
        "suffix": '", "errors": ["' + "e" * 10_000 + '", 1, 2, 3, 4, 5, 6]}',
    }
    fault(fake, "listPods", problem, always=True)
    async with client(fake, retry_deadline=0.5) as c:
        with pytest.raises(answers.ServerError) as caught:
            await c.list_pods()
    text = str(caught.value)
    assert f"({5_500_000 - answers.DETAIL_SHOWN:,} more characters not shown)" in text
    assert "and 2 more" in text
    assert len(text) < 2_000
    assert caplog.records, "a retry is logged"
    assert max(len(r.getMessage()) for r in caplog.records) < 2_000


def test_hostile_kinds_are_refused_with_the_field_named(fake: FakeRunPodProcess) -> None:
    import httpx

    bad = [
        {"kind": "RawAnswer", "repeat": -1},
        {"kind": "RawAnswer", "body": "x", "repeat": 2_000_000_000},
        {"kind": "OddFields", "set": {"a": 1}, "pods": "abc"},
        {"kind": "ExtraPods", "pods": 5},
    ]
    for spec in bad:
        answer = httpx.post(
            f"{fake.url}/_fake/faults", json={"operation": "listPods", "fault": spec}, timeout=5
        )
        assert answer.status_code == 400, spec
        assert (
            "RawAnswer" in answer.text or "OddFields" in answer.text or "ExtraPods" in answer.text
        )


async def test_odd_catalog_entries_are_left_out_and_the_rest_still_place_pods(
    fake: FakeRunPodProcess,
) -> None:
    gpus = [
        5,
        {"id": 7},
        {"id": "G1", "dataCenters": 3, "availability": "ABUNDANT"},
        {
            "id": "G2",
            "availability": "HIGH",
            "dataCenters": [{"id": "EU-RO-1", "availability": "HIGH"}, {"id": None}, "x"],
            "price": {"secure": "inf"},
            "name": {"odd": True},
        },
    ]
    fault(fake, "listGpuTypes", {"kind": "RawAnswer", "body": json.dumps({"gpus": gpus})})
    async with client(fake) as c:
        catalog = await c.gpu_catalog(cloud="SECURE")
    assert set(catalog.gpus) == {"G1", "G2"}
    assert catalog.gpus["G1"].availability.has_stock, "a level added since is worth a try"
    assert catalog.gpus["G1"].datacenters == {}
    assert catalog.has_stock("G2", "EU-RO-1")
    assert catalog.gpus["G2"].price_per_hr is None
    assert catalog.gpus["G2"].name == "G2"
