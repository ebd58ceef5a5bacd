"""The CRD is generated from the spec model, committed, and enforces what a schema can.

The schema is checked the way the API server would (tests/crd_admission.py: structural
defaults applied first, then the OpenAPI schema with a JSON-schema validator, then the
CEL rules with a CEL interpreter), on examples/pool.yaml and on each invalid case a
schema can express. tests/model/test_spec_agreement.py runs a whole corpus through both.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from rpp.cli import main
from rpp.model.crd import build_crd, render_crd, status_schema
from rpp.model.members import MemberRecord, Phase
from rpp.model.status import PoolStatus
from tests.crd_admission import (
    NOT_CHECKED,
    admit,
    apply_defaults,
    spec_schema,
    status_problems,
)
from tests.fixtures_install import objects, render

ROOT = Path(__file__).parents[2]


def example_spec() -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "pool.yaml").read_text())["spec"]
    return spec


def test_committed_crd_is_the_generated_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crd"]) == 0
    printed = capsys.readouterr().out
    assert printed == render_crd()
    assert (ROOT / "deploy" / "crd.yaml").read_text() == printed, "run: rpp crd > deploy/crd.yaml"
    # scripts/chart_docs.py writes both charts' copies: the controller chart's crds/ as
    # printed, and the CRD chart's template, which Helm must render to this CRD under
    # Helm's metadata.
    regenerate = "run: .venv/bin/python scripts/chart_docs.py"
    chart_crd = ROOT / "helm" / "runpod-pool-controller" / "crds" / "runpodpools.yaml"
    assert chart_crd.read_text() == printed, regenerate
    [rendered] = objects(render(crd_chart=True))
    rendered["metadata"] = {"name": rendered["metadata"]["name"]}
    assert rendered == yaml.safe_load(printed), regenerate


def test_crd_names_group_short_name_status_and_printer_columns() -> None:
    crd = build_crd()
    assert crd["metadata"]["name"] == "runpodpools.runpodpool.ownego.com"
    assert crd["spec"]["names"]["shortNames"] == ["rpp"]
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert list(columns) == [
        "Ready", "Reason", "Mode", "Serving", "Desired", "Cost/h", "Planned", "Rollout", "Age",
    ]  # fmt: skip
    assert columns["Rollout"]["jsonPath"] == ".status.rollout.phase"
    assert columns["Serving"]["jsonPath"] == ".status.ready"
    # The Ready condition, as cert-manager and Karpenter print theirs; its reason only in
    # `-o wide`.
    assert columns["Ready"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Reason"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].reason'
    assert [n for n, c in columns.items() if c.get("priority")] == ["Reason"]


def test_conditions_are_a_list_keyed_by_type_which_each_item_must_carry() -> None:
    conditions = status_schema()["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    assert conditions["items"]["required"] == ["type"]


def test_group_can_be_overridden() -> None:
    crd = build_crd("pools.example.com")
    assert crd["metadata"]["name"] == "runpodpools.pools.example.com"
    assert crd["spec"]["group"] == "pools.example.com"


def test_schema_carries_types_defaults_enums_minimums_and_descriptions() -> None:
    props = spec_schema()["properties"]
    assert props["dryRun"] == {
        "type": "boolean",
        "default": True,
        "description": props["dryRun"]["description"],
    }
    assert props["cloud"]["enum"] == ["SECURE", "COMMUNITY"]
    assert props["limits"]["properties"]["maxCreatesPerHour"]["minimum"] == 0
    assert props["drain"]["properties"]["period"]["default"] == "150s"
    assert "rpp-<pool>-" in props["namePrefix"]["description"]
    assert "default" not in props["namePrefix"]
    missing = [k for k, v in props.items() if not v.get("description")]
    assert missing == []


def test_example_pool_is_admitted() -> None:
    assert admit(example_spec()) == []


def test_an_integral_float_is_admitted_as_the_integer_kubectl_sends() -> None:
    """YAML's 2.0 is a float; kubectl writes it as JSON `2` and the API server stores 2."""
    assert admit({"replicas": {"min": 2.0, "max": 3.0}, "port": 8080.0}) == []
    assert "replicas.min: 2.5 is not of type 'integer'" in admit({"replicas": {"min": 2.5}})


def test_a_pattern_error_lets_the_rules_run_and_a_wrong_type_stops_them() -> None:
    """As strategy.go's hasBlockingErr: only a wrong type, an enum, a length or a missing
    required field keep the API server from running the CEL rules."""
    crossed = {"replicas": {"min": 3, "max": 2}}
    said = admit({**crossed, "adopt": ["Not A Pod"]})
    assert "replicas.min must not be greater than replicas.max" in said
    assert any("does not match" in line for line in said)
    said = admit({**crossed, "port": "80"})
    assert NOT_CHECKED in said
    assert "replicas.min must not be greater than replicas.max" not in said


def test_empty_spec_is_admitted_and_defaulted_like_the_model() -> None:
    schema = spec_schema()
    value = apply_defaults(schema, {})
    assert value["dryRun"] is True
    assert value["replicas"] == {"min": 1}
    assert value["health"]["replaceWhen"]["errorRate"] == {"threshold": 0.05, "duration": "5m"}
    assert admit({}) == []


