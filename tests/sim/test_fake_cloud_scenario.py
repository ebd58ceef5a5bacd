"""The `cloud:` section of a scenario file, and `rpp fake-runpod`'s handling of bad input.

Covered: a full section builds the described world (stock, prices, boot time,
templates, existing pods with notes, balance, quota, how each image behaves); every
mistake is reported with the file and field path and what to write, never a
traceback; the CLI exits 2 with that message for a bad scenario or port.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from rpp.adapters.clock import ManualClock
from rpp.cli import main
from rpp.model.observations import PodStatus
from rpp.sim.cloud import FakePodInfo
from rpp.sim.cloud_scenario import (
    ScenarioError,
    build_cloud,
    load_cloud_scenario,
    parse_cloud_section,
)
from rpp.sim.inference import FakeInferencePod
from tests.fixtures_runpod import L40S, RTX4090

FULL = f"""
cloud:
  seed: 11
  bootTime: 2m
  provisioningTime: 30
  balance: 12.5
  rateLimitPerMinute: 100
  stock:
    - {{datacenter: EU-RO-1, gpuType: {RTX4090}, count: 2, costPerHr: 0.7}}
    - {{datacenter: US-TX-3, gpuType: {L40S}, cloud: COMMUNITY, count: 9}}
  templates:
    - {{id: tpl-a, image: "acme/infer:1", env: {{MODE: fast}}, ports: ["8000/http"]}}
  existing:
    - id: abcdefgh123456
      name: rpp-pool-old
      gpuType: {RTX4090}
      datacenter: EU-RO-1
      image: "acme/infer:0"
      env: {{K: v}}
      note: We have detected a critical error on this machine
    - {{name: rpp-pool-new, gpuType: {L40S}, datacenter: US-TX-3, cloud: COMMUNITY,
        image: "acme/infer:1", booted: false}}
