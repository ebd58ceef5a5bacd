"""Helpers for the RunPod client and fake-cloud tests: a stocked cloud, a client wired
to it in-process with short deadlines, a tiny pod server, and `rpp fake-runpod` run as
a real subprocess for the over-HTTP tests."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
from prometheus_client import CollectorRegistry

from rpp.adapters.clock import ManualClock
from rpp.adapters.runpod.client import RunPodClient
from rpp.sim.asgi_io import Reply, Request
from rpp.sim.cloud import FakeCloud, FakePodInfo
from rpp.sim.cloud_api import CloudApi

RTX4090 = "NVIDIA GeForce RTX 4090"
L40S = "NVIDIA L40S"
A6000 = "NVIDIA RTX A6000"

# Short enough for a fast suite, long enough that a loaded CI box does not flake.
FAST: dict[str, Any] = {
    "connect_timeout": 1.0,
    "read_timeout": 1.0,
    "retry_deadline": 1.5,
    "backoff_initial": 0.01,
    "backoff_max": 0.05,
}


def stocked_cloud(clock: ManualClock | None = None, **kwargs: Any) -> FakeCloud:
    """Two datacenters, two GPU types, SECURE cloud, plenty of stock."""
    cloud = FakeCloud(clock=clock or ManualClock(), **kwargs)
    cloud.set_stock("EU-RO-1", RTX4090, "SECURE", 4, 0.69)
    cloud.set_stock("EU-SE-1", RTX4090, "SECURE", 4, 0.74)
    cloud.set_stock("EU-SE-1", L40S, "SECURE", 8, 0.86)
    return cloud


def client_for(
    cloud: FakeCloud,
    *,
    api_key: str = "test-key",
    registry: CollectorRegistry | None = None,
    **overrides: Any,
) -> RunPodClient:
    """The real client, talking to the fake through httpx's in-process ASGI transport."""
    settings = {**FAST, **overrides}
    return RunPodClient(
        api_key=api_key,
        transport=httpx.ASGITransport(app=CloudApi(cloud)),
        registry=registry or CollectorRegistry(),
        **settings,
    )


class TinyPodServer:
    """A pod's service for tests: answers `ok <pod id>`, records restarts and stops."""

    def __init__(self, info: FakePodInfo, *, delay_s: float = 0.0) -> None:
        self.info = info
        self.delay_s = delay_s
        self.restarts: list[dt.datetime] = []
        self.stopped = False
        self.serving = True
        self.refuse = False

    @property
    def is_serving(self) -> bool:
        return self.serving and not self.stopped

    def restart(self, now: dt.datetime) -> None:
        self.restarts.append(now)

    def stop(self) -> None:
        self.stopped = True

    def run_image(self, behaviour: object) -> None:
        self.behaviour = behaviour

    async def respond(self, request: Request) -> Reply:
        import asyncio

        if self.refuse:
            raise ConnectionRefusedError("nothing listens on the port")
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        body = f"ok {self.info.pod_id} {request.path} image={self.info.image}".encode()
        return Reply(200, body, content_type="text/plain")


class ServerFarm:
    """A `pod_server_factory` that keeps every TinyPodServer it made, by pod id."""

    def __init__(self, *, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.servers: dict[str, TinyPodServer] = {}

    def __call__(self, info: FakePodInfo) -> TinyPodServer:
        server = TinyPodServer(info, delay_s=self.delay_s)
        self.servers[info.pod_id] = server
        return server


class FakeRunPodProcess:
    """`rpp fake-runpod --port 0` as a subprocess; `url` is the base URL it bound."""

    def __init__(self, *extra: str) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rpp", "fake-runpod", "--port", "0", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        if "listening on" not in first:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=5)
            raise RuntimeError(f"rpp fake-runpod did not start: {first!r} {err!r}")
        self.url = first.rsplit(" ", 1)[1].strip()

    def control(self, method: str, path: str, payload: Any = None) -> Any:
        response = httpx.request(method, f"{self.url}/_fake/{path}", json=payload, timeout=5)
        assert response.status_code == 200, response.text
        return response.json()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()


def running_fake_runpod(*extra: str) -> Iterator[FakeRunPodProcess]:
    """Generator body for a fixture: start the CLI, yield it, stop it."""
    process = FakeRunPodProcess(*extra)
    try:
        yield process
    finally:
        process.stop()
