"""The controller's requests and limits follow from the fleet benchmark's results, and the
uninstall hook's from what it does.

The defaults are stated for up to 1,000 members (50 pools of 20), the largest fleet
benchmarks/bench_fleet.py measured, over HTTP and TLS (benchmarks/results/fleet.json,
fleet_tls.json): memory holds the measured peak with room, and its request equals its limit
(memory cannot be taken back from a running process); the CPU request covers the measured
average, and the CPU limit is a whole core, because a loop's CPU comes in one burst (the
probe sweep) that a throttling limit would stretch. Both install paths carry the same
values, and docs/install.md quotes them.
"""

from __future__ import annotations

import json
import re
from typing import Any

import helm_python as helm
import pytest
import yaml

from tests.fixtures_install import (
    CHART,
    ROOT,
    example,
    find,
    objects,
    render,
    two_pools,
)

RESULTS = ROOT / "benchmarks" / "results"
STATED_MEMBERS = 1000
MIB = {"Mi": 1.0, "Gi": 1024.0}


def millicores(quantity: str) -> float:
    return float(quantity[:-1]) if quantity.endswith("m") else float(quantity) * 1000


def mebibytes(quantity: str) -> float:
    number, unit = re.fullmatch(r"([0-9.]+)(Mi|Gi)", quantity).groups()  # type: ignore[union-attr]
    return float(number) * MIB[unit]


def measured(name: str) -> dict[str, Any]:
    """The fleet size the defaults are stated for, as the results file recorded it."""
    body = json.loads((RESULTS / name).read_text())
    [size] = [s for s in body["measured"]["sizes"] if s["members"] == STATED_MEMBERS]
    return size  # type: ignore[no-any-return]


def yaml_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    return values


def controller_resources(objs: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = find(objs, "Deployment", "runpod-pool-controller")
    resources: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0][
        "resources"
    ]
    return resources


@pytest.mark.parametrize("results", ["fleet.json", "fleet_tls.json"])
def test_the_defaults_hold_the_measured_fleet_they_are_stated_for(results: str) -> None:
    size = measured(results)
    resources = controller_resources(objects(render()))
    requests, limits = resources["requests"], resources["limits"]
    # Memory: the measured peak with room for oversized answers, never taken back.
    assert requests["memory"] == limits["memory"]
    assert mebibytes(limits["memory"]) >= 1.4 * size["peak_rss_mib"]
    # CPU: the request covers the average over a loop, with room...
    average = size["cpu_s_per_loop"]["median"] / 30 * 1000
    assert millicores(requests["cpu"]) >= 1.4 * average
    # ...and the limit lets a loop's burst run on a whole core, unthrottled.
    assert millicores(limits["cpu"]) >= 1000
    # The request no longer reserves the burst: a replica reserves what it uses.
    assert millicores(requests["cpu"]) <= 2 * average


def test_both_install_paths_and_the_install_doc_carry_the_same_values() -> None:
    chart = controller_resources(objects(render()))
    assert controller_resources(example("deploy/controller.yaml")) == chart
    text = (ROOT / "docs" / "install.md").read_text()
    resources = text.split("\n## Resources\n", 1)[1].split("\n## ", 1)[0]
    for kind in ("requests", "limits"):
        cpu, memory = chart[kind]["cpu"], chart[kind]["memory"]
        assert f"{kind}: {{cpu: {cpu}, memory: {memory}}}" in resources, kind
    assert f"up to {STATED_MEMBERS:,} members" in resources
    for name in ("fleet.json", "fleet_tls.json"):
        assert f"benchmarks/results/{name}" in resources


def test_the_uninstall_hook_is_sized_for_what_it_does_not_as_a_controller() -> None:
    values = yaml_values()
    objs = objects(render(two_pools()))
    job = find(objs, "Job")
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert container["resources"] == values["uninstallHook"]["resources"]
    assert (
        container["resources"]["requests"]["memory"] == container["resources"]["limits"]["memory"]
    )
    controller = controller_resources(objs)
    assert millicores(container["resources"]["requests"]["cpu"]) < millicores(
        controller["requests"]["cpu"]
    )
    assert mebibytes(container["resources"]["limits"]["memory"]) < mebibytes(
        controller["limits"]["memory"]
    )
    custom = {
        "requests": {"cpu": "10m", "memory": "96Mi"},
        "limits": {"cpu": "1", "memory": "96Mi"},
    }
    job = find(objects(render({**two_pools(), "uninstallHook": {"resources": custom}})), "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"] == custom


def test_the_hook_resources_are_checked_as_the_controllers_are() -> None:
    bad = {
        "requests": {"cpu": "50m", "memory": "128m"},
        "limits": {"cpu": "500m", "memory": "128Mi"},
    }
    with pytest.raises(helm.HelmValuesError) as refused:
        render({"uninstallHook": {"resources": bad}})
    assert "/uninstallHook/resources" in str(refused.value)


def test_the_changelog_and_the_upgrade_say_what_the_sizing_changed_and_why() -> None:
    chart = controller_resources(objects(render()))
    for name in ("CHANGELOG.md", "docs/upgrading.md"):
        text = " ".join((ROOT / name).read_text().split())
        assert "`uninstallHook.resources`" in text, name
        assert f"requests.cpu: {chart['requests']['cpu']}" in text, name
        assert "Burstable" in text, name
