"""rpp run loads the Kubernetes client's few classes it uses, and nothing is lost by it.

Each case runs in a fresh interpreter: what is imported is process-wide.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

ADAPTER_IMPORTS = """
from rpp.adapters.kube import light_import
installed = light_import.install()
from rpp.adapters.kube.connect import load_cluster_access
from rpp.adapters.kube.real import RealKubeApi
from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.configuration import Configuration
import kubernetes.aio.config
"""


def run(code: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_the_adapter_loads_no_generated_api_or_model_class() -> None:
    out = run(
        ADAPTER_IMPORTS
        + """
import asyncio, json, sys
async def use():
    # The client as rpp run builds it, and closed: its session is made on the loop.
    client = ApiClient(Configuration(host="http://127.0.0.1:1"))
    await client.close()
asyncio.run(use())
loaded = [m for m in sys.modules if m.startswith("kubernetes")]
print(json.dumps({"installed": installed, "loaded": loaded}))
"""
    )
    assert out["installed"] is True
    loaded = set(out["loaded"])
    assert "kubernetes.aio.client.api_client" in loaded
    assert not any(".models." in m or ".api." in m for m in loaded), sorted(loaded)
    assert "kubernetes.client" not in loaded  # the synchronous client, all of it
    assert len(loaded) < 40


def test_every_class_of_the_client_is_still_there_when_asked_for() -> None:
    out = run(
        ADAPTER_IMPORTS
        + """
import json
import kubernetes
from kubernetes.aio import client
from kubernetes.aio.client.models import V1Pod
from kubernetes.aio.client import ApiClient as Again
api = client.CoreV1Api
pod = client.V1Pod(metadata=client.V1ObjectMeta(name="p"))
print(json.dumps({
    "installed": installed,
    "api": api.__name__,
    "pod": pod.metadata.name,
    "same_model": V1Pod is client.V1Pod,
    "same_client": Again is ApiClient,
    "sync": kubernetes.client.V1Pod.__module__,
    "version": kubernetes.aio.__version__,
}))
"""
    )
    assert out == {
        "installed": True,
        "api": "CoreV1Api",
        "pod": "p",
        "same_model": True,
        "same_client": True,
        "sync": "kubernetes.client.models.v1_pod",
        "version": out["version"],
    }
    assert out["version"].startswith("37.")  # the layout this module was written against


def test_the_client_deserializes_a_model_by_name_after_install() -> None:
    # ApiClient finds a response's model class by name in kubernetes.aio.client.models.
    out = run(
        ADAPTER_IMPORTS
        + """
import json
client = ApiClient.__new__(ApiClient)
pod = client._ApiClient__deserialize({"metadata": {"name": "p"}}, "V1Pod")
print(json.dumps({"type": type(pod).__name__, "name": pod.metadata.name}))
"""
    )
    assert out == {"type": "V1Pod", "name": "p"}


def test_nothing_is_stood_in_for_once_kubernetes_is_imported() -> None:
    out = run(
        """
import json, sys
import kubernetes.aio.client
from rpp.adapters.kube import light_import
print(json.dumps({
    "installed": light_import.install(),
    "real": type(sys.modules["kubernetes.aio.client"].CoreV1Api).__name__,
}))
"""
    )
    assert out == {"installed": False, "real": "type"}
