"""Each rbac.mode of the chart grants every call the controller makes where it serves pools,
and refuses what the mode does not cover.

The evaluator of tests/install/test_install_rbac.py, widened to a cluster: a request in a
namespace is allowed by a Role there bound to the controller's ServiceAccount, or by a
ClusterRole bound to it by a ClusterRoleBinding. The calls are the in-memory adapter's,
driven through every call (`adapter_calls`), made in each served namespace; the leader
Lease is only ever the release namespace's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from rpp.adapters.kube.api import REQUIRED_PERMISSIONS
from rpp.sim.kube_memory import Call
from tests.fixtures_install import NAMESPACE, installed, objects, render, two_pools
from tests.install.test_install_rbac import adapter_calls, allows, grants

SERVICE_ACCOUNT = "runpod-pool-controller"
MODES: dict[str, dict[str, Any]] = {
    "named": two_pools(),  # the Role names the pools' objects: pool inference among them
    "namespace": {"rbac": {"mode": "namespace"}, "watchNamespaces": ["team-a", "team-b"]},
    "cluster": {"rbac": {"mode": "cluster"}, "watchNamespaces": ["*"]},
}
SERVED = {"named": [NAMESPACE], "namespace": ["team-a", "team-b"], "cluster": ["team-a", "x"]}


def bound(binding: Mapping[str, Any]) -> bool:
    return any(
        s["kind"] == "ServiceAccount"
        and s["name"] == SERVICE_ACCOUNT
        and s["namespace"] == NAMESPACE
        for s in binding["subjects"]
    )


def rules_for(objs: Iterable[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """Every rule that applies to the ServiceAccount's requests in `namespace`."""
    objs = list(objs)
    by_key = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objs}
    rules: list[dict[str, Any]] = []
    for binding in objs:
        kind, meta = binding["kind"], binding["metadata"]
        if kind not in ("RoleBinding", "ClusterRoleBinding") or not bound(binding):
            continue
        ref = binding["roleRef"]
        if kind == "RoleBinding" and meta["namespace"] == namespace:
            role_namespace = None if ref["kind"] == "ClusterRole" else namespace
            rules += by_key[(ref["kind"], role_namespace, ref["name"])]["rules"]
        elif kind == "ClusterRoleBinding":
            rules += by_key[("ClusterRole", None, ref["name"])]["rules"]
    return rules


def authorised(objs: list[dict[str, Any]], namespace: str, call: Call) -> bool:
    return allows(rules_for(objs, namespace), call)


def rbac(mode: str) -> list[dict[str, Any]]:
    kinds = ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
    # The uninstall hook's own Role is for rpp delete-pools, not for the controller.
    return [o for o in installed(objects(render(MODES[mode]))) if o["kind"] in kinds]


def made_in(call: Call, served: str) -> str:
    """The Lease is the release namespace's alone; every other call is made where pools are."""
    return NAMESPACE if call.resource == "leases" else served


@pytest.mark.parametrize("mode", list(MODES))
async def test_every_call_in_every_served_namespace_is_authorised(mode: str) -> None:
    objs = rbac(mode)
    calls = await adapter_calls()
    refused = [
        (made_in(call, served), call)
        for served in SERVED[mode]
        for call in calls
        if not authorised(objs, made_in(call, served), call)
    ]
    assert refused == []


@pytest.mark.parametrize("mode", list(MODES))
def test_no_mode_grants_more_than_the_adapter_calls(mode: str) -> None:
    every_rule = [rule for o in rbac(mode) for rule in o.get("rules", [])]
    assert grants(every_rule) == REQUIRED_PERMISSIONS


def test_named_mode_is_one_role_in_the_release_namespace_that_refuses_other_namespaces() -> None:
    objs = rbac("named")
    assert {(o["kind"], o["metadata"]["namespace"]) for o in objs} == {
        ("Role", NAMESPACE),
        ("RoleBinding", NAMESPACE),
    }
    assert not authorised(objs, "team-a", Call("list", "runpodpools", None))
    assert authorised(objs, NAMESPACE, Call("get", "secrets", "inference-env"))
    assert not authorised(objs, NAMESPACE, Call("get", "secrets", "kubectl-pools-env"))


def test_namespace_mode_grants_every_configmap_and_secret_of_a_watched_namespace_only() -> None:
    objs = rbac("namespace")
    assert authorised(objs, "team-a", Call("get", "secrets", "any-pools-env"))
    assert authorised(objs, "team-b", Call("update", "configmaps", "any-slots"))
    assert not authorised(objs, "team-c", Call("get", "secrets", "any-pools-env"))
    assert not authorised(objs, "team-c", Call("list", "runpodpools", None))
    assert not authorised(objs, "team-a", Call("get", "leases", "runpod-pool-controller"))
    assert not authorised(objs, "team-a", Call("create", "secrets", None))
    assert not any(o["kind"].startswith("Cluster") for o in objs)


def test_cluster_mode_reaches_every_namespace_but_keeps_the_lease_at_home() -> None:
    objs = rbac("cluster")
    assert authorised(objs, "anywhere", Call("list", "runpodpools", None))
    assert authorised(objs, "anywhere", Call("get", "secrets", "any-pools-env"))
    assert not authorised(objs, "anywhere", Call("update", "leases", "runpod-pool-controller"))
    assert not authorised(objs, "anywhere", Call("delete", "runpodpools", "inference"))
    assert not authorised(objs, "anywhere", Call("update", "secrets", "any-pools-env"))


@pytest.mark.parametrize(
    ("mode", "variable"),
    [
        ("named", {"name": "NAMESPACE"}),
        ("namespace", {"name": "NAMESPACES", "value": "team-a,team-b"}),
        ("cluster", {"name": "NAMESPACES", "value": "*"}),
    ],
)
def test_the_controller_is_told_the_namespaces_its_rbac_covers(
    mode: str, variable: dict[str, str]
) -> None:
    (deployment,) = [o for o in objects(render(MODES[mode])) if o["kind"] == "Deployment"]
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    told = [e for e in env if e["name"] in ("NAMESPACE", "NAMESPACES")]
    assert len(told) == 1
    assert {k: v for k, v in told[0].items() if k != "valueFrom"} == variable


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"watchNamespaces": ["team-a"]}, "rbac.mode named grants objects in the release"),
        (
            {"rbac": {"mode": "namespace"}, "watchNamespaces": ["*"]},
            "needs rbac.mode: cluster",
        ),
    ],
)
def test_a_mode_that_cannot_cover_the_watched_namespaces_fails_the_render(
    values: dict[str, Any], said: str
) -> None:
    with pytest.raises(Exception, match=said):
        render(values)