pool: not the cloud loader's business
"""
POD = {"name": "p", "gpuType": "G", "datacenter": "D", "image": "i"}


def test_full_section_builds_the_described_world(tmp_path: Path) -> None:
    file = tmp_path / "s.yaml"
    file.write_text(FULL)
    clock = ManualClock()
    cloud = build_cloud(load_cloud_scenario(file), clock=clock)
    assert (cloud.boot_time, cloud.provisioning_time) == (120.0, 30.0)
    assert cloud.balance == 12.5
    assert cloud.rate_limit_per_minute == 100
    assert cloud.stock_count("EU-RO-1", RTX4090, "SECURE") == 2
    assert cloud.stock[("EU-RO-1", RTX4090, "SECURE")].cost_per_hr == 0.7
    assert cloud.stock_count("US-TX-3", L40S, "COMMUNITY") == 9
    assert cloud.templates["tpl-a"]["ports"] == ["8000/http"]
    old = cloud.pods["abcdefgh123456"]
    assert old.info.env == {"K": "v"}
    assert old.notice.note == "We have detected a critical error on this machine"
    assert cloud.status(old) is PodStatus.RUNNING
    new = next(p for p in cloud.pods.values() if p.info.name == "rpp-pool-new")
    assert cloud.status(new) is PodStatus.PROVISIONING
    assert len(new.info.pod_id) == 14


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"stok": []}, "cloud.stok: unknown field; known fields: seed, bootTime"),
        ({"stock": [{"datacenter": "A", "gpuType": "G"}]}, "cloud.stock[0].count: is required"),
        (
            {"stock": [{"datacenter": "A", "gpuType": "G", "count": -1}]},
            "cloud.stock[0].count: expected an integer >= 0, got -1",
        ),
        (
            {"stock": [{"datacenter": "A", "gpuType": "G", "count": 1, "cloud": "MOON"}]},
            "cloud.stock[0].cloud: expected SECURE or COMMUNITY, got 'MOON'",
        ),
        ({"bootTime": "soon"}, "cloud.bootTime: 'soon' is not a duration"),
        ({"stock": {"datacenter": "A"}}, "cloud.stock: expected a list"),
        (
            {"existing": [{**POD, "id": "X"}]},
            "cloud.existing[0].id: a pod id is 6-32 lowercase letters and digits",
        ),
        (
            {"existing": [{**POD, "env": {"A": 1}}]},
            "cloud.existing[0].env: expected a map of strings to strings",
        ),
        ({"existing": [{"gpuType": "G"}]}, "cloud.existing[0].name: expected a non-empty string"),
        ({"images": ["a:1"]}, "cloud.images: expected a map of image to behaviour"),
        (
            {"images": {"a:1": {"errorRatio": 1.5}}},
            "cloud.images[a:1].errorRatio: a share between 0 and 1, got 1.5",
        ),
        (
            {"images": {"a:1": {"latency": "slow"}}},
            "cloud.images[a:1].latency: 'slow' is not a duration",
        ),
        (
            {"images": {"a:1": {"startFails": "yes"}}},
            "cloud.images[a:1].startFails: expected true or false",
        ),
        (
            {"images": {"a:1": {"errors": 0.3}}},
            "cloud.images[a:1].errors: unknown field; known fields: errorRatio, latency",
        ),
        ("stock", "cloud: expected a mapping, got str"),
    ],
)
def test_mistakes_name_the_field_and_what_to_write(section: Any, message: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_cloud_section(section)
    assert message in str(caught.value)


async def test_each_image_behaves_as_its_images_entry_says_after_an_update_in_place() -> None:
    """A release described in `cloud.images` errors, slows down or never starts once a
    pod is updated to it, and the pod behaves again when it goes back."""
    section = parse_cloud_section(
        {
            "existing": [{**POD, "image": "acme/infer:1"}],
            "images": {
                "acme/infer:2": {"errorRatio": 0.3},
                "acme/infer:3": {"latency": "750ms"},
                "acme/infer:4": {"startFails": True},
            },
        }
    )
    clock = ManualClock()
    servers: dict[str, FakeInferencePod] = {}

    def factory(info: FakePodInfo) -> FakeInferencePod:
        servers[info.pod_id] = FakeInferencePod(pod_id=info.pod_id, clock=clock, latency_s=0.25)
        return servers[info.pod_id]

    cloud = build_cloud(section, clock=clock, pod_server_factory=factory)
    (pod_id,) = cloud.pods
    server = servers[pod_id]

    async def app_answers(count: int) -> list[int]:
        transport = httpx.ASGITransport(app=server)
        async with httpx.AsyncClient(transport=transport, base_url="http://pod") as client:
            return [(await client.get("/generate")).status_code for _ in range(count)]

    assert (await app_answers(10)).count(500) == 0
    cloud.update_pod(pod_id, {"image": "acme/infer:2"})
    assert (await app_answers(10)).count(500) == 3
    cloud.update_pod(pod_id, {"image": "acme/infer:3"})
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await app_answers(1) == [200]
    assert loop.time() - started >= 0.75
    cloud.update_pod(pod_id, {"image": "acme/infer:4"})
    assert not server.is_serving
    cloud.update_pod(pod_id, {"image": "acme/infer:1"})
    assert server.is_serving
    assert (await app_answers(10)).count(500) == 0


def test_duplicate_existing_ids_are_refused() -> None:
    pod = {**POD, "id": "abcdef123456"}
    with pytest.raises(ScenarioError, match=r"existing\[1\]\.id: abcdef123456 is used"):
        parse_cloud_section({"existing": [pod, pod]})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("cloud: [unclosed", "YAML syntax error"),
        ("pool: {}", "no top-level 'cloud:' section"),
        ("cloud: {stock: [{datacenter: A}]}", "cloud.stock[0].gpuType"),
    ],
)
def test_file_errors_name_the_file(tmp_path: Path, content: str, message: str) -> None:
    file = tmp_path / "bad.yaml"
    file.write_text(content)
    with pytest.raises(ScenarioError) as caught:
        load_cloud_scenario(file)
    assert str(file) in str(caught.value)
    assert message in str(caught.value)


def test_cli_reports_a_bad_scenario_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "bad.yaml"
    file.write_text("cloud: {bootTime: forever}")
    assert main(["fake-runpod", "--port", "0", "--scenario", str(file)]) == 2
    err = capsys.readouterr().err
    assert "cloud.bootTime" in err
    assert "Traceback" not in err
    assert main(["fake-runpod", "--port", "0", "--scenario", str(tmp_path / "none.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_cli_refuses_a_port_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["fake-runpod", "--port", "70000"])
    assert caught.value.code == 2
    assert "--port must be 0-65535" in capsys.readouterr().err


def test_listing_lag_is_read_as_a_duration_and_a_bad_one_is_named() -> None:
    assert parse_cloud_section({"listingLag": "90s"}).listing_lag == 90.0
    assert parse_cloud_section({}).listing_lag == 0.0
    with pytest.raises(ScenarioError, match=r"cloud\.listingLag"):
        parse_cloud_section({"listingLag": "soon"})
