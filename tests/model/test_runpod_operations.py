"""The RunPod operations the controller names are the ones RunPod publishes.

rpp/model/runpod_operations.py is the one list of RunPod calls the client, the fake
cloud, the faults and the checker use; here each REST member is checked against RunPod's
own OpenAPI document (vendor/runpod/openapi-v2.json), and the fake cloud's route for it
against that operation's method and path, so a misspelt or invented name cannot stay.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rpp.model.runpod_operations import CREATE_CALLS, WRITES, RunPodOperation
from rpp.sim.cloud_api import operation_of
from rpp.sim.faults import FaultError, check_operation

SPEC = json.loads((Path(__file__).parents[2] / "vendor/runpod/openapi-v2.json").read_text())
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def published() -> dict[str, tuple[str, str]]:
    """operationId -> (METHOD, path) for every operation of the vendored document."""
    found: dict[str, tuple[str, str]] = {}
    for path, item in SPEC["paths"].items():
        for method in HTTP_METHODS:
            if method in item:
                found[item[method]["operationId"]] = (method.upper(), path)
    return found


REST = [op for op in RunPodOperation if op.rest]


@pytest.mark.parametrize("operation", REST, ids=str)
def test_every_rest_operation_is_an_operation_id_runpod_publishes(
    operation: RunPodOperation,
) -> None:
    assert operation.value in published()


@pytest.mark.parametrize("operation", REST, ids=str)
def test_the_fake_cloud_serves_each_operation_on_runpods_method_and_path(
    operation: RunPodOperation,
) -> None:
    method, path = published()[operation.value]
    assert operation_of(method, re.sub(r"\{[^}]+\}", "pod-1", path)) is operation


def test_the_graphql_query_is_the_only_operation_outside_the_rest_document() -> None:
    outside = [op for op in RunPodOperation if op.value not in published()]
    assert outside == [RunPodOperation.HOST_NOTICES]
    assert not RunPodOperation.HOST_NOTICES.rest
    assert operation_of("POST", "/graphql") is RunPodOperation.HOST_NOTICES


def test_writes_are_the_operations_that_change_a_pod() -> None:
    methods = {op: published()[op.value][0] for op in REST}
    assert {op for op, method in methods.items() if method != "GET"} == WRITES
    assert all(op.writes for op in WRITES)
    assert not RunPodOperation.LIST_PODS.writes


def test_a_create_calls_only_reads_of_the_catalog_and_create_pod() -> None:
    assert {published()[op.value] for op in CREATE_CALLS} == {
        ("POST", "/v2/pods"),
        ("GET", "/v2/catalog/gpus"),
        ("GET", "/v2/catalog/datacenters"),
    }


def test_members_are_their_operation_ids_so_scenarios_and_metrics_read_as_before() -> None:
    assert {"createPod": "queued"}[RunPodOperation.CREATE_POD] == "queued"
    assert f"{RunPodOperation.LIST_PODS}" == "listPods"
    assert json.dumps([RunPodOperation.DELETE_POD]) == '["deletePod"]'
    assert check_operation("createPod") == RunPodOperation.CREATE_POD


def test_a_scenario_naming_an_operation_runpod_does_not_have_is_refused() -> None:
    with pytest.raises(FaultError, match=r"unknown operation 'createPods'; use one of listPods"):
        check_operation("createPods")
