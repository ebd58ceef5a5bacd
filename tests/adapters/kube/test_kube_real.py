"""The real Kubernetes adapter against a Kubernetes API emulator over HTTP on 127.0.0.1.

kmock serves the API; `kmock_strict` adds the server guarantees the adapter relies on
(resourceVersion conflicts, PUT, 201, the status subresource). Every test goes through the
official client's real HTTP stack, so URLs, verbs, bodies and error decoding are exercised.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import email.utils
from pathlib import Path
from typing import Any

import httpx
import kmock
import pytest
from kmock import KubernetesError

from rpp.adapters.clock import ManualClock
from rpp.adapters.kube.api import (
    REQUIRED_PERMISSIONS,
    AlreadyExists,
    Conflict,
    Forbidden,
    KubeApi,
    KubeError,
    KubeSettings,
    NotFound,
    Permission,
    PoolEvent,
)
from rpp.adapters.kube.real import RealKubeApi
from rpp.sim.kube_memory import Call, MemoryKubeApi
from tests.fixtures_kube import NS, SETTINGS, TOKEN, pool_manifest
from tests.kmock_strict import (
    CONFIG_MAPS,
    EVENTS,
    LEASES,
    POOLS,
    SECRETS,
    StrictKubernetesEmulator,
    forbidden,
)

pytestmark = pytest.mark.kmock(cls=StrictKubernetesEmulator)

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
FINALIZER = "runpodpool.ownego.com/pods"
POOL_PATH = "runpodpool.ownego.com/v1alpha1"


async def test_list_and_get_pools_return_whole_objects(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    kmock.seed(POOLS, NS, pool_manifest("inference"))
    kmock.seed(POOLS, NS, pool_manifest("batch"))
    kmock.seed(POOLS, "elsewhere", pool_manifest("not-ours"))

    listed = await kube.list_pools()
    pool = await kube.get_pool("inference")

    assert sorted(p["metadata"]["name"] for p in listed) == ["batch", "inference"]
    assert pool["spec"] == {"templateId": "tpl"}
    assert pool["metadata"]["generation"] == 1
    assert pool["metadata"]["resourceVersion"]
    assert kmock[-1].headers["Authorization"] == f"Bearer {TOKEN}"


async def test_missing_pool_is_not_found_naming_the_pool(kube: RealKubeApi) -> None:
    with pytest.raises(NotFound) as caught:
        await kube.get_pool("ghost")
    assert "get runpodpools 'ghost' in namespace runpod" in str(caught.value)
    assert "CRD" not in str(caught.value)


async def test_status_replace_with_current_version_succeeds_and_bumps_it(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    seeded = kmock.seed(POOLS, NS, pool_manifest())
    version = seeded["metadata"]["resourceVersion"]

    updated = await kube.replace_pool_status(
        "inference", status={"mode": "DryRun", "ready": 2}, resource_version=version
    )

    assert updated["status"] == {"mode": "DryRun", "ready": 2}
    assert int(updated["metadata"]["resourceVersion"]) > int(version)
    put = kmock[-1]
    assert put.method == kmock.method.PUT
    assert put.subresource == "status"
    assert put.data["metadata"]["resourceVersion"] == version
    assert kmock.objects[POOLS, NS, "inference"]["status"] == {"mode": "DryRun", "ready": 2}


async def test_status_replace_over_a_stale_version_raises_conflict_and_writes_nothing(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    stale = kmock.seed(POOLS, NS, pool_manifest())["metadata"]["resourceVersion"]
    await kube.replace_pool_status("inference", status={"ready": 1}, resource_version=stale)

    with pytest.raises(Conflict) as caught:
        await kube.replace_pool_status("inference", status={"ready": 0}, resource_version=stale)

    assert caught.value.status == 409
    assert not isinstance(caught.value, AlreadyExists)
    assert "update runpodpools/status 'inference'" in str(caught.value)
    assert kmock.objects[POOLS, NS, "inference"]["status"] == {"ready": 1}


async def test_status_write_leaves_spec_and_generation_alone(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    version = kmock.seed(POOLS, NS, pool_manifest(image="v1"))["metadata"]["resourceVersion"]

    updated = await kube.replace_pool_status(
        "inference", status={"observedGeneration": 1}, resource_version=version
    )

    assert updated["spec"] == {"templateId": "tpl", "image": "v1"}
    assert updated["metadata"]["generation"] == 1
    assert "spec" not in kmock[-1].data


async def test_annotating_a_pool_merges_its_annotations_and_leaves_spec_and_status(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    seeded = pool_manifest(image="v1")
    seeded["metadata"]["annotations"] = {"team": "ml"}
    seeded["status"] = {"members": "not a list"}
    kmock.seed(POOLS, NS, seeded)

    patched = await kube.annotate_pool(
        "inference", annotations={"runpodpool.ownego.com/status-before-rebuild": "{}"}
    )

    request = kmock[-1]
    assert request.method == kmock.method.PATCH
    assert "merge-patch" in request.headers["Content-Type"]
    assert request.data == {
        "metadata": {"annotations": {"runpodpool.ownego.com/status-before-rebuild": "{}"}}
    }
    stored = kmock.objects[POOLS, NS, "inference"]
    assert stored["metadata"]["annotations"] == {
        "team": "ml",
        "runpodpool.ownego.com/status-before-rebuild": "{}",
    }
    assert stored["spec"] == {"templateId": "tpl", "image": "v1"}
    assert patched["status"] == {"members": "not a list"}


async def test_config_map_is_created_with_201_then_read_and_replaced_keeping_labels(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    assert await kube.read_config_map("inference-nginx-slots") is None

    created = await kube.create_config_map(
        "inference-nginx-slots",
        data={"upstreams.conf": "# empty"},
        labels={"app.kubernetes.io/managed-by": "rpp"},
    )
    read = await kube.read_config_map("inference-nginx-slots")
    assert read == created
    replaced = await kube.replace_config_map(read, data={"upstreams.conf": "server a;"})

    assert kmock[-3].method == kmock.method.POST
    assert created.labels == {"app.kubernetes.io/managed-by": "rpp"}
    assert replaced.data == {"upstreams.conf": "server a;"}
    assert replaced.labels == created.labels
    assert int(replaced.resource_version) > int(created.resource_version)
    stored = kmock.objects[CONFIG_MAPS, NS, "inference-nginx-slots"]
    assert stored["data"] == {"upstreams.conf": "server a;"}


async def test_create_is_answered_201_and_a_taken_name_is_already_exists(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    # The adapter accepts any 2xx, so check here that creates really are answered 201.
    response = await kmock.post(
        f"/api/v1/namespaces/{NS}/configmaps", json={"metadata": {"name": "probe"}}
    )
    assert response.status == 201
    with pytest.raises(AlreadyExists) as caught:
        await kube.create_config_map("probe", data={}, labels={})
    assert "create configmaps 'probe'" in str(caught.value)


async def test_config_map_replace_over_a_stale_read_raises_conflict(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    kmock.seed(CONFIG_MAPS, NS, {"metadata": {"name": "slots"}, "data": {"a": "1"}})
    first = await kube.read_config_map("slots")
    assert first is not None
    await kube.replace_config_map(first, data={"a": "2"})

    with pytest.raises(Conflict):
        await kube.replace_config_map(first, data={"a": "3"})
    assert kmock.objects[CONFIG_MAPS, NS, "slots"]["data"] == {"a": "2"}


async def test_secret_is_read_decoded_and_its_repr_hides_the_values(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in {"HF_TOKEN": "hf_abc"}.items()}
    kmock.seed(SECRETS, NS, {"metadata": {"name": "inference-env"}, "data": encoded})

    secret = await kube.read_secret("inference-env")

    assert secret is not None
    assert dict(secret) == {"HF_TOKEN": "hf_abc"}
    assert "hf_abc" not in repr(secret)
    assert "hf_abc" not in str(secret)
    assert "HF_TOKEN" in repr(secret)
    assert await kube.read_secret("absent") is None


async def test_secret_value_that_is_not_text_is_reported_by_key_not_value(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    binary = base64.b64encode(b"\xff\xfe-private").decode()
    kmock.seed(SECRETS, NS, {"metadata": {"name": "env"}, "data": {"BLOB": binary}})

    with pytest.raises(KubeError) as caught:
        await kube.read_secret("env")
    assert "'BLOB'" in str(caught.value)
    assert "private" not in str(caught.value)
    assert binary not in str(caught.value)


async def test_event_is_created_once_then_deduplicated_by_count(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    pool = kmock.seed(POOLS, NS, pool_manifest())
    later = NOW + dt.timedelta(minutes=1)

    await kube.emit_event(
        pool, type_="Warning", reason="CapacityUnavailable", message="no RTX 4090", now=NOW
    )
    await kube.emit_event(
        pool, type_="Warning", reason="CapacityUnavailable", message="no RTX 4090", now=later
    )
    await kube.emit_event(pool, type_="Normal", reason="PodCreated", message="rpp-1", now=later)

    stored = [o for o in kmock.objects.values() if o["kind"] == "Event"]
    by_reason = {event["reason"]: event for event in stored}
    assert len(stored) == 2
    capacity = by_reason["CapacityUnavailable"]
    assert capacity["count"] == 2
    assert capacity["lastTimestamp"] == "2026-03-01T12:01:00Z"
    assert capacity["involvedObject"]["uid"] == pool["metadata"]["uid"]
    assert capacity["involvedObject"]["kind"] == "RunPodPool"
    assert [r.method for r in list(kmock) if r.resource == EVENTS] == [
        kmock.method.POST,
        kmock.method.PATCH,
        kmock.method.POST,
    ]


async def test_event_repeat_after_a_restart_continues_the_existing_count(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    pool = kmock.seed(POOLS, NS, pool_manifest())
    await kube.emit_event(pool, type_="Normal", reason="Wired", message="slot 1", now=NOW)
    async with RealKubeApi.for_host(host=str(kmock.url), settings=SETTINGS) as restarted:
        await restarted.emit_event(pool, type_="Normal", reason="Wired", message="slot 1", now=NOW)

    (event,) = [o for o in kmock.objects.values() if o["kind"] == "Event"]
    assert event["count"] == 2


async def test_event_expired_by_the_api_server_is_created_again(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    pool = kmock.seed(POOLS, NS, pool_manifest())
    await kube.emit_event(pool, type_="Normal", reason="Wired", message="slot 1", now=NOW)
    ((key, event),) = [(k, o) for k, o in kmock.objects.items() if o["kind"] == "Event"]
    event.delete()  # Events live about an hour, then the API server removes them

    await kube.emit_event(pool, type_="Normal", reason="Wired", message="slot 1", now=NOW)

    assert kmock.objects[key]["count"] == 1
    assert [r.method for r in list(kmock) if r.resource == EVENTS][-2:] == [
        kmock.method.PATCH,
        kmock.method.POST,
    ]


async def test_rejected_credentials_say_to_check_the_token(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    kmock[kmock.method.GET] << KubernetesError(status=401, reason="Unauthorized")

    with pytest.raises(KubeError, match="rejected the controller's credentials") as caught:
        await kube.list_pools()
    assert caught.value.status == 401


@pytest.mark.parametrize(
    ("verb", "resource", "method", "call"),
    [
        ("list", "runpodpools", kmock.method.GET, lambda k: k.list_pools()),
        ("get", "secrets", kmock.method.GET, lambda k: k.read_secret("inference-env")),
        ("watch", "runpodpools", kmock.action.WATCH, lambda k: past_the_listing(k)),
        (
            "update",
            "runpodpools/status",
            kmock.method.PUT,
            lambda k: k.replace_pool_status("inference", status={}, resource_version="1"),
        ),
        (
            "create",
            "configmaps",
            kmock.method.POST,
            lambda k: k.create_config_map("slots", data={}, labels={}),
        ),
        (
            "patch",
            "runpodpools",
            kmock.method.PATCH,
            lambda k: k.set_pool_finalizers("inference", finalizers=["f"], resource_version="1"),
        ),
    ],
    ids=[
        "list-pools",
        "get-secret",
        "watch-pools",
        "update-status",
        "create-configmap",
        "patch-finalizers",
    ],
)
async def test_forbidden_names_the_verb_and_resource_the_role_lacks(
    kube: RealKubeApi,
    kmock: StrictKubernetesEmulator,
    verb: str,
    resource: str,
    method: Any,
    call: Any,
) -> None:
    kmock.seed(POOLS, NS, pool_manifest())
    kmock[method] << forbidden(verb, resource)

    with pytest.raises(Forbidden) as caught:
        await call(kube)

    assert (caught.value.verb, caught.value.resource) == (verb, resource)
    assert f"forbidden: cannot {verb} {resource}" in str(caught.value)
    assert "deploy/rbac.yaml" in str(caught.value)
    assert "status" not in kmock.objects[POOLS, NS, "inference"]


async def past_the_listing(kube: RealKubeApi) -> None:
    """The pool watch's first event (from its list), then the watch itself."""
    stream = kube.watch_pools()
    try:
        await anext(stream)
        await anext(stream)
    finally:
        await stream.aclose()


