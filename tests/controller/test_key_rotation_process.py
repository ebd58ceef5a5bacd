"""`rpp run` as a real process with its RunPod key in a mounted file, rotated while it runs.

The key file is laid out as the kubelet mounts a Secret (the file a link through `..data`,
which an update swaps); the fake RunPod accepts only the key of the moment, so a process
still sending the old key would see 401 and its pool NotActing RunPodKeyRefused.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from rpp.sim.cloud_api import CloudApi
from rpp.sim.localhttp import serve_local
from rpp.sim.proxy import ProxyApp, route_by_host
from tests.controller_kit import manifest
from tests.fixtures_rehearsal import Rehearsal
from tests.kmock_strict import StrictKubernetesEmulator

pytestmark = pytest.mark.kmock(cls=StrictKubernetesEmulator)

OLD = "rpa_process_OLD_key_0001"
NEW = "rpa_process_NEW_key_0002"


def mounted_secret(root: Path, key: str) -> Path:
    """A Secret volume as the kubelet writes it; returns the key file's path."""
    root.mkdir()
    (root / "v1").mkdir()
    (root / "v1" / "RUNPOD_API_KEY").write_text(key)
    os.symlink("v1", root / "..data")
    os.symlink("..data/RUNPOD_API_KEY", root / "RUNPOD_API_KEY")
    return root / "RUNPOD_API_KEY"


def update_secret(root: Path, key: str) -> None:
    """The kubelet's update: new files beside the old, then `..data` swapped at once."""
    (root / "v2").mkdir()
    (root / "v2" / "RUNPOD_API_KEY").write_text(key + "\n")
    os.symlink("v2", root / "..data_tmp")
    os.replace(root / "..data_tmp", root / "..data")


async def listings_after(rehearsal: Rehearsal, seen: int, more: int) -> None:
    async with asyncio.timeout(30):
        while [c.operation for c in rehearsal.cloud.calls[seen:]].count("listPods") < more:
            await asyncio.sleep(0.1)


async def test_rpp_run_sends_a_rotated_key_from_its_file_without_a_restart(
    rehearsal: Rehearsal, tmp_path: Path
) -> None:
    root = tmp_path / "runpod-secret"
    key_file = mounted_secret(root, OLD)
    rehearsal.cloud.accepted_keys = frozenset({OLD})
    obj = manifest("inference", replicas={"min": 1, "max": 1})
    obj["metadata"] = {"name": "inference"}
    rehearsal.seed(obj)
    app = route_by_host(CloudApi(rehearsal.cloud), ProxyApp(rehearsal.cloud))
    async with serve_local(app) as port:
        await rehearsal.start(f"http://127.0.0.1:{port}", key_file=key_file)
        await rehearsal.wait_healthy()
        await listings_after(rehearsal, 0, 2)

        update_secret(root, NEW)
        rehearsal.cloud.accepted_keys = frozenset({NEW})  # the old key revoked at once
        await listings_after(rehearsal, len(rehearsal.cloud.calls), 3)
        conditions = {
            c["type"]: c for c in (rehearsal.pool().get("status") or {}).get("conditions", [])
        }
        code, logs, output = await rehearsal.stop()

    assert code == 0
    assert conditions.get("NotActing", {}).get("status") != "True", conditions.get("NotActing")
    messages = [line["message"] for line in logs]
    assert f"the RunPod key in RUNPOD_API_KEY_FILE={key_file} changed" in "\n".join(messages)
    assert any(f"the key from RUNPOD_API_KEY_FILE={key_file}" in m for m in messages)
    assert OLD not in output
    assert NEW not in output
