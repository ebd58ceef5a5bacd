"""The simulator's controller scrubs secrets as `rpp run` does: output, Events, status.

The simulator builds its controller process with the function `rpp run` uses
(rpp/controller/assembly.py), so it has the same redactor and the same redacting
Kubernetes adapter. Here the world's secrets (the RunPod API key, the metrics token and
the other value of the pool's env Secret) come back from the fake RunPod in texts the
controller repeats: a listing whose pods carry the key in a field that does not read
(UnreadablePods quotes it), and image updates refused with the whole request body
quoted, env and all (`EchoingRefusal`, issue 15). No spelling of any secret may reach
the timeline (text or --json), an Event or the final status; each of them is also shown
to have carried the echo, scrubbed, so the absence is not a vacuous pass.
"""

from __future__ import annotations

import io
import json
from typing import Any

from rpp.adapters.redaction import MASK
from rpp.sim.run import Run, run_scenario
from rpp.sim.scenario import parse_scenario_text
from rpp.sim.world import API_KEY, HF_TOKEN, METRICS_TOKEN
from tests import secret_forms

SECRETS = (API_KEY, METRICS_TOKEN, HF_TOKEN)
KEY_ECHO = f"status 'key {MASK}' is not a status"
ENV_ECHO = f'"env":{{"METRICS_TOKEN":"{MASK}","HF_TOKEN":"{MASK}"}}'
GPU = "NVIDIA GeForce RTX 4090"
OLD, NEW = "ghcr.io/example/inference:1.4.2", "ghcr.io/example/inference:1.5.0"

SCENARIO = f"""
description: RunPod quotes the API key and the pods' env back.
duration: 10m
pool:
  apiVersion: runpodpool.ownego.com/v1alpha1
  kind: RunPodPool
  metadata: {{name: inference, namespace: runpod}}
  spec:
    dryRun: false
    templateId: tpl-inference
    image: {OLD}
    gpuTypes: [{GPU}]
    replicas: {{min: 2, max: 2}}
    datacenters: {{allow: [EU-RO-1, EU-SE-1]}}
    limits: {{maxPods: 4, maxHourlyCostUsd: 5.0, maxCreatesPerHour: 6, estimatedPodCostUsd: 0.7}}
    envFromSecret: inference-env
    metricsTokenKey: METRICS_TOKEN
cloud:
  seed: 16
  bootTime: 2m
  stock:
    - {{datacenter: EU-RO-1, gpuType: {GPU}, count: 4, costPerHr: 0.69}}
    - {{datacenter: EU-SE-1, gpuType: {GPU}, count: 4, costPerHr: 0.69}}
  existing:
    - {{name: rpp-inference-a1, gpuType: {GPU}, datacenter: EU-RO-1, image: {OLD}}}
    - {{name: rpp-inference-b2, gpuType: {GPU}, datacenter: EU-SE-1, image: {OLD}}}
events:
  - {{at: 1m, do: fault, operation: listPods, times: 4,
      kind: {{kind: OddFields, set: {{status: "key {API_KEY}"}}}}}}
  - {{at: 5m, do: fault, operation: updatePod, kind: EchoingRefusal, times: 10}}
  - {{at: 5m, do: apply, patch: {{spec: {{image: {NEW}}}}}}}
"""


def leaks(text: str) -> list[str]:
    return secret_forms.leaks(text, SECRETS)


def simulate(*, as_json: bool) -> tuple[str, Run]:
    out = io.StringIO()
    scenario = parse_scenario_text(SCENARIO, source="echoes.yaml")
    run = run_scenario(scenario, out=out, as_json=as_json)
    return out.getvalue(), run


def final_status(run: Run) -> dict[str, Any]:
    end = run.timeline.records[-1]
    assert end["event"] == "end"
    status: dict[str, Any] = end["status"]
    return status


def test_no_secret_the_fake_runpod_echoes_reaches_the_timeline_events_or_status() -> None:
    text, run = simulate(as_json=False)
    lines, _ = simulate(as_json=True)
    events = {e["reason"]: e["message"] for e in run.events}
    status = final_status(run)

    assert leaks(text) == []
    assert leaks(lines) == []
    assert leaks(json.dumps(run.events, ensure_ascii=False)) == []
    assert leaks(json.dumps(status, ensure_ascii=False)) == []
    # Each output did carry the echoes, scrubbed: the key quoted by UnreadablePods, the
    # env quoted back by the refused update.
    assert KEY_ECHO in text
    assert ENV_ECHO in text
    assert KEY_ECHO in lines
    assert json.dumps(ENV_ECHO)[1:-1] in lines
    assert KEY_ECHO in events["UnreadablePods"]
    assert ENV_ECHO in events["UpdateFailed"]
    assert any(ENV_ECHO in entry.get("detail", "") for entry in status["history"])
