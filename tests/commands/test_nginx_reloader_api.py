"""`rpp nginx-reloader` as a process against what a real API server does to a quiet watch.

Its slots ConfigMap changes rarely, so its watch resumes from old resourceVersions: on a real
API server (issue 24) every reconnect after an etcd compaction was answered 410 Gone, logged
at WARNING as `HTTP 410: Expired: too old resource version: 722 (819); retrying`, and a
restart's 403s were logged with advice to fix the Role. Here the API server is the
stand-in (rpp/sim/kube_standin.py, its own process on 127.0.0.1), which answers a too-old
resourceVersion as the API server's watch cache does, with an ERROR event carrying a 410
Status, sends bookmarks to watches that ask for them, refuses everything for a while after
a restart, and records each write's field manager. No nginx runs (the reloader writes its
files and waits for one) except in the last test, where a process that ignores SIGHUP plays
an nginx that never loads a config, so that the reloader reports it with an Event.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from rpp.adapters.nginx import FILES, SlotFiles
from tests.reloader_process import running_reloader

NS = "runpod"
NAME = "inference-nginx-slots"
MAPS = f"/api/v1/namespaces/{NS}/configmaps"
SOON = 30.0  # a bound for "it happens", not for how fast


@dataclass
class Reloader:
    """One `rpp nginx-reloader` process and the stand-in it watches."""

    api: httpx.AsyncClient
    files: SlotFiles
    process: asyncio.subprocess.Process

    async def put(self, data: dict[str, str], *, name: str = NAME) -> str:
        """Create or replace a ConfigMap as a human would; its new resourceVersion. Waits
        out a restart's refusals, as kubectl's retries would."""
        async with asyncio.timeout(SOON):
            while True:
                current = await self.api.get(f"{MAPS}/{name}")
                body = {"metadata": {"name": name}, "data": data}
                if current.status_code == 200:
                    answer = await self.api.put(f"{MAPS}/{name}", json=body)
                elif current.status_code == 404:
                    answer = await self.api.post(MAPS, json=body)
                else:
                    answer = current
                if answer.status_code < 300:
                    return str(answer.json()["metadata"]["resourceVersion"])
                await asyncio.sleep(0.2)

    async def written(self, version: str) -> None:
        """Until the reloader wrote that version into nginx's slot files."""
        async with asyncio.timeout(SOON):
            while self.files.written_version() != version:
                await asyncio.sleep(0.05)

    async def watches(self) -> list[dict[str, Any]]:
        return list((await self.api.get("/_standin/watches")).json())

    async def watching(self, count: int) -> list[dict[str, Any]]:
        """Until the reloader opened `count` watches in all; them."""
        async with asyncio.timeout(SOON):
            while len(seen := await self.watches()) < count:
                await asyncio.sleep(0.05)
        return seen

    async def control(self, what: str, **body: float) -> int:
        answer = await self.api.post(f"/_standin/{what}", json=body)
        return int(answer.json()["revision"])

    async def stop(self) -> list[dict[str, Any]]:
        """SIGTERM; its JSON log lines."""
        self.process.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(self.process.communicate(), timeout=SOON)
        assert self.process.returncode == 0, err.decode()
        return [json.loads(line) for line in err.decode().splitlines() if line.strip()]


@pytest.fixture
async def reloader(standin: str, tmp_path: Path) -> AsyncIterator[Reloader]:
    async with (
        httpx.AsyncClient(base_url=standin, timeout=10) as api,
        running_reloader(server=str(api.base_url), namespace=NS, workdir=tmp_path) as started,
    ):
        yield Reloader(api, started.files, started.process)


def slots(n: int) -> dict[str, str]:
    return dict.fromkeys(FILES, f"# version {n}\n")


