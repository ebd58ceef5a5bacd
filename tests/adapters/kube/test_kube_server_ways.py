"""The real Kubernetes adapter against what a real API server does and plain stand-ins did not.

Found on a real kube-apiserver (issue 24): after etcd compaction a watch resuming from an
old resourceVersion is answered 410 Gone; after a restart the server refuses everything for
a few seconds (403, then 429 "storage is (re)initializing"); and it records each write's
field manager, which was the client library's `OpenAPI-Generator`. kmock (made strict by
tests/kmock_strict.py, which answers the 410 as an HTTP status, the form the API server uses
when a watch request itself is too old) serves the API on 127.0.0.1; the adapter's waits run
on a `Stopwatch`, so a 10 s grace passes at once. rpp/sim/kube_standin.py, with the other
form (an ERROR event in the stream), is met by `rpp nginx-reloader` in
tests/commands/test_nginx_reloader_api.py.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any

import httpx
import pytest
from kmock import KubernetesError

from rpp import __version__
from rpp.adapters.kube.api import Forbidden, KubeError, KubeSettings, PoolEvent
from rpp.adapters.kube.real import RealKubeApi
from tests.fixtures_kube import NS, SETTINGS, pool_manifest
from tests.kmock_strict import (
    CONFIG_MAPS,
    EVENTS,
    LEASES,
    POOLS,
    StrictKubernetesEmulator,
    forbidden,
)
from tests.stopwatch import Stopwatch

pytestmark = pytest.mark.kmock(cls=StrictKubernetesEmulator)

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
POOL_PATH = f"/apis/runpodpool.ownego.com/v1alpha1/namespaces/{NS}/runpodpools"
ADAPTER_LOG = "rpp.adapters.kube"


def watches(kmock: StrictKubernetesEmulator) -> list[Any]:
    return [r for r in list(kmock) if r.params.get("watch") == "true"]


def lists(kmock: StrictKubernetesEmulator) -> list[Any]:
    gets = [r for r in list(kmock) if r.method == kmock.method.GET and r.name is None]
    return [r for r in gets if "watch" not in r.params]


def names(events: list[PoolEvent]) -> list[tuple[str, str]]:
    return [(e.type, e.pool["metadata"]["name"]) for e in events]


# -- 410 Gone and bookmarks ---------------------------------------------------------------


async def test_a_pool_watch_resuming_from_a_compacted_version_lists_again_quietly(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    kmock.seed(POOLS, NS, pool_manifest("a"))
    kmock.seed(POOLS, NS, pool_manifest("b"))
    stream = kube.watch_pools()
    listed = [await anext(stream), await anext(stream)]
    # While no stream is open: a changes, b goes, and etcd compacts past the listing.
    version = listed[0].pool["metadata"]["resourceVersion"]
    writer = RealKubeApi.for_host(host=str(kmock.url), settings=SETTINGS)
    async with writer, httpx.AsyncClient(base_url=str(kmock.url)) as http:
        await writer.replace_pool_status("a", status={"ready": 1}, resource_version=version)
        assert (await http.delete(f"{POOL_PATH}/b")).status_code == 200
    kmock.compact()

    with caplog.at_level(logging.DEBUG, logger=ADAPTER_LOG):
        caught_up = [await asyncio.wait_for(anext(stream), timeout=5) for _ in range(2)]
    await stream.aclose()

    assert names(listed) == [("ADDED", "a"), ("ADDED", "b")]
    assert names(caught_up) == [("MODIFIED", "a"), ("DELETED", "b")]
    assert caught_up[0].pool["status"] == {"ready": 1}
    [expired] = watches(kmock)
    assert expired.params["resourceVersion"] == "2"  # the listing's, answered 410
    assert len(lists(kmock)) == 2, "one list again, not a loop"
    [said] = [r for r in caplog.records if r.name == ADAPTER_LOG]
    assert said.levelno == logging.INFO
    assert said.getMessage() == (
        f"watch of runpodpools in namespace {NS}: the API server no longer keeps "
        f"resourceVersion 2 (too old resource version: 2 ({kmock.compacted})); listing "
        "again, then watching from there"
    )


async def test_a_bookmark_moves_the_resume_point_past_a_compaction(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    kmock.seed(POOLS, NS, pool_manifest("a"))
    stream = kube.watch_pools()
    await anext(stream)
    following = asyncio.create_task(anext(stream))
    await kmock.wait_for_watchers(POOLS)
    kmock.seed(LEASES, NS, {"metadata": {"name": "elsewhere"}})  # the revision moves on
    # The bookmark goes out before the stream is cut: a resume starts from its version.
    await kmock.bookmark()
    kmock.compact()
    await kmock.end_watches()
    async with RealKubeApi.for_host(host=str(kmock.url), settings=SETTINGS) as writer:
        await writer.annotate_pool("a", annotations={"note": "after the compaction"})
    changed = await asyncio.wait_for(following, timeout=5)
    await stream.aclose()

    first, resumed = watches(kmock)
    assert first.params["allowWatchBookmarks"] == "true"
    assert resumed.params["resourceVersion"] == str(kmock.compacted)
    assert len(lists(kmock)) == 1, "no 410, so no list again"
    assert changed.type == "MODIFIED"
    assert changed.pool["metadata"]["annotations"] == {"note": "after the compaction"}


async def test_the_config_map_watch_after_a_410_watches_the_current_state_without_listing(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    """The reloader's Role grants `watch` on its one ConfigMap and no `list`."""
    kmock.seed(CONFIG_MAPS, NS, {"metadata": {"name": "slots"}, "data": {"v": "1"}})
    async with RealKubeApi.for_host(host=str(kmock.url), settings=SETTINGS) as writer:
        stream = kube.watch_config_map("slots")
        added = await anext(stream)
        following = asyncio.create_task(anext(stream))
        await kmock.wait_for_watchers(CONFIG_MAPS)
        second = await writer.replace_config_map(added.config_map, data={"v": "2"})
        modified = await asyncio.wait_for(following, timeout=5)
        await kmock.end_watches()  # then, while it is cut, a change and a compaction
        await writer.replace_config_map(second, data={"v": "3"})
        kmock.compact()
        with caplog.at_level(logging.INFO, logger=ADAPTER_LOG):
            current = await asyncio.wait_for(anext(stream), timeout=5)
        await stream.aclose()

    assert (added.type, modified.type) == ("ADDED", "MODIFIED")
    assert current.config_map.data == {"v": "3"}
    sent = [r.params.get("resourceVersion") for r in watches(kmock)]
    assert sent == [None, second.resource_version, None]
    assert lists(kmock) == []
    [said] = [r.getMessage() for r in caplog.records if r.name == ADAPTER_LOG]
    assert said.endswith("watching again from the current state")