SCHEMA_REJECTS: dict[str, tuple[dict[str, Any], str]] = {
    "unknown field": ({"replica": {"min": 1}}, "replica"),
    "wrong type": ({"replicas": {"min": "two"}}, "'two' is not of type 'integer'"),
    "bad duration": ({"drain": {"period": "2 minutes"}}, "not a duration; write a number"),
    "duration past Go's range": ({"drain": {"period": "9999999999999h"}}, "longer than 720h"),
    "duration under 1ms": ({"drain": {"period": "0.5ms"}}, "shorter than 1ms"),
    "cloud": ({"cloud": "PRIVATE"}, "'PRIVATE' is not one of"),
    "negative caps": ({"limits": {"maxPods": -1}}, "less than the minimum"),
    "target zero": (
        {"autoscaling": {"enabled": True, "query": "q", "target": 0}},
        "less than or equal to the minimum",
    ),
    "empty gpu types": ({"gpuTypes": []}, "should be non-empty"),
    "adopt not a pod id": ({"adopt": ["Not A Pod"]}, "does not match"),
    "min above max": ({"replicas": {"min": 3, "max": 2}}, "replicas.min must not be greater"),
    "slot ports": ({"replicas": {"min": 4}, "limits": {"maxPods": 8}}, "nginx.slotPorts must"),
    "allowed and denied": (
        {"datacenters": {"allow": ["EU-RO-1"], "deny": ["EU-RO-1"]}},
        "both in datacenters.allow and datacenters.deny",
    ),
    "manage without allow": (
        {"templateId": "t", "dryRun": False},
        "datacenters.allow is required",
    ),
    "autoscaling without query": (
        {"autoscaling": {"enabled": True}},
        "autoscaling.query is required",
    ),
    "token key without secret": ({"metricsTokenKey": "T"}, "metricsTokenKey needs envFromSecret"),
    "max pods below min": (
        {"replicas": {"min": 2}, "limits": {"maxPods": 1}},
        "limits.maxPods must not be below",
    ),
    "more parallel updates than pods": (
        {"replicas": {"min": 2}, "rollout": {"maxParallel": 3}},
        "rollout.maxParallel must not be above replicas.max",
    ),
    "canary latency ratio not above 1": (
        {"rollout": {"canary": {"maxLatencyRatio": 1}}},
        "less than or equal to the minimum",
    ),
}


@pytest.mark.parametrize("case", list(SCHEMA_REJECTS), ids=list(SCHEMA_REJECTS))
def test_schema_rejects_each_invalid_case_it_can_express(case: str) -> None:
    spec, expected = SCHEMA_REJECTS[case]
    problems = admit(spec)
    assert any(expected in p for p in problems), problems


def _nodes(schema: dict[str, Any], path: str = "spec") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, schema)]
    for key, sub in schema.get("properties", {}).items():
        found += _nodes(sub, f"{path}.{key}")
    if "items" in schema:
        found += _nodes(schema["items"], f"{path}[]")
    return found


def test_every_schema_node_is_structural_for_the_api_server() -> None:
    """The pass over pydantic's JSON schema leaves nothing a structural schema forbids."""
    forbidden = {"$ref", "$defs", "anyOf", "oneOf", "allOf", "additionalProperties", "title"}
    for path, node in _nodes(spec_schema()):
        assert "type" in node, path
        assert not forbidden & set(node), (path, forbidden & set(node))
        assert node.get("exclusiveMinimum", True) is True, path
        if path != "spec" and node["type"] == "object":
            assert node["default"] == {}, path
    target = spec_schema()["properties"]["autoscaling"]["properties"]["target"]
    assert (target["minimum"], target["exclusiveMinimum"]) == (0, True)
    # No field is nullable: the API server prunes a null like an absent field, as rpp
    # validate does (rpp.model.spec_load.without_nulls).
    assert not [path for path, node in _nodes(spec_schema()) if "nullable" in node]


def test_pools_are_listed_by_kubectl_get_runpod_but_not_by_get_all() -> None:
    names = build_crd()["spec"]["names"]
    assert "runpod" in names["categories"]
    assert "all" not in names["categories"]


def test_the_status_schema_is_structural_documented_and_defaults_only_its_generation() -> None:
    """No preserve-unknown-fields: every field has a type, and the API server fills in no
    default the controller did not write (it reads back exactly what it wrote), but the
    status's own, observedGeneration 0, which makes a pool no controller has written yet
    InProgress to kstatus."""
    status = status_schema()
    assert "x-kubernetes-preserve-unknown-fields" not in status
    assert status["default"] == {"observedGeneration": 0}
    forbidden = {"$ref", "$defs", "anyOf", "oneOf", "allOf", "title", "default"}
    for path, node in _nodes(status, "status"):
        assert "type" in node, path
        extra = forbidden & set(node) - ({"default"} if path == "status" else set())
        assert not extra, (path, extra)
        assert not ("properties" in node and "additionalProperties" in node), path
    members = status["properties"]["members"]["items"]["properties"]
    assert members["phase"]["enum"] == [p.value for p in Phase]
    assert members["since"]["format"] == "date-time"
    assert status["properties"]["datacenterReplacements"]["additionalProperties"]["type"] == (
        "array"
    )


def test_a_status_written_by_the_controller_validates_and_a_wrong_one_does_not() -> None:
    when = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
    member = MemberRecord(pod_id="p1", name="rpp-inference-a", phase=Phase.READY, since=when)
    status = (
        PoolStatus(mode="Manage", desired=1, ready=1, members=(member,))
        .with_condition(
            type="Ready", status="True", reason="PodsReady", message="1 of 1", now=when
        )
        .with_datacenter_replacement("EU-RO-1", when)
    )
    written = status.stored()

    assert status_problems(written) == []
    assert status_problems({**written, "ready": "one"})
    assert status_problems({**written, "members": [{**written["members"][0], "phase": "Odd"}]})
    assert status_problems({**written, "members": [{**written["members"][0], "since": "soon"}]})


@pytest.mark.parametrize("version", ["1.25.0", "1.37.0"])
def test_the_crd_with_its_status_schema_is_a_valid_kubernetes_object(version: str) -> None:
    kubernetes_validate.validate(build_crd(), version, strict=True)
