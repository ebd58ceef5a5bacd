"""The Kubernetes API stand-in (rpp.sim.kube_standin.py), run as the rig and the fleet
benchmark run it: its own process, the port on its first line, plain HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

POOLS = "/apis/runpodpool.ownego.com/v1alpha1/namespaces/ns/runpodpools"
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture
def api(standin: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=standin) as client:
        yield client


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


MAPS = "/api/v1/namespaces/ns/configmaps"


def test_each_write_records_its_field_manager_as_the_api_server_does(api: httpx.Client) -> None:
    named = api.post(f"{MAPS}?fieldManager=rpp-nginx-reloader", json={"metadata": {"name": "a"}})
    # No fieldManager: the API server names the writer after its User-Agent, up to the "/".
    client = {"User-Agent": "OpenAPI-Generator/37.0.2/python"}
    unnamed = api.post(MAPS, json={"metadata": {"name": "b"}}, headers=client)
    api.post(f"{POOLS}?fieldManager=ctl", json={"metadata": {"name": "p"}, "spec": {}})
    status = api.put(f"{POOLS}/p/status?fieldManager=ctl", json={"status": {"ready": 1}})
    too_long = api.post(f"{MAPS}?fieldManager={'x' * 129}", json={"metadata": {"name": "c"}})

    def managers(obj: dict[str, Any]) -> list[tuple[str, str | None]]:
        return [(f["manager"], f.get("subresource")) for f in obj["metadata"]["managedFields"]]

    assert managers(named.json()) == [("rpp-nginx-reloader", None)]
    assert managers(unnamed.json()) == [("OpenAPI-Generator", None)]
    assert managers(status.json()) == [("ctl", None), ("ctl", "status")]
    assert too_long.status_code == 422


def watch_lines(api: httpx.Client, query: str) -> list[dict[str, Any]]:
    with api.stream("GET", f"{MAPS}?watch=true&timeoutSeconds=1&{query}") as stream:
        return [json.loads(line) for line in stream.iter_lines() if line]


def test_a_watch_from_a_compacted_version_is_answered_410_in_the_stream(api: httpx.Client) -> None:
    first = api.post(MAPS, json={"metadata": {"name": "a"}}).json()["metadata"]["resourceVersion"]
    api.put(f"{MAPS}/a", json={"metadata": {"name": "a"}, "data": {"k": "v"}})
    kept = watch_lines(api, f"resourceVersion={first}")
    api.post("/_standin/compact")
    gone = watch_lines(api, f"resourceVersion={first}")

    assert [e["type"] for e in kept] == ["MODIFIED"]  # what changed after it, no more
    [error] = gone
    assert error["type"] == "ERROR"
    assert error["object"] == {
        "kind": "Status",
        "apiVersion": "v1",
        "code": 410,
        "status": "Failure",
        "message": f"too old resource version: {first} ({int(first) + 1})",
        "reason": "Expired",
    }
    assert [w["answer"] for w in api.get("/_standin/watches").json()] == ["ok", "expired"]


def test_bookmarks_go_only_to_watches_that_ask_and_end_them(api: httpx.Client) -> None:
    api.post(MAPS, json={"metadata": {"name": "a"}})
    asked = watch_lines(api, "allowWatchBookmarks=true")
    plain = watch_lines(api, "")

    assert [e["type"] for e in asked] == ["ADDED", "BOOKMARK"]  # the last before it ends
    assert asked[-1]["object"] == {"metadata": {"resourceVersion": "1"}}
    assert [e["type"] for e in plain] == ["ADDED"]


def test_a_restart_refuses_then_asks_to_wait_then_answers(api: httpx.Client) -> None:
    api.post("/_standin/restart", json={"forbidden_s": 0.3, "busy_s": 0.3})
    answers: list[tuple[int, str | None]] = []
    while not answers or answers[-1][0] != 200:
        got = api.get(POOLS)
        answers.append((got.status_code, got.headers.get("Retry-After")))
        time.sleep(0.05)

    seen = [answer for n, answer in enumerate(answers) if n == 0 or answers[n - 1] != answer]
    assert seen == [(403, None), (429, "1"), (200, None)]
