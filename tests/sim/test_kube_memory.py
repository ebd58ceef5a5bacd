"""The in-memory cluster keeps the API server's guarantees the controller relies on."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from rpp.adapters.clock import ManualClock
from rpp.adapters.kube.api import (
    REQUIRED_PERMISSIONS,
    AlreadyExists,
    Conflict,
    Forbidden,
    KubeSettings,
    NotFound,
    Permission,
    SecretData,
    required_permissions,
)
from rpp.sim import managed_fields
from rpp.sim.kube_memory import Call, MemoryKubeApi, merge_patch
from rpp.sim.virtual_time import VirtualClock, run_virtual

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def manifest(name: str = "inference", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"templateId": "tpl", **spec}}


@pytest.fixture
def kube() -> MemoryKubeApi:
    return MemoryKubeApi(KubeSettings(namespace="runpod"), clock=ManualClock(NOW))


async def test_every_write_bumps_resource_version_and_stale_writes_conflict(
    kube: MemoryKubeApi,
) -> None:
    created = kube.apply_pool(manifest())
    v1 = created["metadata"]["resourceVersion"]
    updated = await kube.replace_pool_status("inference", status={"ready": 1}, resource_version=v1)
    v2 = updated["metadata"]["resourceVersion"]

    with pytest.raises(Conflict) as caught:
        await kube.replace_pool_status("inference", status={"ready": 9}, resource_version=v1)

    assert int(v2) > int(v1)
    assert kube.pool("inference")["status"] == {"ready": 1}
    assert str(caught.value).startswith(
        "conflict: cannot update runpodpools/status 'inference' in namespace runpod"
    )


async def test_generation_moves_only_when_the_spec_changes(kube: MemoryKubeApi) -> None:
    kube.apply_pool(manifest(image="v1"))
    same = kube.apply_pool(manifest(image="v1"))
    relabelled = kube.apply_pool(
        {**manifest(image="v1"), "metadata": {"name": "inference", "labels": {"team": "ml"}}}
    )
    patched = kube.patch_pool_spec("inference", {"image": "v2"})
    version = patched["metadata"]["resourceVersion"]
    with_status = await kube.replace_pool_status("inference", status={}, resource_version=version)

    assert same["metadata"]["generation"] == 1
    assert same["metadata"]["resourceVersion"] == "1"  # a no-op apply is not a write
    assert relabelled["metadata"]["generation"] == 1
    assert relabelled["metadata"]["labels"] == {"team": "ml"}
    assert patched["metadata"]["generation"] == 2
    assert with_status["metadata"]["generation"] == 2


async def test_status_and_spec_are_written_separately(kube: MemoryKubeApi) -> None:
    version = kube.apply_pool(manifest(image="v1"))["metadata"]["resourceVersion"]
    await kube.replace_pool_status(
        "inference", status={"mode": "DryRun"}, resource_version=version
    )

    after_apply = kube.apply_pool(manifest(image="v2"))

    assert after_apply["status"] == {"mode": "DryRun"}
    assert after_apply["spec"]["image"] == "v2"


def test_merge_patch_merges_maps_deletes_nulls_and_replaces_lists() -> None:
    spec = {"replicas": {"min": 1, "max": 3}, "gpuTypes": ["A", "B"], "paused": True}
    patch = {"replicas": {"max": 5}, "gpuTypes": ["C"], "paused": None, "image": "v2"}

    assert merge_patch(spec, patch) == {
        "replicas": {"min": 1, "max": 5},
        "gpuTypes": ["C"],
        "image": "v2",
    }
    assert spec["replicas"] == {"min": 1, "max": 3}  # the input is not mutated


async def test_calls_are_recorded_in_rbac_terms_and_human_changes_are_not(
    kube: MemoryKubeApi,
) -> None:
    kube.apply_pool(manifest())
    kube.put_secret("env", {"K": "v"})

    await kube.list_pools()
    await kube.read_secret("env")
    await kube.read_config_map("slots")

    assert kube.calls == [
        Call("list", "runpodpools", None),
        Call("get", "secrets", "env"),
        Call("get", "configmaps", "slots"),
    ]


async def test_fail_next_raises_once_for_that_verb_and_resource_only(
    kube: MemoryKubeApi,
) -> None:
    version = kube.apply_pool(manifest())["metadata"]["resourceVersion"]
    denied = Forbidden("update", "runpodpools/status", "inference", namespace="runpod")
    kube.fail_next("update", "runpodpools/status", denied)

    await kube.get_pool("inference")  # another verb is unaffected
    with pytest.raises(Forbidden):
        await kube.replace_pool_status("inference", status={"a": 1}, resource_version=version)
    assert "status" not in kube.pool("inference")
    await kube.replace_pool_status("inference", status={"a": 1}, resource_version=version)

    assert kube.calls[-2:] == [Call("update", "runpodpools/status", "inference")] * 2


def test_forbidden_message_names_the_verb_resource_and_fix() -> None:
    error = Forbidden("update", "runpodpools/status", "inference", namespace="runpod")

    assert str(error) == (
        "forbidden: cannot update runpodpools/status 'inference' in namespace runpod: "
        "the controller's Role lacks this; apply deploy/rbac.yaml"
    )
    assert (error.verb, error.resource, error.status) == ("update", "runpodpools/status", 403)


async def test_missing_pool_raises_not_found_and_missing_objects_read_as_none(
    kube: MemoryKubeApi,
) -> None:
    with pytest.raises(NotFound) as caught:
        await kube.get_pool("ghost")

    assert "get runpodpools 'ghost'" in str(caught.value)
    assert await kube.read_config_map("slots") is None
    assert await kube.read_secret("env") is None
    assert await kube.get_lease("leader") is None


async def test_config_map_create_once_then_replace_over_the_version_read_keeping_labels(
    kube: MemoryKubeApi,
) -> None:
    created = await kube.create_config_map("slots", data={"a": "1"}, labels={"app": "rpp"})
    with pytest.raises(AlreadyExists):
        await kube.create_config_map("slots", data={}, labels={})
    replaced = await kube.replace_config_map(created, data={"a": "2"})

    with pytest.raises(Conflict):
        await kube.replace_config_map(created, data={"a": "3"})

    assert replaced.data == {"a": "2"}
    assert replaced.labels == {"app": "rpp"}
    assert kube.config_map("slots") == replaced


async def test_a_human_overwrite_of_the_config_map_makes_the_controllers_copy_stale(
    kube: MemoryKubeApi,
) -> None:
    read = kube.put_config_map("slots", {"a": "1"})
    kube.put_config_map("slots", {"a": "by hand"})

    with pytest.raises(Conflict):
        await kube.replace_config_map(read, data={"a": "2"})


async def test_secret_values_are_readable_but_never_in_its_repr(kube: MemoryKubeApi) -> None:
    kube.put_secret("env", {"METRICS_TOKEN": "tok-123"})

    secret = await kube.read_secret("env")

    assert isinstance(secret, SecretData)
    assert secret["METRICS_TOKEN"] == "tok-123"
    assert "tok-123" not in repr(secret)
    assert "tok-123" not in f"{secret}"
    assert "tok-123" not in repr(kube)


async def test_same_event_again_bumps_its_count_instead_of_adding_one(
    kube: MemoryKubeApi,
) -> None:
    pool = kube.apply_pool(manifest())
    later = NOW + dt.timedelta(minutes=5)

    await kube.emit_event(pool, type_="Warning", reason="HostNotice", message="maint", now=NOW)
    await kube.emit_event(pool, type_="Warning", reason="HostNotice", message="maint", now=later)
    await kube.emit_event(pool, type_="Warning", reason="HostNotice", message="other", now=later)

    first, second = kube.events
    assert (first["count"], first["firstTimestamp"], first["lastTimestamp"]) == (
        2,
        "2026-03-01T12:00:00Z",
        "2026-03-01T12:05:00Z",
    )
    assert second["count"] == 1
    assert [call.verb for call in kube.calls] == ["create", "patch", "create"]


async def test_lease_create_and_replace_guard_against_other_writers(kube: MemoryKubeApi) -> None:
    lease = await kube.create_lease("leader", spec={"holderIdentity": "a"})
    with pytest.raises(AlreadyExists):
        await kube.create_lease("leader", spec={"holderIdentity": "b"})
    version = lease["metadata"]["resourceVersion"]
    await kube.replace_lease(
        "leader", spec={"holderIdentity": "a", "x": 1}, resource_version=version
    )

    with pytest.raises(Conflict):
        await kube.replace_lease("leader", spec={"holderIdentity": "b"}, resource_version=version)

    current = await kube.get_lease("leader")
    assert current is not None
    assert current["spec"] == {"holderIdentity": "a", "x": 1}


async def test_watch_sends_existing_pools_then_every_change(kube: MemoryKubeApi) -> None:
    kube.apply_pool(manifest("a"))
    stream = kube.watch_pools()
    first = await anext(stream)

    kube.patch_pool_spec("a", {"paused": True})
    kube.apply_pool(manifest("b"))
    kube.delete_pool("a")
    rest = [await asyncio.wait_for(anext(stream), timeout=1) for _ in range(3)]
    await stream.aclose()

    assert (first.type, first.pool["metadata"]["name"]) == ("ADDED", "a")
    assert [(e.type, e.pool["metadata"]["name"]) for e in rest] == [
        ("MODIFIED", "a"),
        ("ADDED", "b"),
        ("DELETED", "a"),
    ]
    assert rest[0].pool["metadata"]["generation"] == 2
    kube.apply_pool(manifest("c"))  # a closed watch no longer receives anything
    assert kube.open_watches == 0


def test_required_permissions_follow_the_crd_group() -> None:
    custom = required_permissions("pools.example.com")

    assert Permission("update", "pools.example.com", "runpodpools/status") in custom
    assert Permission("update", "runpodpool.ownego.com", "runpodpools/status") in (
        REQUIRED_PERMISSIONS
    )
    assert Permission("get", "", "secrets") in REQUIRED_PERMISSIONS
    # Secrets are only ever read; the controller never needs to write or list them.
    assert {p.verb for p in REQUIRED_PERMISSIONS if p.resource == "secrets"} == {"get"}


async def test_a_watch_resuming_after_a_compaction_lists_again_and_reports_what_it_missed(
    kube: MemoryKubeApi,
) -> None:
    """The in-memory cluster's pool watch runs the real adapter's reflector: a stream cut
    while etcd compacts resumes with a list, and the pools that changed or went meanwhile
    come out as such, once."""
    kube.apply_pool(manifest("a"))
    kube.apply_pool(manifest("b"))
    stream = kube.watch_pools()
    listed = [await anext(stream), await anext(stream)]
    kube.patch_pool_spec("a", {"paused": True})
    streamed = await anext(stream)
    kube.end_watches()
    kube.patch_pool_spec("a", {"paused": False})
    kube.delete_pool("b")
    kube.compact()
    caught_up = [await anext(stream), await asyncio.wait_for(anext(stream), timeout=1)]
    await stream.aclose()

    assert [e.type for e in listed] == ["ADDED", "ADDED"]
    assert streamed.type == "MODIFIED"
    assert [(e.type, e.pool["metadata"]["name"]) for e in caught_up] == [
        ("MODIFIED", "a"),
        ("DELETED", "b"),
    ]
    assert caught_up[0].pool["spec"]["paused"] is False
    verbs = [c.verb for c in kube.calls if c.resource == "runpodpools"]
    assert verbs == ["list", "watch", "watch", "list"]  # the second watch was too old
    assert kube.open_watches == 0


async def test_a_bookmark_lets_a_watch_resume_past_a_compaction_without_a_list(
    kube: MemoryKubeApi,
) -> None:
    kube.apply_pool(manifest("a"))
    stream = kube.watch_pools()
    await anext(stream)
    following = asyncio.create_task(anext(stream))
    await asyncio.sleep(0)
    await kube.create_lease("elsewhere", spec={})  # the revision moves on
    kube.bookmark()
    kube.compact()
    kube.end_watches()
    kube.patch_pool_spec("a", {"paused": True})
    changed = await asyncio.wait_for(following, timeout=1)
    await stream.aclose()

    assert changed.type == "MODIFIED"
    verbs = [c.verb for c in kube.calls if c.resource == "runpodpools"]
    assert verbs == ["list", "watch", "watch"]


def test_calls_during_a_restart_wait_until_the_api_server_answers_again() -> None:
    async def main(clock: VirtualClock) -> list[float]:
        kube = MemoryKubeApi(KubeSettings(namespace="runpod"), clock=clock)
        loop = asyncio.get_running_loop()
        kube.restart(forbidden_s=3.0, busy_s=1.0)
        await asyncio.sleep(1.0)
        answered = []
        for _ in range(2):
            await kube.get_lease("leader")
            answered.append(loop.time())
        return answered

    assert run_virtual(main) == [4.0, 4.0]  # at the window's end, then at once


async def test_the_controllers_writes_are_recorded_under_its_field_manager(
    kube: MemoryKubeApi,
) -> None:
    version = kube.apply_pool(manifest())["metadata"]["resourceVersion"]
    await kube.replace_pool_status("inference", status={}, resource_version=version)
    await kube.create_config_map("slots", data={}, labels={})
    lease = await kube.create_lease("leader", spec={})
    await kube.emit_event(lease, type_="Normal", reason="Led", message="m", now=NOW)

    pool_fields = kube.pool("inference")["metadata"]["managedFields"]
    assert [(f["manager"], f.get("subresource")) for f in pool_fields] == [
        ("runpod-pool-controller", "status")
    ]
    assert managed_fields.managers(lease) == {"runpod-pool-controller"}
    assert managed_fields.managers(kube.events[0]) == {"runpod-pool-controller"}