async def test_a_compacted_resume_point_is_read_again_once_and_quietly(reloader: Reloader) -> None:
    first = await reloader.put(slots(1))
    await reloader.written(first)
    await reloader.watching(1)
    second = await reloader.put(slots(2))  # a change the open watch reports
    await reloader.written(second)
    # Another object moves the revision on, etcd compacts, the reloader's stream is cut:
    # it resumes from version `second`, which the API server no longer keeps.
    await reloader.put({}, name="unrelated")
    compacted = await reloader.control("compact")
    await reloader.control("end-watches")
    await reloader.watching(3)
    third = await reloader.put(slots(3))
    await reloader.written(third)
    logs = await reloader.stop()

    seen = await reloader.watches()
    assert [(w["resourceVersion"], w["answer"]) for w in seen] == [
        (None, "ok"),
        (second, "expired"),
        (None, "ok"),  # the current state, from a watch: its Role has no `list`
    ]
    assert all(w["bookmarks"] for w in seen)
    said = [(line["level"], line["message"]) for line in logs]
    assert [s for s in said if s[0] != "INFO"] == []
    assert (
        "INFO",
        f"watch of configmaps '{NAME}' in namespace {NS}: the API server no longer keeps "
        f"resourceVersion {second} (too old resource version: {second} ({compacted})); "
        "watching again from the current state",
    ) in said


async def test_a_bookmark_keeps_the_resume_point_fresh(reloader: Reloader) -> None:
    first = await reloader.put(slots(1))
    await reloader.written(first)
    await reloader.watching(1)
    await reloader.put({}, name="unrelated")  # the revision moves on, the slots do not
    bookmarked = await reloader.control("bookmark")
    await reloader.control("compact")
    await reloader.control("end-watches")
    second = await reloader.put(slots(2))
    await reloader.written(second)
    await reloader.stop()

    seen = await reloader.watches()
    assert [(w["resourceVersion"], w["answer"]) for w in seen] == [
        (None, "ok"),
        (str(bookmarked), "ok"),  # from the bookmark's version: nothing to read again
    ]


async def test_a_restart_of_the_api_server_is_waited_out_and_said_in_plain_words(
    reloader: Reloader,
) -> None:
    first = await reloader.put(slots(1))
    await reloader.written(first)
    await reloader.watching(1)
    await reloader.control("restart", forbidden_s=1.0, busy_s=0.5)
    second = await reloader.put(slots(2))  # once the API server takes writes again
    await reloader.written(second)
    logs = await reloader.stop()

    said = [(line["level"], line["message"]) for line in logs]
    assert [s for s in said if s[0] != "INFO"] == []
    assert not [m for _, m in said if "Role" in m or "examples/nginx.yaml" in m]
    refused = [m for _, m in said if "the API server refused (403)" in m]
    assert refused == [
        f"watch configmaps '{NAME}' in namespace {NS}: the API server refused (403); "
        "retrying for up to 10s, as an API server refuses everything for a few seconds "
        "after it starts"
    ]
    assert any(m.startswith("the Kubernetes API server answers again") for _, m in said)


async def test_the_event_of_a_rejected_config_is_written_under_the_reloaders_name(
    standin: str, tmp_path: Path
) -> None:
    ignores_reloads = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "import signal, time; signal.signal(signal.SIGHUP, signal.SIG_IGN); time.sleep(120)",
    )
    pid_file = tmp_path / "nginx.pid"
    pid_file.write_text(f"{ignores_reloads.pid}\n")
    try:
        async with (
            httpx.AsyncClient(base_url=standin, timeout=10) as api,
            running_reloader(
                server=str(api.base_url),
                namespace=NS,
                workdir=tmp_path,
                pid_file=pid_file,
                extra=("--reload-timeout", "0.2"),
            ) as started,
        ):
            reloader = Reloader(api, started.files, started.process)
            await reloader.put(slots(1))
            async with asyncio.timeout(SOON):
                while not (
                    events := (await api.get(f"/api/v1/namespaces/{NS}/events")).json()["items"]
                ):
                    await asyncio.sleep(0.1)
            await reloader.stop()
    finally:
        ignores_reloads.kill()
        await ignores_reloads.wait()

    [event] = events
    assert event["reason"] == "NginxConfigRejected"
    managers = [entry["manager"] for entry in event["metadata"]["managedFields"]]
    assert managers == ["rpp-nginx-reloader"]
