"""The Kubernetes API stand-in (rpp.sim.kube_standin.py), run as the rig and the fleet
benchmark run it: its own process, the port on its first line, plain HTTP on 127.0.0.1."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

POOLS = "/apis/runpodpool.ownego.com/v1alpha1/namespaces/ns/runpodpools"
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture
def api() -> Iterator[httpx.Client]:
    command = [sys.executable, "-m", "rpp.sim.kube_standin", "--port", "0"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            assert first.startswith("listening on "), first
            with httpx.Client(base_url=f"http://127.0.0.1:{first.split()[-1]}") as client:
                yield client
        finally:
            process.terminate()
            process.wait(timeout=30)


def test_a_merge_patch_merges_the_object_and_leaves_its_status_alone(api: httpx.Client) -> None:
    spec = {"replicas": {"min": 1, "max": 3}, "paused": True}
    created = api.post(POOLS, json={"metadata": {"name": "p"}, "spec": spec})
    assert created.status_code == 201
    assert api.put(f"{POOLS}/p/status", json={"status": {"ready": 1}}).status_code == 200

    patch = {
        "spec": {"replicas": {"max": 5}, "paused": None, "canary": {"bake": "10m", "of": None}},
        "status": {"ready": 9},
    }
    patched = api.patch(f"{POOLS}/p", json=patch, headers=MERGE).json()

    # RFC 7386: null deletes, maps merge, even inside a map the object did not have.
    assert patched["spec"] == {"replicas": {"min": 1, "max": 5}, "canary": {"bake": "10m"}}
    assert patched["status"] == {"ready": 1}  # only the status subresource writes it
    assert patched["metadata"]["generation"] == 2


def test_a_write_over_a_stale_resource_version_is_a_conflict(api: httpx.Client) -> None:
    created = api.post(POOLS, json={"metadata": {"name": "p"}, "spec": {"paused": False}}).json()
    stale = created["metadata"]["resourceVersion"]
    api.patch(f"{POOLS}/p", json={"spec": {"paused": True}}, headers=MERGE)

    again = {"metadata": {"resourceVersion": stale}, "spec": {"paused": False}}
    refused = api.patch(f"{POOLS}/p", json=again, headers=MERGE)

    assert refused.status_code == 409
    assert refused.json()["reason"] == "Conflict"
    assert api.get(f"{POOLS}/p").json()["spec"] == {"paused": True}
