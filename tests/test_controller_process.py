"""`rpp run` as a real process: a Kubernetes API emulator, the fake RunPod, real HTTP.

kmock (strict) serves the cluster on 127.0.0.1; the fake RunPod cloud (REST v2, GraphQL
and the proxy, with fake inference pods) is served by uvicorn; `rpp run` is started as
a subprocess configured only by environment variables and a kubeconfig, exactly as a
rehearsal runs it (docs/rehearsal.md). Nothing here touches the real RunPod.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from rpp.adapters.clock import SystemClock
from rpp.controller.leader import LEASE_NAME
from rpp.sim.asgi_io import Reply, Request
from rpp.sim.cloud import FakeCloud, FakePodInfo
from rpp.sim.cloud_api import CloudApi
from rpp.sim.inference import FakeInferencePod
from rpp.sim.localhttp import serve_local
from rpp.sim.proxy import ProxyApp, route_by_host
from tests.controller_kit import GPU, IMAGE, manifest
from tests.kmock_strict import CONFIG_MAPS, LEASES, POOLS, SECRETS, StrictKubernetesEmulator

pytestmark = pytest.mark.kmock(cls=StrictKubernetesEmulator)

NS = "runpod"
API_KEY = "rp-test-SECRET-key-0123"
METRICS_TOKEN = "metrics-SECRET-token-4567"


class CountingPod:
    """A fake pod's service that also records when each request arrived."""

    def __init__(self, pod: FakeInferencePod) -> None:
        self.pod = pod
        self.arrived = asyncio.Event()

    @property
    def is_serving(self) -> bool:
        return self.pod.is_serving

    def restart(self, now: Any) -> None:
        self.pod.restart(now)

    def stop(self) -> None:
        self.pod.stop()

    def run_image(self, behaviour: Any) -> None:
        self.pod.run_image(behaviour)

    async def respond(self, request: Request) -> Reply:
        self.arrived.set()
        return await self.pod.respond(request)


class Rehearsal:
    """The cluster, the fake RunPod and one `rpp run` process."""

    def __init__(self, kmock: StrictKubernetesEmulator, tmp_path: Path) -> None:
        self.kmock = kmock
        self.tmp_path = tmp_path
        self.servers: dict[str, CountingPod] = {}
        self.cloud = FakeCloud(clock=SystemClock(), boot_time=0.0, pod_server_factory=self._pod)
        self.cloud.add_template("tpl-inference", image=IMAGE)
        self.cloud.set_stock("EU-RO-1", GPU, "SECURE", 4, cost_per_hr=0.69)
        self.process: asyncio.subprocess.Process | None = None
        self.listen = _free_port()
        self.health = _free_port()

    def _pod(self, info: FakePodInfo) -> CountingPod:
        pod = FakeInferencePod(
            pod_id=info.pod_id,
            clock=SystemClock(),
            process_start=info.started_at,
            metrics_token=info.env.get("METRICS_TOKEN"),
        )
        self.servers[info.pod_id] = CountingPod(pod)
        return self.servers[info.pod_id]

    def seed(self, pool: dict[str, Any]) -> None:
        self.kmock.seed(POOLS, NS, pool)
        self.kmock.seed(CONFIG_MAPS, NS, {"metadata": {"name": "inference-nginx-slots"}})
        token = base64.b64encode(METRICS_TOKEN.encode()).decode()
        data = {"METRICS_TOKEN": token}
        self.kmock.seed(SECRETS, NS, {"metadata": {"name": "inference-env"}, "data": data})

    async def start(self, runpod_url: str, *, api_key: str = API_KEY) -> None:
        kubeconfig = self.tmp_path / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "c", "cluster": {"server": str(self.kmock.url)}}],
                    "users": [{"name": "u", "user": {"token": "kube-token"}}],
                    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                    "current-context": "x",
                }
            )
        )
        env = {
            "PATH": os.environ.get("PATH", ""),
            "KUBECONFIG": str(kubeconfig),
            "RUNPOD_API_KEY": api_key,
            "NAMESPACE": NS,
            "RECONCILE_INTERVAL": "1",
            "LISTEN_ADDRESS": f"127.0.0.1:{self.listen}",
            "HEALTH_LISTEN_ADDRESS": f"127.0.0.1:{self.health}",
            "LOG_FORMAT": "json",
            "RUNPOD_API_URL": runpod_url,
            "RUNPOD_PROXY_URL": runpod_url,
            "POD_NAME": "rpp-test",
        }
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "rpp",
            "run",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )

    async def get(self, path: str, *, port: int | None = None) -> httpx.Response:
        async with httpx.AsyncClient(timeout=5) as client:
            return await client.get(f"http://127.0.0.1:{port or self.listen}{path}")

    async def wait_healthy(self, timeout: float = 20.0) -> None:
        async with asyncio.timeout(timeout):
            while True:
                try:
                    if (await self.get("/healthz")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)

    def pool(self) -> dict[str, Any]:
        return self.kmock.objects[POOLS, NS, "inference"].raw  # type: ignore[no-any-return]

    async def stop(self) -> tuple[int, list[dict[str, Any]], str]:
        """SIGTERM; the exit code, the JSON log lines, and all output."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(self.process.communicate(), timeout=30)
        text = out.decode() + err.decode()
        lines = [json.loads(line) for line in err.decode().splitlines() if line.strip()]
        assert self.process.returncode is not None
        return self.process.returncode, lines, text


@pytest.fixture
async def rehearsal(kmock: StrictKubernetesEmulator, tmp_path: Path) -> AsyncIterator[Rehearsal]:
    r = Rehearsal(kmock, tmp_path)
    yield r
    if r.process is not None and r.process.returncode is None:
        r.process.kill()
        await r.process.wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def pool_object(**spec: Any) -> dict[str, Any]:
    obj = manifest("inference", replicas={"min": 1, "max": 1}, **spec)
    obj["metadata"] = {"name": "inference"}
    return obj


async def test_rpp_run_reconciles_a_pool_serves_its_endpoints_and_exits_0_on_sigterm(
    rehearsal: Rehearsal,
) -> None:
    rehearsal.seed(pool_object())
    app = route_by_host(CloudApi(rehearsal.cloud), ProxyApp(rehearsal.cloud))
    async with serve_local(app) as port:
        await rehearsal.start(f"http://127.0.0.1:{port}")
        await rehearsal.wait_healthy()
        async with asyncio.timeout(30):
            while (rehearsal.pool().get("status") or {}).get("ready") != 1:
                await asyncio.sleep(0.2)
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
    assert values[("runpod_pool_ready", (("pool", "inference"),))] == 1
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
