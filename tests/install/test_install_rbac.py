"""The controller's RBAC grants what the Kubernetes adapter calls, and nothing beyond.

Two directions. Nothing beyond: the Role's (verb, group, resource) grants equal
`REQUIRED_PERMISSIONS`, the adapter's own list of every call it can make. Enough: the
adapter, driven through every call with the plain install's names (pool inference, its slots
ConfigMap and env Secret, the leader Lease), is authorised call by call by a small evaluator
of the Role's rules, resourceNames included. tests/adapters/kube/test_kube_real.py shows the
in-memory adapter records exactly the calls the real one sends.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterable
from typing import Any

import pytest

from rpp.adapters.clock import ManualClock
from rpp.adapters.kube.api import DEFAULT_CRD_GROUP, REQUIRED_PERMISSIONS, KubeSettings, Permission
from rpp.sim.kube_memory import Call, MemoryKubeApi
from tests.fixtures_install import (
    ROOT,
    example,
    find,
    installed,
    objects,
    render,
    two_pools,
)

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
LEASE = "runpod-pool-controller"
GROUPS = {"runpodpools": DEFAULT_CRD_GROUP, "leases": "coordination.k8s.io"}


def grants(rules: Iterable[dict[str, Any]]) -> frozenset[Permission]:
    return frozenset(
        Permission(verb, group, resource)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    )


def allows(rules: Iterable[dict[str, Any]], call: Call) -> bool:
    """RBAC's rule matching for one namespaced request (no wildcards: the Role has none)."""
    base = call.resource.split("/")[0]
    group = GROUPS.get(base, "")
    return any(
        group in rule["apiGroups"]
        and call.resource in rule["resources"]
        and call.verb in rule["verbs"]
        and ("resourceNames" not in rule or call.name in rule["resourceNames"])
        for rule in rules
    )


def role_sources() -> dict[str, list[dict[str, Any]]]:
    return {
        "plain": example("deploy/rbac.yaml"),
        "chart default": installed(objects(render())),
        "chart two pools": installed(objects(render(two_pools()))),
    }


@pytest.mark.parametrize("source", list(role_sources()))
def test_role_grants_exactly_the_calls_the_adapter_makes(source: str) -> None:
    role = find(role_sources()[source], "Role")
    assert grants(role["rules"]) <= REQUIRED_PERMISSIONS, "the Role grants more than is called"
    if source != "chart default":
        assert grants(role["rules"]) == REQUIRED_PERMISSIONS


async def drive_every_call(api: MemoryKubeApi) -> None:
    """Each adapter call once, with the names of the plain install."""
    await api.list_pools()
    pool = await api.get_pool("inference")
    version = pool["metadata"]["resourceVersion"]
    written = await api.replace_pool_status(
        "inference", status={"ready": 0}, resource_version=version
    )
    await api.set_pool_finalizers(
        "inference", finalizers=["f"], resource_version=written["metadata"]["resourceVersion"]
    )
    await api.annotate_pool("inference", annotations={"example.com/note": "kept"})
    assert await api.read_config_map("inference-nginx-slots") is None
    await api.create_config_map("inference-nginx-slots", data={}, labels={})
    slots = await api.read_config_map("inference-nginx-slots")
    assert slots is not None
    await api.replace_config_map(slots, data={"slots.json": "{}\n"})
    await api.read_secret("inference-env")
    for _ in range(2):  # create, then patch the repeat's count
        await api.emit_event(pool, type_="Warning", reason="NotActing", message="m", now=NOW)
    assert await api.get_lease(LEASE) is None
    lease = await api.create_lease(LEASE, spec={"holderIdentity": "a"})
    await api.replace_lease(
        LEASE, spec={"holderIdentity": "a"}, resource_version=lease["metadata"]["resourceVersion"]
    )
    stream = api.watch_pools()
    await anext(stream)  # from the watch's list
    watching = asyncio.create_task(anext(stream))  # then the watch itself
    await asyncio.sleep(0)
    watching.cancel()
    await asyncio.gather(watching, return_exceptions=True)
    await stream.aclose()


async def adapter_calls() -> list[Call]:
    api = MemoryKubeApi(KubeSettings(namespace="runpod"), clock=ManualClock(NOW))
    api.apply_pool(example("examples/pool.yaml")[0])
    api.put_secret("inference-env", {"METRICS_TOKEN": "t"})
    await drive_every_call(api)
    # The real adapter also reads an Event when a create after a restart finds it exists
    # (its dedup cache was lost); the memory cluster keeps counts and never needs to.
    return [*api.calls, Call("get", "events", None)]


@pytest.mark.parametrize("source", ["plain", "chart two pools"])
async def test_role_authorises_every_call_with_the_installs_names(source: str) -> None:
    role = find(role_sources()[source], "Role")
    calls = await adapter_calls()
    covered = {
        Permission(c.verb, GROUPS.get(c.resource.split("/")[0], ""), c.resource) for c in calls
    }
    assert covered == REQUIRED_PERMISSIONS, "drive_every_call misses a call"
    refused = [call for call in calls if not allows(role["rules"], call)]
    assert refused == []


async def test_the_evaluator_refuses_other_names() -> None:
    """Guards the guard: resourceNames really restrict."""
    rules = find(example("deploy/rbac.yaml"), "Role")["rules"]
    assert not allows(rules, Call("get", "secrets", "runpod-pool-controller"))
    assert not allows(rules, Call("get", "configmaps", "inference-nginx-config"))
    assert not allows(rules, Call("update", "leases", "someone-elses-lease"))
    assert not allows(rules, Call("delete", "runpodpools", "inference"))
    assert allows(rules, Call("get", "secrets", "inference-env"))


@pytest.mark.parametrize("source", list(role_sources()))
def test_secrets_and_configmaps_are_only_read_by_name(source: str) -> None:
    rules = find(role_sources()[source], "Role")["rules"]
    for rule in rules:
        if set(rule["resources"]) & {"secrets", "configmaps", "leases"} and rule["verbs"] != [
            "create"
        ]:
            # Kubernetes cannot restrict create by name; every other verb is by name, and an
            # empty resourceNames would mean every name.
            assert rule.get("resourceNames"), rule
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
    assert not any("secrets" in r["resources"] and "create" in r["verbs"] for r in rules)


def test_chart_without_pools_names_no_configmap_or_secret() -> None:
    rules = find(objects(render()), "Role")["rules"]
    assert not any("secrets" in r["resources"] for r in rules)
    reads = [r for r in rules if "configmaps" in r["resources"] and "get" in r["verbs"]]
    assert reads == []


def test_nothing_is_cluster_wide_unless_rbac_mode_cluster_is_chosen() -> None:
    """rbac.mode cluster (tests/install/test_install_rbac_modes.py) is the only way to a
    ClusterRole; the plain manifests and the chart's default never make one."""
    texts = [p.read_text() for p in (ROOT / "deploy").glob("*.yaml")]
    for text in texts:
        assert "kind: ClusterRole" not in text
        assert "kind: ClusterRoleBinding" not in text
    for values in ({}, two_pools(), {"rbac": {"mode": "namespace"}}):
        kinds = {obj["kind"] for obj in objects(render(values))}
        assert not kinds & {"ClusterRole", "ClusterRoleBinding"}
    for obj in objects(render(two_pools())) + example("deploy/rbac.yaml"):
        if obj["kind"] in ("Role", "RoleBinding", "ServiceAccount"):
            assert obj["metadata"]["namespace"] == "runpod"
