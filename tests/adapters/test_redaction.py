"""The redactor and its sinks: what counts as secret, and each way out scrubbing it.

Covered: every spelling of a secret (as is, JSON-escaped, URL-encoded) is cut; values
too short to be secret, or shown by the pool's own object, are not; a pool's set is
replaced, then forgotten. The log filter scrubs the message, its arguments, a traceback
and the structured fields, and cuts a huge message with its size. The Kubernetes
wrapper scrubs the status's texts and never its ids, names or images, and an Event's
message. /metrics scrubs its text. A guard: every string field of the status model is
either a text the wrapper scrubs or an identifier it must leave alone, so a field added
later has to be placed.

The whole path, with `rpp run` as a real process, is tests/controller/test_secret_canaries.py.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any
from urllib.parse import quote

import httpx
from prometheus_client import CollectorRegistry, Gauge

from rpp.adapters.clock import SystemClock
from rpp.adapters.kube.api import KubeSettings
from rpp.adapters.kube.redacting import STATUS_TEXTS, RedactingKube
from rpp.adapters.redaction import MASK, RedactingFilter, Redactor
from rpp.controller.http_api import HttpApi
from rpp.model.status import PoolStatus
from rpp.sim.kube_memory import MemoryKubeApi
from tests.controller_kit import manifest

SECRET = 'hf_s3cr3t"value\\with/odd+chars ü'
NOW = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def redactor() -> Redactor:
    r = Redactor(always=("rpa_THE_API_KEY_0001",))
    r.remember("inference", [SECRET, "8080", "true", "inference"], public=("inference",))
    return r


def test_every_spelling_of_a_secret_is_cut() -> None:
    r = redactor()
    for spelling in (
        SECRET,
        json.dumps(SECRET)[1:-1],
        json.dumps(SECRET, ensure_ascii=False)[1:-1],
        quote(SECRET, safe=""),
        "rpa_THE_API_KEY_0001",
    ):
        assert r.scrub(f"RunPod said: {spelling}!") == f"RunPod said: {MASK}!"


def test_short_values_and_values_the_pool_shows_are_not_secrets() -> None:
    r = redactor()
    text = "pool inference listens on 8080, ready=true"
    assert r.scrub(text) == text


def test_a_pools_secrets_are_replaced_by_the_next_read() -> None:
    r = redactor()
    r.remember("inference", ["rotated-value-42"])
    assert r.scrub(f"{SECRET} rotated-value-42") == f"{SECRET} {MASK}"
    assert r.scrub("rpa_THE_API_KEY_0001") == MASK


def test_a_rotated_api_key_is_secret_beside_the_old_one_and_outlives_a_pools_next_read() -> None:
    r = redactor()
    r.keep_secret("rpa_THE_API_KEY_0002")
    r.remember("inference", ["rotated-value-42"])  # a pool's set replaced: the keys stay

    text = "old rpa_THE_API_KEY_0001, new rpa_THE_API_KEY_0002"
    assert r.scrub(text) == f"old {MASK}, new {MASK}"
    assert r.scrub(quote("rpa_THE_API_KEY_0002", safe="")) == MASK


def test_a_status_text_scrubbed_before_a_secret_was_known_is_scrubbed_again_after() -> None:
    r = redactor()
    status = {"conditions": [{"message": "RunPod said late-secret-77", "type": "X"}]}
    assert r.scrub_texts(status, fields=STATUS_TEXTS) is status  # nothing to cut: not copied
    r.remember("other", ["late-secret-77"])
    scrubbed = r.scrub_texts(status, fields=STATUS_TEXTS)
    assert scrubbed == {"conditions": [{"message": f"RunPod said {MASK}", "type": "X"}]}
    assert status["conditions"][0]["message"] == "RunPod said late-secret-77"  # not in place


def test_the_log_filter_scrubs_message_arguments_traceback_and_fields_and_cuts_long_ones() -> None:
    handler_filter = RedactingFilter(redactor(), limit=200)
    try:
        raise ValueError(f"bad token {SECRET}")
    except ValueError:
        import sys

        exc_info = sys.exc_info()
    record = logging.LogRecord(
        "rpp.act", logging.WARNING, __file__, 1, "refused: %s", (SECRET,), exc_info
    )
    record.pod = SECRET
    assert handler_filter.filter(record)
    text = logging.Formatter().format(record)
    assert SECRET not in text
    assert text.count(MASK) >= 2
    assert record.__dict__["pod"] == MASK

    long = logging.LogRecord("rpp", logging.INFO, __file__, 1, "x" * 5000, None, None)
    handler_filter.filter(long)
    assert long.getMessage().endswith("(4,800 more characters not shown)")
    assert len(long.getMessage()) < 300


def test_the_status_field_list_places_every_string_field_of_the_status_model() -> None:
    identifiers = {
        "action", "canary", "cloud", "datacenter", "datacenters", "drainReason",
        "flaggedRule", "fromImage", "gpuType", "gpuTypes", "image", "judgedBy", "mode",
        "name", "outcome", "phase", "pod", "podId", "pods", "reason", "replacedBy",
        "replacementFor", "result", "status", "step", "toImage", "type", "updating", "writer",
    }  # fmt: skip
    schema = PoolStatus.model_json_schema(by_alias=True)
    defs = schema.get("$defs", {})
    found: set[str] = set()

    def walk(node: dict[str, Any], name: str | None) -> None:
        if "$ref" in node:
            walk(defs[node["$ref"].rsplit("/", 1)[-1]], name)
            return
        for option in node.get("anyOf", []):
            walk(option, name)
        if node.get("type") == "string" and node.get("format") != "date-time" and name:
            found.add(name)
        for key, sub in node.get("properties", {}).items():
            walk(sub, key)
        if isinstance(node.get("items"), dict):
            walk(node["items"], name)

    walk(schema, None)
    unplaced = found - STATUS_TEXTS - identifiers
    assert not unplaced, f"place each in STATUS_TEXTS (rpp/adapters/kube/redacting.py): {unplaced}"
    assert not STATUS_TEXTS & identifiers


async def test_the_kubernetes_wrapper_scrubs_status_texts_and_event_messages_only() -> None:
    memory = MemoryKubeApi(KubeSettings(namespace="runpod"), clock=SystemClock())
    obj = memory.apply_pool(manifest("inference"))
    kube = RedactingKube(memory, redactor())
    status = {
        "members": [
            {
                "podId": "abc123",
                "image": f"img:{SECRET}",
                "lastProbe": {"error": f"probe said {SECRET}"},
                "flaggedReason": f"because {SECRET}",
            }
        ],
        "history": [{"action": "update", "detail": f"Invalid input: {json.dumps(SECRET)}"}],
        "conditions": [{"type": "UpdateFailed", "message": f"RunPod: {SECRET}"}],
    }
    version = obj["metadata"]["resourceVersion"]
    await kube.replace_pool_status("inference", status=status, resource_version=version)
    await kube.emit_event(obj, type_="Warning", reason="X", message=f"echo {SECRET}", now=NOW)

    stored = memory.pool("inference")["status"]
    member = stored["members"][0]
    assert member["image"] == f"img:{SECRET}", "an identifier is never rewritten"
    assert member["lastProbe"]["error"] == f"probe said {MASK}"
    assert member["flaggedReason"] == f"because {MASK}"
    assert stored["history"][0]["detail"] == f'Invalid input: "{MASK}"'
    assert stored["conditions"][0]["message"] == f"RunPod: {MASK}"
    assert [e["message"] for e in memory.events] == [f"echo {MASK}"]


async def test_metrics_text_is_scrubbed() -> None:
    registry = CollectorRegistry()
    Gauge("leaky", "a label that should never carry one", ["x"], registry=registry).labels(
        x=SECRET
    ).set(1)
    memory = MemoryKubeApi(KubeSettings(namespace="runpod"), clock=SystemClock())
    api = HttpApi(registry=registry, health=lambda: None, kube=memory, redactor=redactor())
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=api), base_url="http://controller"
    ) as client:
        answer = await client.get("/metrics", headers={"accept-encoding": "gzip"})
    assert answer.status_code == 200
    assert "leaky{" in answer.text
    assert SECRET not in answer.text
    assert json.dumps(SECRET)[1:-1] not in answer.text
    assert MASK in answer.text
