"""Shared pieces of the tests that talk to a Kubernetes API over HTTP on 127.0.0.1.

Two servers: kmock, made strict by tests/kmock_strict.py, under the real adapter
(tests/adapters/kube/test_kube_real.py, tests/adapters/kube/test_kube_server_ways.py), whose waits
run on a `Stopwatch` so that a grace of seconds passes at once; and the stand-in,
rpp/sim/kube_standin.py, run as the rig and the fleet benchmark run it: its own process,
its port on its first stdout line (tests/sim/test_kube_standin.py,
tests/commands/test_nginx_reloader_api.py). tests/conftest.py imports the fixtures.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from rpp.adapters.kube.api import KubeSettings
from tests.kmock_strict import StrictKubernetesEmulator
from tests.stopwatch import Stopwatch

if TYPE_CHECKING:
    from rpp.adapters.kube.real import RealKubeApi

NS = "runpod"
SETTINGS = KubeSettings(namespace=NS, request_timeout=5.0)
TOKEN = "s3cret-bearer-token"
"""The bearer token the `kube` fixture's adapter sends."""


def pool_manifest(name: str = "inference", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "runpodpool.ownego.com/v1alpha1",
        "kind": "RunPodPool",
        "metadata": {"name": name},
        "spec": {"templateId": "tpl", **spec},
    }


@pytest.fixture
def stopwatch() -> Stopwatch:
    return Stopwatch()


@pytest.fixture
async def kube(
    kmock: StrictKubernetesEmulator, stopwatch: Stopwatch
) -> AsyncIterator[RealKubeApi]:
    """The real adapter on the module's kmock, in namespace runpod, sending TOKEN."""
    # Imported here, not with the module: conftest imports this module for every test,
    # and the adapter brings the whole kubernetes client.
    from rpp.adapters.kube.real import RealKubeApi

    api = RealKubeApi.for_host(
        host=str(kmock.url), settings=SETTINGS, token=TOKEN, patience=stopwatch.patience()
    )
    async with api:
        yield api


@pytest.fixture
def standin() -> Iterator[str]:
    """The base URL of a Kubernetes API stand-in started for this test."""
    command = [sys.executable, "-m", "rpp.sim.kube_standin", "--port", "0"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            assert first.startswith("listening on "), first
            yield f"http://127.0.0.1:{first.split()[-1]}"
        finally:
            process.terminate()
            process.wait(timeout=30)
