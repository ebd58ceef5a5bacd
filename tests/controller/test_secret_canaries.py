"""Canary secrets never leave `rpp run`: not in its log, status, Events or /metrics.

Issue 15 saw RunPod's refusal detail repeat the env it was sent, and the detail land
verbatim in the log, status.history, UpdateFailed and an Event, `METRICS_TOKEN=...` and
`HF_TOKEN=...` included. Here `rpp run` runs as a real process (kmock for the cluster,
the fake RunPod over real HTTP), the pool's env Secret holds canaries (one with a quote,
a backslash and a non-ASCII letter, so it travels JSON-escaped too), the API key is a
canary, and the fake refuses every image update with `EchoingRefusal`: the refusal
quotes the whole update body, env and all. The pool adopts two running pods, rolls its
new image, and RunPod's echo reaches every output the controller writes.

Then every byte of every output is searched for every canary, in each spelling a text
can carry it (as is, JSON-escaped, URL-encoded): the process's stderr (every log
record), every request body the controller sent to the API server (status writes,
Events), the stored status and Events, and the /metrics text. Each output is also shown
to have carried the echo, scrubbed, so the absence of canaries is not a vacuous pass.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from rpp.adapters.redaction import MASK
from rpp.sim.cloud_api import CloudApi
from rpp.sim.faults import EchoingRefusal
from rpp.sim.localhttp import serve_local
from rpp.sim.proxy import ProxyApp, route_by_host
from tests import secret_forms
from tests.controller_kit import GPU, IMAGE, manifest
from tests.fixtures_rehearsal import NS, Rehearsal
from tests.kmock_strict import CONFIG_MAPS, POOLS, SECRETS, StrictKubernetesEmulator

pytestmark = pytest.mark.kmock(cls=StrictKubernetesEmulator)

API_KEY = "rpa_CANARYkey0000aaaa1111bbbb"
CANARIES = {
    "METRICS_TOKEN": "canary-metrics-token-7741",
    "HF_TOKEN": "hf_CANARYhuggingface5512",
    "DB_PASSWORD": 'canary-db-pa"ss\\wörd-9931',
}
NEW_IMAGE = "ghcr.io/example/inference:1.5.0"


def leaks(text: str) -> list[str]:
    return secret_forms.leaks(text, [API_KEY, *CANARIES.values()])


def seed(rehearsal: Rehearsal) -> None:
    kmock = rehearsal.kmock
    obj = manifest(
        "inference",
        replicas={"min": 2, "max": 2},
        image=NEW_IMAGE,
        drain={"period": "1s"},
    )
    obj["metadata"] = {"name": "inference"}
    kmock.seed(POOLS, NS, obj)
    kmock.seed(CONFIG_MAPS, NS, {"metadata": {"name": "inference-nginx-slots"}})
    data = {k: base64.b64encode(v.encode()).decode() for k, v in CANARIES.items()}
    kmock.seed(SECRETS, NS, {"metadata": {"name": "inference-env"}, "data": data})
    for suffix in ("aa1", "bb2"):  # running on the old image: the pool rolls them
        rehearsal.cloud.add_pod(
            name=f"rpp-inference-{suffix}",
            image=IMAGE,
            gpu_type=GPU,
            datacenter="EU-RO-1",
            env={"METRICS_TOKEN": CANARIES["METRICS_TOKEN"]},
        )
    rehearsal.cloud.faults.always("updatePod", EchoingRefusal())


def condition(status: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions", []) if c["type"] == type_), None)


async def test_canary_secrets_reach_no_log_status_event_or_metric(rehearsal: Rehearsal) -> None:
    seed(rehearsal)
    app = route_by_host(CloudApi(rehearsal.cloud), ProxyApp(rehearsal.cloud))
    async with serve_local(app) as port:
        await rehearsal.start(f"http://127.0.0.1:{port}", api_key=API_KEY)
        await rehearsal.wait_healthy()
        async with asyncio.timeout(60):
            while True:
                failed = condition(rehearsal.pool().get("status") or {}, "UpdateFailed")
                if failed is not None and failed["status"] == "True":
                    break
                await asyncio.sleep(0.2)
        metrics = (await rehearsal.get("/metrics")).text
        code, _, output = await rehearsal.stop()

    kmock = rehearsal.kmock
    status = rehearsal.pool()["status"]
    events = [o.raw for o in kmock.objects.values() if o.raw.get("kind") == "Event"]
    sent = [r.text for r in list(kmock) if r.text]

    assert code == 0
    # RunPod's echo reached each output, scrubbed: these are not vacuous passes.
    refused = [h for h in status["history"] if h["outcome"] == "refused"]
    assert refused
    assert MASK in refused[0]["detail"]
    assert "Invalid input" in refused[0]["detail"]
    assert MASK in (condition(status, "UpdateFailed") or {})["message"]
    assert any(MASK in e["message"] for e in events if e["reason"] == "UpdateRefused")
    assert "Invalid input" in output
    assert MASK in output
    assert "runpod_pool_condition" in metrics
    # No canary, in any spelling, anywhere the controller wrote.
    assert leaks(output) == [], "log"
    assert leaks(json.dumps(status, ensure_ascii=False)) == [], "status"
    assert leaks(json.dumps(events, ensure_ascii=False)) == [], "Events"
    assert leaks("\n".join(sent)) == [], "requests to the API server"
    assert leaks(metrics) == [], "/metrics"