# -- an API server restart ----------------------------------------------------------------


async def test_an_api_server_restart_is_waited_out_and_said_once_in_plain_words(
    kube: RealKubeApi,
    kmock: StrictKubernetesEmulator,
    stopwatch: Stopwatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await kmock.restart(forbidden=3, busy=2)

    with caplog.at_level(logging.DEBUG, logger=ADAPTER_LOG):
        lease = await kube.get_lease("runpod-pool-controller")

    assert lease is None  # the answer once the server is up: there is none yet
    assert [r.method for r in list(kmock)] == [kmock.method.GET] * 6
    # Doubling backoffs through the 403s, then the Retry-After the 429s asked for.
    assert stopwatch.slept == [0.5, 1.0, 2.0, 1.0, 1.0]
    said = [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    target = f"get leases 'runpod-pool-controller' in namespace {NS}"
    assert said == [
        (
            "INFO",
            f"{target}: the API server refused (403); retrying for up to 10s, as an API "
            "server refuses everything for a few seconds after it starts",
        ),
        ("INFO", "the Kubernetes API server answers again, 5.5s after it first refused"),
    ]


async def test_refusals_that_end_in_unauthorized_are_not_said_to_be_over(
    kube: RealKubeApi,
    kmock: StrictKubernetesEmulator,
    stopwatch: Stopwatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Measured on kube-apiserver 1.36: once `helm uninstall` deleted the controller's
    ServiceAccount, its 403s turned into 401s, and "answers again" was logged. A 401 is no
    recovery: only an answer past the authenticator and the authorizer ends the refusals."""
    await kmock.restart(forbidden=2)
    kmock[kmock.method.GET, LEASES] << KubernetesError(
        status=401, reason="Unauthorized", message="Unauthorized"
    )

    with caplog.at_level(logging.DEBUG, logger=ADAPTER_LOG), pytest.raises(KubeError) as caught:
        await kube.get_lease("runpod-pool-controller")

    assert caught.value.status == 401
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert not [line for line in said if "answers again" in line], said


async def test_a_refusal_that_lasts_gives_the_rbac_advice_then_fails_at_once(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator, stopwatch: Stopwatch
) -> None:
    kmock[kmock.method.GET, LEASES] << forbidden("get", "leases")

    with pytest.raises(Forbidden) as lasting:
        await kube.get_lease("runpod-pool-controller")
    tries = len(list(kmock))
    waited = stopwatch.now
    with pytest.raises(Forbidden) as again:
        await kube.get_lease("runpod-pool-controller")

    assert waited >= 10.0, "a 403 is a missing grant only once it lasted the grace"
    assert tries == 1 + len(stopwatch.slept)
    assert str(lasting.value) == (
        f"forbidden: cannot get leases 'runpod-pool-controller' in namespace {NS}, "
        f"refused for {waited:.0f}s: the controller's Role lacks this; apply deploy/rbac.yaml"
    )
    assert len(list(kmock)) == tries + 1, "then at once: one request, no waiting"
    assert stopwatch.now == waited
    assert "refused for" in str(again.value)


async def test_a_grant_that_comes_back_is_waited_for_again(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator, stopwatch: Stopwatch
) -> None:
    """A success forgets the refusals: a later 403 is given the grace again."""
    await kmock.restart(forbidden=1)
    assert await kube.get_lease("l") is None
    await kmock.restart(forbidden=1)
    assert await kube.get_lease("l") is None
    assert stopwatch.slept == [0.5, 0.5]


async def test_an_api_server_that_keeps_failing_fails_the_call_in_seconds_saying_so(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator, stopwatch: Stopwatch
) -> None:
    kmock[kmock.method.GET, POOLS] << KubernetesError(
        status=503, reason="ServiceUnavailable", message="etcd is not reachable"
    )

    with pytest.raises(KubeError) as caught:
        await kube.get_pool("inference")

    assert len(list(kmock)) == 5
    assert stopwatch.slept == [0.5, 1.0, 2.0, 4.0]
    assert str(caught.value) == (
        f"kubernetes API error: cannot get runpodpools 'inference' in namespace {NS}: "
        "HTTP 503: etcd is not reachable; still so after 5 tries"
    )


async def test_a_write_answered_5xx_is_not_sent_again_but_a_429_is(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator, stopwatch: Stopwatch
) -> None:
    """A 5xx may come after the write landed: sent again, a status write would meet its
    own 409 and be taken for lost. A 429 comes before the server does anything."""
    kmock[kmock.method.POST, LEASES] << KubernetesError(
        status=504, reason="Timeout", message="the server was unable to respond in time"
    )
    with pytest.raises(KubeError) as caught:
        await kube.create_lease("l", spec={"holderIdentity": "a"})
    assert caught.value.status == 504
    assert len(list(kmock)) == 1
    assert stopwatch.slept == []

    await kmock.restart(busy=1)
    await kube.create_config_map("slots", data={"v": "1"}, labels={})
    assert [r.method for r in list(kmock)][1:] == [kmock.method.POST] * 2


# -- field managers -----------------------------------------------------------------------


async def test_every_write_names_the_controller_as_its_field_manager(
    kube: RealKubeApi, kmock: StrictKubernetesEmulator
) -> None:
    seeded = kmock.seed(POOLS, NS, pool_manifest("inference"))
    version = seeded["metadata"]["resourceVersion"]
    written = await kube.replace_pool_status("inference", status={}, resource_version=version)
    version = written["metadata"]["resourceVersion"]
    await kube.set_pool_finalizers("inference", finalizers=["f"], resource_version=version)
    await kube.annotate_pool("inference", annotations={"note": "x"})
    slots = await kube.create_config_map("slots", data={}, labels={})
    await kube.replace_config_map(slots, data={"a": "b"})
    for _ in range(2):  # created, then its count patched
        await kube.emit_event(seeded, type_="Normal", reason="Wired", message="m", now=NOW)
    lease = await kube.create_lease("leader", spec={"holderIdentity": "a"})
    await kube.replace_lease(
        "leader",
        spec={"holderIdentity": "a"},
        resource_version=lease["metadata"]["resourceVersion"],
    )

    writes = [r for r in list(kmock) if r.method != kmock.method.GET]
    assert len(writes) == 9
    assert {r.params.get("fieldManager") for r in writes} == {"runpod-pool-controller"}
    assert {r.headers["User-Agent"] for r in list(kmock)} == {
        f"runpod-pool-controller/{__version__}"
    }
    [event] = [key[2] for key in kmock.objects if key[0] == EVENTS]
    for resource, name in [(POOLS, "inference"), (CONFIG_MAPS, "slots"), (LEASES, "leader")]:
        assert kmock.managers(resource, NS, name) == {"runpod-pool-controller"}
    assert kmock.managers(EVENTS, NS, event) == {"runpod-pool-controller"}
    pool_fields = kmock.objects[POOLS, NS, "inference"].raw["metadata"]["managedFields"]
    assert sorted(f.get("subresource", "") for f in pool_fields) == ["", "status"]


async def test_the_reloaders_writes_name_the_reloader(kmock: StrictKubernetesEmulator) -> None:
    settings = KubeSettings(namespace=NS, component="rpp-nginx-reloader")
    subject = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s", "uid": "u"}}
    async with RealKubeApi.for_host(host=str(kmock.url), settings=settings) as reloader:
        await reloader.emit_event(
            subject, type_="Warning", reason="NginxConfigRejected", message="m", now=NOW
        )
    [request] = list(kmock)
    assert request.params["fieldManager"] == "rpp-nginx-reloader"
