"""The spec model and its validation: defaults, derived defaults, modes, every rule."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rpp.model.spec import Mode
from rpp.model.spec_load import load_pool, load_spec

EXAMPLE = Path(__file__).parents[2] / "examples" / "pool.yaml"


def example() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return loaded


def with_spec(**changes: Any) -> dict[str, Any]:
    obj = example()
    spec = obj["spec"]
    for dotted, value in changes.items():
        target = spec
        *parents, leaf = dotted.split("__")
        for key in parents:
            target = target.setdefault(key, {})
        if value is _DELETE:
            target.pop(leaf, None)
        else:
            target[leaf] = value
    return obj


_DELETE = object()


def problems_of(obj: dict[str, Any]) -> list[str]:
    pool, problems = load_pool(obj)
    assert (pool is None) == bool(problems)
    return [str(p) for p in problems]


def test_example_pool_is_valid_and_starts_in_dry_run() -> None:
    pool, problems = load_pool(example())
    assert problems == []
    assert pool is not None
    assert pool.name == "inference"
    assert pool.spec.mode is Mode.DRY_RUN
    assert pool.spec.replicas.min == 2
    assert pool.spec.health.replace_when.slow_scrape.threshold == 2.0


def test_empty_spec_gets_every_seed_default() -> None:
    spec, problems = load_spec("web", {})
    assert problems == []
    assert spec is not None
    assert spec.dry_run is True
    assert spec.paused is False
    assert spec.gpu_types == ("NVIDIA GeForce RTX 4090",)
    assert spec.cloud == "SECURE"
    assert spec.replicas.min == 1
    assert spec.autoscaling.enabled is False
    assert spec.autoscaling.target == 1.0
    assert spec.autoscaling.scale_up_stabilization == 120
    assert spec.autoscaling.scale_down_stabilization == 1800
    assert spec.max_per_datacenter == 1
    assert spec.limits.max_hourly_cost_usd == 0
    assert spec.limits.max_creates_per_hour == 3
    assert spec.limits.estimated_pod_cost_usd == 1.0
    assert spec.drain.period == 150
    assert spec.nginx.base_port == 8081
    assert spec.nginx.read_timeout == 120
    assert spec.nginx.slot_ports == 4
    assert spec.port == 80
    assert (spec.probe.health_path, spec.probe.metrics_path) == ("/health", "/metrics")
    assert spec.probe.token_param == "token"
    assert spec.probe.require_metric is None
    assert spec.health.warmup_timeout == 900
    rules = spec.health.replace_when
    assert rules.unreachable.duration == 120
    assert (rules.slow_scrape.threshold, rules.slow_scrape.duration) == (2, 600)
    assert (rules.relative_latency.threshold, rules.relative_latency.duration) == (4, 600)
    assert (rules.error_rate.threshold, rules.error_rate.duration) == (0.05, 300)
    assert rules.host_notice is False
    canary = spec.rollout.canary
    assert (canary.enabled, canary.bake, canary.min_requests) == (True, 600, 100)
    assert (canary.max_error_ratio_increase, canary.max_latency_ratio) == (0.02, 1.5)
    assert spec.rollout.max_parallel == 1
    assert spec.prometheus.request_rate_query is None


def test_derived_defaults_follow_the_pool_name_and_min() -> None:
    spec, _ = load_spec("web", {"replicas": {"min": 3}, "nginx": {"slotPorts": 4}})
    assert spec is not None
    assert spec.name_prefix == "rpp-web-"
    assert spec.replicas.max == 3
    assert spec.limits.max_pods == 6
    assert spec.nginx.config_map == "web-nginx-config"
    assert spec.nginx.slots_config_map == "web-nginx-slots"
    assert spec.nginx.service == "web"
    assert spec.prometheus.job == "web-pods"


@pytest.mark.parametrize(
    ("spec", "mode"),
    [
        ({}, Mode.OBSERVE),
        ({"templateId": "t1"}, Mode.DRY_RUN),
        (
            {"templateId": "t1", "dryRun": False, "datacenters": {"allow": ["EU-RO-1"]}},
            Mode.MANAGE,
        ),
        ({"templateId": "t1", "dryRun": False, "paused": True}, Mode.OBSERVE),
        ({"templateId": "t1", "paused": True}, Mode.OBSERVE),
    ],
)
def test_mode_is_derived_from_paused_template_and_dry_run(
    spec: dict[str, Any], mode: Mode
) -> None:
    resolved, problems = load_spec("p", spec)
    assert problems == []
    assert resolved is not None
    assert resolved.mode is mode


def test_spec_is_immutable() -> None:
    spec, _ = load_spec("p", {})
    assert spec is not None
    with pytest.raises(ValidationError, match="frozen"):
        spec.paused = True


INVALID_CASES: dict[str, tuple[dict[str, Any], str]] = {
    "unknown field with closest name": (
        {"replica": {"min": 1}},
        'spec.replica: unknown field; did you mean "replicas"?',
    ),
    "unknown nested field": (
        {"limits__maxPod": 3},
        'spec.limits.maxPod: unknown field; did you mean "maxPods"?',
    ),
    "wrong type": ({"replicas__min": "two"}, "spec.replicas.min: expected a whole number"),
    "bool is not a number": ({"port": True}, "spec.port: expected a whole number"),
    "wrong type for bool": ({"dryRun": "yes please"}, "spec.dryRun: expected true or false"),
    "bad duration": ({"drain__period": "2 minutes"}, "spec.drain.period: '2 minutes' is not"),
    "number as duration": ({"drain__period": 150}, "spec.drain.period: expected a duration"),
    "min above max": (
        {"replicas": {"min": 3, "max": 2}},
        "spec.replicas: min (3) is greater than max (2)",
    ),
    "too few slot ports": (
        {"nginx__slotPorts": 3},
        "spec.nginx.slotPorts: 3 slot ports cannot hold replicas.max (3)",
    ),
    "cloud": ({"cloud": "PRIVATE"}, "spec.cloud: 'PRIVATE' is not valid; use SECURE or COMMUNITY"),
    "datacenter allowed and denied": (
        {"datacenters__deny": ["EU-SE-1"]},
        "spec.datacenters.deny: 'EU-SE-1' is both allowed and denied",
    ),
    "manage without allow": (
        {"dryRun": False, "datacenters__allow": []},
        "spec.datacenters.allow: required to create pods",
    ),
    "negative max pods": ({"limits__maxPods": -1}, "spec.limits.maxPods: -1 is negative"),
    "negative cost cap": (
        {"limits__maxHourlyCostUsd": -0.5},
        "spec.limits.maxHourlyCostUsd: -0.5 is negative",
    ),
    "negative creates per hour": (
        {"limits__maxCreatesPerHour": -2},
        "spec.limits.maxCreatesPerHour: -2 is negative",
    ),
    "autoscaling without query": (
        {"autoscaling__enabled": True, "autoscaling__query": _DELETE},
        "spec.autoscaling.query: required when autoscaling is enabled",
    ),
    "autoscaling target zero": (
        {"autoscaling__target": 0},
        "spec.autoscaling.target: 0.0 must be greater than 0",
    ),
    "autoscaling target negative": (
        {"autoscaling__target": -1},
        "spec.autoscaling.target: -1.0 must be greater than 0",
    ),
    "empty gpu types": ({"gpuTypes": []}, "spec.gpuTypes: is empty; list at least one"),
    "adopt entry not a pod id": (
        {"adopt": ["Not A Pod"]},
        "spec.adopt[0]: 'Not A Pod' is not a RunPod pod id",
    ),
    "token key without secret": (
        {"envFromSecret": _DELETE},
        "spec.metricsTokenKey: needs envFromSecret",
    ),
    "probe timeout under slow scrape threshold": (
        {"probe__timeout": "1s"},
        "spec.probe.timeout: 1s must be longer than health.replaceWhen.slowScrape.threshold",
    ),
    "max pods below min": ({"limits__maxPods": 1}, "spec.limits.maxPods: 1 is below replicas.min"),
    "no parallel update": (
        {"rollout__maxParallel": 0},
        "spec.rollout.maxParallel: 0 is below 1; use 1 or more",
    ),
    "more parallel updates than pods": (
        {"rollout__maxParallel": 4},
        "spec.rollout.maxParallel: 4 is above replicas.max (3): no more than 3 pods",
    ),
    "canary latency ratio not above 1": (
        {"rollout__canary__maxLatencyRatio": 1},
        "spec.rollout.canary.maxLatencyRatio: 1.0 must be greater than 1",
    ),
    "canary error increase above 1": (
        {"rollout__canary__maxErrorRatioIncrease": 2},
        "spec.rollout.canary.maxErrorRatioIncrease: 2.0 is above the maximum 1",
    ),
    "canary bake of zero": (
        {"rollout__canary__bake": "0s"},
        "spec.rollout.canary.bake: '0s' is shorter than 1ms; use 1ms or more",
    ),
    "canary negative requests": (
        {"rollout__canary__minRequests": -1},
        "spec.rollout.canary.minRequests: -1 is negative",
    ),
}


@pytest.mark.parametrize("case", list(INVALID_CASES), ids=list(INVALID_CASES))
def test_each_invalid_case_names_its_field_and_says_what_to_do(case: str) -> None:
    changes, expected = INVALID_CASES[case]
    problems = problems_of(with_spec(**changes))
    assert any(p.startswith(expected) for p in problems), problems


def test_every_problem_is_reported_at_once() -> None:
    changes: dict[str, Any] = {}
    for change, _ in INVALID_CASES.values():
        changes.update(change)
    changes.pop("replica", None)
    problems = problems_of(with_spec(**changes, replica={"min": 1}))
    paths = {p.split(":")[0] for p in problems}
    assert {
        "spec.replica",
        "spec.limits.maxPod",
        "spec.port",
        "spec.drain.period",
        "spec.datacenters.allow",
        "spec.cloud",
        "spec.gpuTypes",
        "spec.adopt[0]",
        "spec.autoscaling.target",
        "spec.limits.maxHourlyCostUsd",
        "spec.metricsTokenKey",
        "spec.probe.timeout",
    } <= paths


def test_object_level_problems_name_api_version_kind_and_name() -> None:
    obj = example()
    obj["apiVersion"] = "v1"
    obj["kind"] = "Pool"
    obj["metadata"]["name"] = "Bad_Name"
    obj["sepc"] = {}
    problems = problems_of(obj)
    assert any(
        p.startswith("apiVersion: expected runpodpool.ownego.com/v1alpha1") for p in problems
    )
    assert any(p.startswith("kind: expected RunPodPool") for p in problems)
    assert any(
        p.startswith("metadata.name: 'Bad_Name' is not a valid pool name") for p in problems
    )
    assert 'sepc: unknown field; did you mean "spec"?' in problems


def test_a_mapping_where_a_list_belongs_is_a_type_error_not_a_crash() -> None:
    problems = problems_of(with_spec(gpuTypes={"a": 1}, replicas=[1, 2]))
    assert any(p.startswith("spec.gpuTypes: expected a list of strings") for p in problems)
    assert any(p.startswith("spec.replicas: expected a mapping of fields") for p in problems)


def test_validation_does_not_mutate_its_input() -> None:
    obj = with_spec(replicas={"min": 3, "max": 1})
    before = copy.deepcopy(obj)
    problems_of(obj)
    assert obj == before


def test_lists_and_names_beyond_the_crd_bounds_are_refused_as_the_api_server_would() -> None:
    problems = problems_of(
        with_spec(datacenters__allow=[f"DC-{i}" for i in range(65)], gpuTypes=["G" * 129])
    )
    assert "spec.datacenters.allow: lists 65 entries; keep it to 64" in problems
    assert any(p.startswith("spec.gpuTypes[0]: 'GGG") for p in problems), problems
    assert any(p.endswith("is longer than 128 characters") for p in problems), problems


def _leaf_paths(value: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaf_paths(v, (*prefix, k))]
    return [prefix]


LEAVES = _leaf_paths(example()["spec"])
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=4)), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(changes=st.dictionaries(st.sampled_from(LEAVES), JUNK, min_size=1, max_size=4))
def test_any_junk_in_any_field_gets_our_sentences_never_pydantic_wording(
    changes: dict[tuple[str, ...], Any],
) -> None:
    obj = with_spec(**{"__".join(path): value for path, value in changes.items()})
    pool, problems = load_pool(obj)
    assert (pool is None) == bool(problems)
    for problem in problems:
        assert problem.path.startswith("spec."), problem
        assert "Input should" not in problem.message, problem
        assert "should have" not in problem.message, problem
        assert "Extra inputs" not in problem.message, problem


def test_an_integer_written_as_an_integral_float_is_read_as_the_api_server_stores_it() -> None:
    """`min: 2.0` reaches the API server as 2 (kubectl writes the float as JSON `2`) and
    is stored as 2; the controller and `rpp validate` read it as 2 too, derived defaults
    included."""
    spec, problems = load_spec("p", {"replicas": {"min": 2.0}, "port": 8080.0})
    assert problems == []
    assert spec is not None
    assert (spec.replicas.min, spec.replicas.max, spec.limits.max_pods) == (2, 2, 4)
    assert type(spec.replicas.min) is int
    assert type(spec.port) is int
    pool, problems = load_pool(with_spec(rollout__canary__minRequests=50.0, nginx__slotPorts=8.0))
    assert problems == []
    assert pool is not None
    assert (pool.spec.rollout.canary.min_requests, pool.spec.nginx.slot_ports) == (50, 8)


@pytest.mark.parametrize(
    ("value", "shown"), [(2.5, "2.5"), (1e300, "1e+300"), (2.0**60, "1.152921504606847e+18")]
)
def test_an_integer_field_refuses_a_float_that_is_no_whole_number_it_can_hold(
    value: float, shown: str
) -> None:
    problems = problems_of(with_spec(replicas__min=value))
    assert f"spec.replicas.min: expected a whole number, got {shown}" in problems