async def test_errors_never_carry_the_token_or_server_internals(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    kmock[kmock.method.GET] << KubernetesError(
        status=500, reason="InternalError", message="etcd down"
    )

    with pytest.raises(KubeError) as caught:
        await kube.get_pool("inference")

    text = str(caught.value) + repr(caught.value) + repr(kube)
    assert "HTTP 500: etcd down" in str(caught.value)
    assert TOKEN not in text
    assert "traceback" not in text.lower()
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None


async def test_missing_crd_says_to_install_it(kmock: StrictKubernetesEmulator) -> None:
    other = KubeSettings(namespace=NS, crd_group="other.example.com")
    async with RealKubeApi.for_host(host=str(kmock.url), settings=other) as api:
        with pytest.raises(NotFound) as caught:
            await api.list_pools()
    assert "deploy/crd.yaml" in str(caught.value)


class Dates:
    """A clock's ear for the API server's Date: what each answer carried."""

    def __init__(self) -> None:
        self.seen: list[str | None] = []

    def elapsed(self) -> float:
        return 0.0

    def server_answered(self, date: str | None, *, sent: float) -> None:
        self.seen.append(date)


async def test_every_answer_tells_the_clock_the_api_servers_date_errors_too(
    kmock: StrictKubernetesEmulator,
) -> None:
    kmock.seed(POOLS, NS, pool_manifest("inference"))
    dates = Dates()
    async with RealKubeApi.for_host(host=str(kmock.url), settings=SETTINGS, dates=dates) as api:
        await api.list_pools()
        with pytest.raises(NotFound):
            await api.get_pool("ghost")
    assert len(dates.seen) == 2
    for date in dates.seen:
        assert date is not None
        server = email.utils.parsedate_to_datetime(date)
        assert abs((server - dt.datetime.now(dt.UTC)).total_seconds()) < 60


async def test_unreachable_api_server_is_a_kube_error_naming_the_host() -> None:
    async with RealKubeApi.for_host(host="http://127.0.0.1:9", settings=SETTINGS) as api:
        with pytest.raises(KubeError) as caught:
            await api.list_pools()
    assert "cannot reach the Kubernetes API at http://127.0.0.1:9" in str(caught.value)


async def test_the_api_server_is_reached_directly_whatever_proxies_and_netrc_the_env_names(
    kmock: StrictKubernetesEmulator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A proxy that does not exist, and a ~/.netrc with other credentials for this host: a
    # client that trusted the environment would fail, or send Basic auth instead.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / ".netrc").write_text("machine 127.0.0.1 login someone password netrc-pass\n")
    (tmp_path / ".netrc").chmod(0o600)
    monkeypatch.setenv("HOME", str(tmp_path))
    kmock.seed(POOLS, NS, pool_manifest("inference"))

    async with RealKubeApi.for_host(host=str(kmock.url), settings=SETTINGS, token=TOKEN) as api:
        listed = await api.list_pools()

    assert [p["metadata"]["name"] for p in listed] == ["inference"]
    assert kmock[-1].headers["Authorization"] == f"Bearer {TOKEN}"


async def test_lease_get_create_replace_with_conflicts(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    spec = {"holderIdentity": "rpp-a", "leaseDurationSeconds": 15}
    assert await kube.get_lease("rpp-leader") is None

    created = await kube.create_lease("rpp-leader", spec=spec)
    with pytest.raises(AlreadyExists):
        await kube.create_lease("rpp-leader", spec={"holderIdentity": "rpp-b"})
    renewed = await kube.replace_lease(
        "rpp-leader",
        spec={**spec, "renewTime": "2026-03-01T12:00:00.000000Z"},
        resource_version=created["metadata"]["resourceVersion"],
    )
    with pytest.raises(Conflict):
        await kube.replace_lease(
            "rpp-leader",
            spec={"holderIdentity": "rpp-b"},
            resource_version=created["metadata"]["resourceVersion"],
        )

    current = await kube.get_lease("rpp-leader")
    assert current is not None
    assert current["spec"]["holderIdentity"] == "rpp-a"
    assert current["metadata"]["resourceVersion"] == renewed["metadata"]["resourceVersion"]
    assert kmock.objects[LEASES, NS, "rpp-leader"]["spec"]["holderIdentity"] == "rpp-a"


async def test_a_finalizer_holds_a_deleted_pool_until_its_removal_deletes_it(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    seeded = kmock.seed(POOLS, NS, pool_manifest())
    added = await kube.set_pool_finalizers(
        "inference", finalizers=[FINALIZER], resource_version=seeded["metadata"]["resourceVersion"]
    )
    async with httpx.AsyncClient(base_url=str(kmock.url)) as http:
        deleted = await http.delete(f"/apis/{POOL_PATH}/namespaces/{NS}/runpodpools/inference")
    deleting = await kube.get_pool("inference")
    removed = await kube.set_pool_finalizers(
        "inference", finalizers=[], resource_version=deleting["metadata"]["resourceVersion"]
    )

    assert added["metadata"]["finalizers"] == [FINALIZER]
    assert deleted.status_code == 200
    assert deleting["metadata"]["deletionTimestamp"]
    assert deleting["metadata"]["generation"] == 2  # the API server bumps it on deletion
    assert removed["metadata"]["finalizers"] == []
    with pytest.raises(NotFound):
        await kube.get_pool("inference")


async def test_finalizers_over_a_stale_version_raise_conflict_and_keep_another_writers(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    seeded = kmock.seed(POOLS, NS, pool_manifest())
    stale = seeded["metadata"]["resourceVersion"]
    await kube.set_pool_finalizers("inference", finalizers=["other.io/x"], resource_version=stale)

    with pytest.raises(Conflict) as caught:
        await kube.set_pool_finalizers("inference", finalizers=[FINALIZER], resource_version=stale)

    assert caught.value.verb == "patch"
    assert kmock.objects[POOLS, NS, "inference"]["metadata"]["finalizers"] == ["other.io/x"]


async def test_watch_yields_existing_pools_then_changes(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    kmock.seed(POOLS, NS, pool_manifest())
    stream = kube.watch_pools()
    first = await asyncio.wait_for(anext(stream), timeout=5)
    following = asyncio.create_task(anext(stream))
    await kmock.wait_for_watchers(POOLS)

    async with RealKubeApi.for_host(host=str(kmock.url), settings=SETTINGS) as writer:
        version = first.pool["metadata"]["resourceVersion"]
        await writer.replace_pool_status(
            "inference", status={"ready": 1}, resource_version=version
        )
    second = await asyncio.wait_for(following, timeout=5)
    await stream.aclose()

    assert first == PoolEvent("ADDED", first.pool)
    assert first.pool["metadata"]["name"] == "inference"
    assert second.type == "MODIFIED"
    assert second.pool["status"] == {"ready": 1}


async def exercise(api: KubeApi) -> None:
    """Every call of the interface once, the way a reconcile and a leader election use them."""
    await api.list_pools()
    pool = await api.get_pool("inference")
    version = pool["metadata"]["resourceVersion"]
    written = await api.replace_pool_status(
        "inference", status={"ready": 0}, resource_version=version
    )
    version = written["metadata"]["resourceVersion"]
    await api.set_pool_finalizers("inference", finalizers=[FINALIZER], resource_version=version)
    assert await api.read_config_map("inference-nginx-slots") is None
    await api.create_config_map("inference-nginx-slots", data={}, labels={"app": "rpp"})
    slots = await api.read_config_map("inference-nginx-slots")
    assert slots is not None
    await api.replace_config_map(slots, data={"slots.conf": "server a;"})
    await api.read_secret("inference-env")
    # The two clusters give the pool different uids; the Event's name derives from it.
    same_uid = {**pool, "metadata": {**pool["metadata"], "uid": "uid-1"}}
    for _ in range(2):
        await api.emit_event(
            same_uid, type_="Warning", reason="NotActing", message="no key", now=NOW
        )
    assert await api.get_lease("rpp") is None
    lease = await api.create_lease("rpp", spec={"holderIdentity": "a"})
    version = lease["metadata"]["resourceVersion"]
    await api.replace_lease("rpp", spec={"holderIdentity": "a"}, resource_version=version)
    stream = api.watch_pools()
    await asyncio.wait_for(anext(stream), timeout=5)
    await stream.aclose()


def rbac_verb(request: Any) -> str:
    if request.method == kmock.method.GET:
        if request.params.get("watch") == "true":
            return "watch"
        return "get" if request.name else "list"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}[request.method.value]


async def test_memory_and_real_adapters_make_the_same_calls_all_covered_by_rbac(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    kmock.seed(POOLS, NS, pool_manifest())
    kmock.seed(SECRETS, NS, {"metadata": {"name": "inference-env"}, "data": {}})
    memory = MemoryKubeApi(SETTINGS, clock=ManualClock(NOW))
    memory.apply_pool(pool_manifest())
    memory.put_secret("inference-env", {})

    await exercise(kube)
    await exercise(memory)

    real_calls = []
    for request in list(kmock):
        resource = request.resource.plural
        if request.subresource:
            resource = f"{resource}/{request.subresource}"
        verb = rbac_verb(request)
        assert Permission(verb, request.resource.group, resource) in REQUIRED_PERMISSIONS
        # A create names its object in the body, not in the URL.
        name = request.name or (request.data or {}).get("metadata", {}).get("name")
        real_calls.append(Call(verb, resource, name))
    assert real_calls == memory.calls
