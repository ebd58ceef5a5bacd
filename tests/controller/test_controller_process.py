"""`rpp run` as a real process: a Kubernetes API emulator, the fake RunPod, real HTTP.

kmock (strict) serves the cluster on 127.0.0.1; the fake RunPod cloud (REST v2, GraphQL
and the proxy, with fake inference pods) is served by uvicorn; `rpp run` is started as
a subprocess configured only by environment variables and a kubeconfig, exactly as a
rehearsal runs it (docs/rehearsal.md; the `rehearsal` fixture, tests/fixtures_rehearsal.py).
Nothing here touches the real RunPod.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rpp.controller.leader import LEASE_NAME
from rpp.sim.cloud_api import CloudApi
from rpp.sim.localhttp import serve_local
from rpp.sim.proxy import ProxyApp, route_by_host
from tests.controller_kit import GPU, IMAGE, manifest
from tests.fixtures_rehearsal import API_KEY, METRICS_TOKEN, NS, Rehearsal
from tests.kmock_strict import CONFIG_MAPS, LEASES, POOLS, StrictKubernetesEmulator

pytestmark = pytest.mark.kmock(cls=StrictKubernetesEmulator)


def pool_object(**spec: Any) -> dict[str, Any]:
    obj = manifest("inference", replicas={"min": 1, "max": 1}, **spec)
    obj["metadata"] = {"name": "inference"}
    return obj


@asynccontextmanager
async def running_with_its_pod_ready(rehearsal: Rehearsal) -> AsyncIterator[None]:
    """`rpp run` on the pool of one pod, against the fake RunPod, once that pod is ready."""
    rehearsal.seed(pool_object())
    app = route_by_host(CloudApi(rehearsal.cloud), ProxyApp(rehearsal.cloud))
    async with serve_local(app) as port:
        await rehearsal.start(f"http://127.0.0.1:{port}")
        await rehearsal.wait_healthy()
        async with asyncio.timeout(30):
            while (rehearsal.pool().get("status") or {}).get("ready") != 1:
                await asyncio.sleep(0.2)
        yield


async def test_rpp_run_reconciles_a_pool_serves_its_endpoints_and_exits_0_on_sigterm(
    rehearsal: Rehearsal,
) -> None:
    async with running_with_its_pod_ready(rehearsal):
        metrics = (await rehearsal.get("/metrics")).text
        sd = (await rehearsal.get("/sd/inference")).json()
        # The probe port (the chart's healthPort) answers /healthz and nothing else.
        probe_port = [
            await rehearsal.get(path, port=rehearsal.health) for path in ("/healthz", "/metrics")
        ]
        code, logs, output = await rehearsal.stop()

    values = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics)
        for s in family.samples
    }
    (pod_id,) = rehearsal.cloud.pods
    assert values[("runpod_pool_leader", ())] == 1
    ready = (("pool", "inference"), ("pool_namespace", "runpod"))
    assert values[("runpod_pool_ready", ready)] == 1
    assert sd == [
        {
            "targets": ["inference.runpod.svc:8081"],
            "labels": {"runpod_pod": pod_id, "slot": "8081", "datacenter": "EU-RO-1"},
        }
    ]
    assert [(r.status_code, r.text) for r in probe_port] == [
        (200, "ok\n"),
        (404, "not found: this port serves /healthz only\n"),
    ]
    assert code == 0
    lease = rehearsal.kmock.objects[LEASES, NS, LEASE_NAME].raw["spec"]
    assert not lease.get("holderIdentity")  # released for the standby
    assert lease["leaseDurationSeconds"] == 1
    messages = [line["message"] for line in logs]
    assert any(m.startswith("runpod-pool-controller ") for m in messages)
    assert any("starting as rpp-test_" in m for m in messages)
    assert "released the leader Lease runpod-pool-controller" in messages
    assert messages[-1] == "stopped"
    assert {"time", "level", "logger", "message"} <= set(logs[0])
    # Inside a reconcile the pool is a key of its own, and the pod too where one is acted on.
    acted = [line for line in logs if line.get("effect") == "write-slots"]
    assert acted
    assert {line["pool"] for line in acted} == {"inference"}
    assert not any(line["message"].startswith("pool ") for line in logs)
    assert API_KEY not in output
    assert METRICS_TOKEN not in output


async def test_sigterm_mid_loop_finishes_the_loop_writes_status_then_releases(
    rehearsal: Rehearsal,
) -> None:
    # A pod already runs and hangs: each loop waits 3 s for its probes to time out.
    pod = rehearsal.cloud.add_pod(
        name="rpp-inference-hung", image=IMAGE, gpu_type=GPU, datacenter="EU-RO-1"
    )
    hung = rehearsal.servers[pod.info.pod_id]
    hung.pod.hang()
    rehearsal.seed(pool_object(probe={"timeout": "3s"}))
    app = route_by_host(CloudApi(rehearsal.cloud), ProxyApp(rehearsal.cloud))
    loop = asyncio.get_running_loop()
    async with serve_local(app) as port:
        await rehearsal.start(f"http://127.0.0.1:{port}")
        await asyncio.wait_for(hung.arrived.wait(), timeout=20)  # the first loop probes it
        assert "status" not in rehearsal.pool()
        signalled = loop.time()
        code, logs, _ = await rehearsal.stop()
        exited = loop.time()
        hung.pod.recover()

    assert code == 0
    assert exited - signalled >= 2.5  # it waited for the probe, finishing the loop
    status = rehearsal.pool()["status"]
    assert [m["podId"] for m in status["members"]] == [pod.info.pod_id]
    assert status["observedGeneration"] == 1
    messages = [line["message"] for line in logs]
    stopping = messages.index("SIGTERM: finishing the loop under way, then releasing the Lease")
    released = messages.index("released the leader Lease runpod-pool-controller")
    assert stopping < released
    assert not rehearsal.kmock.objects[LEASES, NS, LEASE_NAME].raw["spec"].get("holderIdentity")


async def test_rpp_run_names_itself_on_its_writes_and_rides_out_a_restart_and_a_compaction(
    rehearsal: Rehearsal,
) -> None:
    """What a real API server did to `rpp run` that the stand-ins never did (issue 24): it
    restarted (403 to everything for a few seconds, then 429 while its storage filled),
    and compacted etcd under the pool watch (410 Gone when the watch resumed). The
    controller says what happened at INFO and goes on; and its writes carry its name."""
    kmock = rehearsal.kmock
    async with running_with_its_pod_ready(rehearsal):
        await kmock.restart(forbidden=3, busy=2)
        async with asyncio.timeout(30):
            while kmock.refusing:
                await asyncio.sleep(0.1)
        after_restart = len(list(kmock))
        async with asyncio.timeout(30):
            while not [r for r in list(kmock)[after_restart:] if writes_lease(r)]:
                await asyncio.sleep(0.1)
        # Something else moves the revision on, etcd compacts, the watch's stream is cut.
        kmock.seed(CONFIG_MAPS, NS, {"metadata": {"name": "unrelated"}})
        kmock.compact()
        await kmock.end_watches()
        compacted, mark = kmock.compacted, len(list(kmock))
        async with asyncio.timeout(30):
            while not [
                r
                for r in pool_watches(kmock, mark)
                if int(r.params["resourceVersion"]) >= compacted
            ]:
                await asyncio.sleep(0.1)
        assert rehearsal.process is not None
        assert rehearsal.process.returncode is None
        code, logs, _ = await rehearsal.stop()

    assert code == 0
    stale = [r for r in pool_watches(kmock, mark) if int(r.params["resourceVersion"]) < compacted]
    assert len(stale) == 1, "resumed once from the compacted version, then from a list"
    writes = [r for r in list(kmock) if r.method != kmock.method.GET]
    assert {r.params.get("fieldManager") for r in writes} == {"runpod-pool-controller"}
    assert kmock.managers(POOLS, NS, "inference") == {"runpod-pool-controller"}
    assert kmock.managers(CONFIG_MAPS, NS, "inference-nginx-slots") == {"runpod-pool-controller"}
    assert kmock.managers(LEASES, NS, LEASE_NAME) == {"runpod-pool-controller"}
    said = [(line["level"], line["message"]) for line in logs]
    assert [s for s in said if s[0] in ("WARNING", "ERROR", "CRITICAL")] == []
    assert not [m for _, m in said if "rbac" in m.lower()]
    infos = [m for level, m in said if level == "INFO"]
    restarted = "the API server refused (403); retrying for up to 10s"
    assert any(restarted in m for m in infos)
    assert any(m.startswith("the Kubernetes API server answers again") for m in infos)
    assert any(
        m.startswith(f"watch of runpodpools in namespace {NS}: the API server no longer keeps")
        for m in infos
    )


def writes_lease(request: Any) -> bool:
    return bool(request.resource == LEASES and request.method != request.method.GET)


def pool_watches(kmock: StrictKubernetesEmulator, since: int) -> list[Any]:
    return [
        r
        for r in list(kmock)[since:]
        if r.resource == POOLS
        and r.params.get("watch") == "true"
        and r.params.get("resourceVersion")
    ]
