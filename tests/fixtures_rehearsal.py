"""`rpp run` as a real process for tests: the `rehearsal` fixture and what it drives.

kmock (strict) serves the cluster on 127.0.0.1; the fake RunPod cloud (REST v2, GraphQL
and the proxy, with fake inference pods) is served by uvicorn; `rpp run` is started as
a subprocess configured only by environment variables and a kubeconfig, exactly as a
rehearsal runs it (docs/rehearsal.md). A test module using the fixture marks itself
`pytest.mark.kmock(cls=StrictKubernetesEmulator)`. tests/conftest.py imports the fixture
so every test module can use it.
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

from rpp.adapters.clock import SystemClock
from rpp.sim.asgi_io import Reply, Request
from rpp.sim.cloud import FakeCloud, FakePodInfo
from rpp.sim.inference import FakeInferencePod
from tests.controller_kit import GPU, IMAGE
from tests.kmock_strict import (
    CONFIG_MAPS,
    POOLS,
    SECRETS,
    StrictKubernetesEmulator,
    write_kubeconfig,
)

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

    async def start(
        self, runpod_url: str, *, api_key: str = API_KEY, key_file: Path | None = None
    ) -> None:
        """`rpp run` with the key in RUNPOD_API_KEY, or in RUNPOD_API_KEY_FILE's `key_file`."""
        kubeconfig = write_kubeconfig(self.tmp_path / "kubeconfig", server=str(self.kmock.url))
        key = (
            {"RUNPOD_API_KEY": api_key}
            if key_file is None
            else {"RUNPOD_API_KEY_FILE": str(key_file)}
        )
        env = {
            "PATH": os.environ.get("PATH", ""),
            "KUBECONFIG": str(kubeconfig),
            **key,
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
