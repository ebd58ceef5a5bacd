"""/healthz, /metrics and /sd/<pool> over real HTTP, parsed the way their readers parse them.

/metrics is read with prometheus_client's own parser, /sd/<pool> as the JSON Prometheus
HTTP service discovery reads, and the seed's three alerts are evaluated by a real
Prometheus scraping the controller's /metrics.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from rpp.act.executor import Executor
from rpp.adapters.clock import SystemClock
from rpp.adapters.kube.api import KubeSettings
from rpp.adapters.pod_http import PodHttpClient
from rpp.adapters.runpod.client import RunPodClient
from rpp.controller.http_api import HttpApi, sd_groups
from rpp.controller.loop import ControllerLoop
from rpp.controller.pool_metrics import PoolMetrics
from rpp.controller.reconcile import PoolReconciler
from rpp.model.members import MemberRecord, Phase
from rpp.model.status import PoolStatus
from rpp.observe.prober import Prober
from rpp.observe.prometheus import PrometheusClient
from rpp.sim.kube_memory import MemoryKubeApi
from rpp.sim.localhttp import ServerThread
from rpp.sim.virtual_time import VirtualClock, run_virtual
from rpp.sim.world import World
from tests.controller_kit import manifest, world
from tests.fixtures_prometheus import running_prometheus

NOW = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def healthy_world() -> World:
    """A pool of two Ready pods, after the real loop ran for five minutes."""

    async def main(clock: VirtualClock) -> World:
        w = world(clock, manifest("inference"))
        for _ in range(10):
            await w.loop()
            await asyncio.sleep(30)
        await w.close()
        return w

    return run_virtual(main)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a /metrics page, keyed by name and sorted labels."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_and_sd_describe_the_pool_as_its_status_does() -> None:
    w = healthy_world()
    registry = w.controller.registry
    api = HttpApi(registry=registry, health=lambda: None, kube=w.kube)
    final = PoolStatus.from_stored(w.kube.pool("inference")["status"])
    wired = sorted((m for m in final.members if m.slot is not None), key=lambda m: m.slot or 0)
    assert len(wired) == 2

    with ServerThread([api]) as (port,):
        base = f"http://127.0.0.1:{port}"
        metrics = httpx.get(f"{base}/metrics", timeout=5)
        sd = httpx.get(f"{base}/sd/inference", timeout=5)
        unknown = httpx.get(f"{base}/sd/nope", timeout=5)
        health = httpx.get(f"{base}/healthz", timeout=5)
        post = httpx.post(f"{base}/metrics", timeout=5)

    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain")
    got = samples(metrics.text)
    pool = (("pool", "inference"), ("pool_namespace", "runpod"))
    assert got[("runpod_pool_members", (("phase", "Ready"), *pool))] == 2
    assert got[("runpod_pool_members", (("phase", "Warming"), *pool))] == 0
    assert got[("runpod_pool_ready", pool)] == 2
    assert got[("runpod_pool_desired", pool)] == 2
    assert got[("runpod_pool_desired_min", pool)] == 2
    assert got[("runpod_pool_cost_per_hour", pool)] == pytest.approx(1.38)
    assert got[("runpod_pool_condition", (*pool, ("type", "CapacityUnavailable")))] == 0
    actions = (("action", "create"), ("outcome", "created"), *pool)
    assert got[("runpod_pool_actions_total", actions)] == 2
    calls = (("operation", "listPods"), ("outcome", "ok"))
    assert got[("runpod_pool_runpod_api_calls_total", calls)] == 10
    assert got[("runpod_pool_reconcile_seconds_count", pool)] == 10
    assert ("runpod_pool_leader", ()) in got

    assert sd.status_code == 200
    assert sd.headers["content-type"] == "application/json"
    assert sd.json() == [
        {
            "targets": [f"inference.runpod.svc:{m.slot}"],
            "labels": {"runpod_pod": m.pod_id, "slot": str(m.slot), "datacenter": m.datacenter},
        }
        for m in wired
    ]
    assert unknown.status_code == 404
    assert unknown.json() == {"error": "no RunPodPool 'nope' in namespace runpod"}
    assert (health.status_code, health.text) == (200, "ok\n")
    assert post.status_code == 405


def test_sd_uses_the_pools_nginx_service_and_lists_only_wired_members() -> None:
    status = PoolStatus(
        members=(
            MemberRecord(pod_id="p1", name="n1", phase=Phase.READY, since=NOW, slot=8082),
            MemberRecord(pod_id="p2", name="n2", phase=Phase.WARMING, since=NOW),
            MemberRecord(pod_id="p3", name="n3", phase=Phase.FLAGGED, since=NOW, slot=8081),
        )
    )
    pool = {
        "metadata": {"name": "batch", "namespace": "gpu"},
        "spec": {"nginx": {"service": "batch-lb"}},
        "status": status.stored(),
    }

    groups = sd_groups(pool, namespace="elsewhere")

    assert [g["targets"] for g in groups] == [["batch-lb.gpu.svc:8081"], ["batch-lb.gpu.svc:8082"]]
    assert [g["labels"]["runpod_pod"] for g in groups] == ["p3", "p1"]
    assert groups[0]["labels"]["datacenter"] == ""


def test_healthz_turns_503_with_the_reason_when_the_loop_stalls() -> None:
    """On virtual time, the app called in-process (the HTTP server itself is covered by the
    test above): the loop's progress is measured on the loop's clock, so a fixed wait is
    exact here and no loaded machine can stretch or shrink it."""

    async def main(clock: VirtualClock) -> tuple[httpx.Response, httpx.Response]:
        kube = MemoryKubeApi(KubeSettings(namespace="runpod"), clock=clock)
        stalled = asyncio.Event()

        async def list_pools() -> list[dict[str, Any]]:
            if stalled.is_set():
                await asyncio.Event().wait()  # the API server stopped answering, say
            return []

        kube.list_pools = list_pools  # type: ignore[method-assign]
        runpod = RunPodClient(api_key="k", base_url="http://127.0.0.1:9")
        http = httpx.AsyncClient()
        reconciler = PoolReconciler(
            kube=kube,
            executor=Executor(runpod=runpod, kube=kube),
            prober=Prober(client=PodHttpClient()),
            prometheus=PrometheusClient(base_url=None, client=http),
            clock=clock,
        )
        loop = ControllerLoop(
            kube=kube,
            runpod=runpod,
            reconciler=reconciler,
            clock=clock,
            interval=0.1,
            stall_after=0.5,
        )
        api = HttpApi(registry=CollectorRegistry(), health=loop.health, kube=kube)
        stop = asyncio.Event()
        running = asyncio.create_task(loop.run(stop=stop))
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://rpp") as client:
            await asyncio.sleep(0.3)  # three loops of 0.1 s have completed
            before = await client.get("/healthz")
            stalled.set()
            await asyncio.sleep(1.0)  # the loop under way is stuck for twice what is allowed
            after = await client.get("/healthz")
        stop.set()
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await runpod.aclose()
        await http.aclose()
        return before, after

    before, after = run_virtual(main)
    assert (before.status_code, before.text) == (200, "ok\n")
    assert after.status_code == 503
    assert after.text.startswith("unhealthy: the reconcile loop has not completed for ")
    assert "(interval 0.1s, allowed 0.5s)" in after.text


ALERTS = {
    "short": "max by (pool) (runpod_pool_desired_min) - max by (pool) (runpod_pool_ready) > 0",
    "notice": 'max by (pool) (runpod_pool_condition{type="HostNotice"}) > 0',
    "capacity": 'max by (pool) (runpod_pool_condition{type="CapacityUnavailable"}) > 0',
}


def test_the_seeds_alerts_fire_for_the_troubled_pool_and_prometheus_reads_the_sd_feed(
    prometheus_binary: str, tmp_path: Path
) -> None:
    registry = CollectorRegistry()
    metrics = PoolMetrics(registry)
    troubled = PoolStatus(ready=1, desired=2).with_condition(
        type="HostNotice", status="True", reason="MachineNotice", message="m", now=NOW
    )
    troubled = troubled.with_condition(
        type="CapacityUnavailable", status="True", reason="NoStock", message="m", now=NOW
    )
    metrics.report(("runpod", "inference"), troubled, desired_min=2)
    metrics.report(("runpod", "batch"), PoolStatus(ready=2, desired=2), desired_min=2)
    kube = MemoryKubeApi(KubeSettings(namespace="runpod"), clock=SystemClock())
    stored = kube.apply_pool(manifest("inference"))
    wired = PoolStatus(
        members=(
            MemberRecord(
                pod_id="pod1",
                name="n1",
                phase=Phase.READY,
                since=NOW,
                slot=8081,
                datacenter="EU-RO-1",
            ),
            MemberRecord(
                pod_id="pod2",
                name="n2",
                phase=Phase.READY,
                since=NOW,
                slot=8082,
                datacenter="EU-SE-1",
            ),
        )
    )
    version = stored["metadata"]["resourceVersion"]
    asyncio.run(
        kube.replace_pool_status("inference", status=wired.stored(), resource_version=version)
    )
    api = HttpApi(registry=registry, health=lambda: None, kube=kube)

    with ServerThread([api]) as (port,):
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": "controller",
                    "scrape_interval": "1s",
                    "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
                },
                {
                    "job_name": "inference-pods",
                    "http_sd_configs": [
                        {"url": f"http://127.0.0.1:{port}/sd/inference", "refresh_interval": "1s"}
                    ],
                },
            ],
        }
        with running_prometheus(binary=prometheus_binary, workdir=tmp_path, config=config) as p:
            fired = wait_for_alerts(p.url)
            targets = wait_for_targets(p.url, job="inference-pods", count=2)

    assert fired == {name: ["inference"] for name in ALERTS}
    assert targets == [
        ("inference.runpod.svc:8081", "pod1", "8081", "EU-RO-1"),
        ("inference.runpod.svc:8082", "pod2", "8082", "EU-SE-1"),
    ]


def wait_for_targets(
    url: str, *, job: str, count: int, timeout_s: float = 20.0
) -> list[tuple[str, ...]]:
    """The targets Prometheus discovered for `job`, with the labels it kept."""
    deadline = time.monotonic() + timeout_s
    while True:
        body = httpx.get(f"{url}/api/v1/targets", params={"state": "active"}, timeout=5).json()
        found: list[tuple[str, ...]] = sorted(
            (
                t["labels"]["instance"],
                t["labels"]["runpod_pod"],
                t["labels"]["slot"],
                t["labels"]["datacenter"],
            )
            for t in body["data"]["activeTargets"]
            if t["labels"].get("job") == job
        )
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def wait_for_alerts(url: str, timeout_s: float = 20.0) -> dict[str, list[str]]:
    deadline = time.monotonic() + timeout_s
    while True:
        fired = {}
        for name, expr in ALERTS.items():
            body = httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=5).json()
            fired[name] = sorted(r["metric"]["pool"] for r in body["data"]["result"])
        if all(fired.values()) or time.monotonic() > deadline:
            return fired
        time.sleep(0.5)
