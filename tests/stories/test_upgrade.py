"""Stories of upgrading from 0.2.x: the new controller takes over a pool an old one ran.

The pool, its pods and its slots are as 0.2.1 (RunPod REST v1) left them: a status in the
old shape (v1 field names on the member records, probe records of another shape, no Ready,
no finalizer), a slots ConfigMap the old chart created and Helm labels. The new controller
must never stop such a pool for good: it reads what it can, heals the rest from RunPod's
listing and the slots, keeps every pod serving, and adds what 0.3.0 brings (the finalizer,
Ready, its marks on the slots ConfigMap). docs/upgrading.md tells the same story.
"""

from __future__ import annotations

import json
from typing import Any

from rpp.controller.pool_writes import OLD_STATUS_ANNOTATION
from rpp.decide.nginx_slots import SlotTarget, render_slots
from rpp.model.spec import API_GROUP
from rpp.model.spec_load import load_spec
from tests.crd_admission import status_problems
from tests.stories.world_kit import GPU, Story, story

IMAGE = "ghcr.io/example/inference:1.4.2"
# Two pods the old controller created and wired, in two datacenters.
OLD_PODS = (("x1ab2cd3ef4gh5i", "rpp-inference-m3k9a", "EU-RO-1", 8081),
            ("y6jk7lm8no9pq0r", "rpp-inference-m3k9b", "EU-SE-1", 8082))  # fmt: skip


def status_0_2_1() -> dict[str, Any]:
    """A status as 0.2.1 wrote it: v1's field names (dataCenterId, gpuTypeId, imageName,
    machineId), its probe record ({ok, healthMs}), a free-text history outcome, no
    observedGeneration on conditions, and nothing 0.3.0 added."""
    members = [
        {
            "podId": pod_id,
            "name": name,
            "phase": "Ready",
            "since": "2026-10-02T08:00:00Z",
            "slot": slot,
            "dataCenterId": datacenter,
            "gpuTypeId": GPU,
            "imageName": IMAGE,
            "machineId": f"m-{pod_id[:6]}",
            "costPerHr": 0.69,
            "lastProbe": {"at": "2026-11-14T23:59:30Z", "ok": True, "healthMs": 84},
            "passStreak": 3,
        }
        for pod_id, name, datacenter, slot in OLD_PODS
    ]
    return {
        "mode": "Manage",
        "observedGeneration": 7,
        "desired": 2,
        "ready": 2,
        "costPerHour": 1.38,
        "planned": 0,
        "conditions": [
            {
                "type": "NotActing",
                "status": "False",
                "reason": "Acting",
                "message": "the pool has what it needs to act",
                "lastTransitionTime": "2026-10-02T07:58:00Z",
            }
        ],
        "members": members,
        "plannedActions": [],
        "history": [
            {
                "time": "2026-10-02T07:59:00Z",
                "action": "create",
                "pod": OLD_PODS[1][0],
                "outcome": "created via podFindAndDeployOnDemand",
            }
        ],
        "createLog": [],
        "datacenterReplacements": {},
        "backoff": {},
        "lastSyncedApi": "https://api.runpod.io/graphql",
    }


def old_install(s: Story) -> None:
    """What 0.2.1 leaves: the pods on RunPod, the chart's slots ConfigMap, the old status."""
    for pod_id, name, datacenter, _ in OLD_PODS:
        s.world.cloud.add_pod(
            name=name,
            image=IMAGE,
            gpu_type=GPU,
            datacenter=datacenter,
            env={"METRICS_TOKEN": "tok-123", "HF_TOKEN": "hf"},
            pod_id=pod_id,
        )
    spec, problems = load_spec("inference", s.manifest["spec"])
    assert spec is not None, problems
    slots = {slot: SlotTarget(pod_id, dc) for pod_id, _, dc, slot in OLD_PODS}
    helm = {"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/instance": "rpp"}
    s.world.kube.put_config_map(
        spec.nginx.slots_config_map,
        render_slots(pool="inference", spec=spec, slots=slots),
        labels=helm,
        annotations={"helm.sh/resource-policy": "keep", "meta.helm.sh/release-name": "rpp"},
    )


def test_a_status_written_by_0_2_1_is_read_and_the_pool_serves_on_without_a_pause() -> None:
    async def body(s: Story) -> None:
        old_install(s)
        await s.set_status(status_0_2_1())
        wired_before = s.wired()

        result = await s.loops(1)

        assert result.error is None  # read, not a stop
        status = s.status()
        members = {m.pod_id: m for m in status.members}
        assert set(members) == {pod_id for pod_id, *_ in OLD_PODS}
        assert {m.phase for m in members.values()} == {"Ready"}
        assert s.wired() == wired_before  # nginx never lost a pod
        # What the old names held is back, read from RunPod's listing.
        assert {m.datacenter for m in members.values()} == {"EU-RO-1", "EU-SE-1"}
        assert {m.gpu_type for m in members.values()} == {GPU}
        assert {m.image for m in members.values()} == {IMAGE}
        assert s.effects("create") == []
        assert s.effects("terminate") == []
        # What 0.3.0 adds: the finalizer, Ready, and its marks on the slots ConfigMap.
        finalizers = s.world.kube.pool(s.name)["metadata"].get("finalizers")
        assert finalizers == ["runpodpool.ownego.com/deletion-policy"]
        ready = status.condition("Ready")
        assert ready is not None
        assert (ready.status, ready.reason) == ("True", "PodsReady")
        assert status_problems(s.world.kube.pool(s.name)["status"]) == []
        await s.loops(5)
        assert s.effects("create") == []
        assert s.status().ready == 2

    story(body)


def test_a_status_0_3_0_cannot_read_is_rebuilt_and_the_pool_serves_on() -> None:
    """A field of the wrong type (0.2.1 wrote slots as text and v1's pod states as phases):
    as docs/upgrading.md says, the status is rebuilt from RunPod's listing and the slots
    in one loop that changes nothing, the old one kept in an annotation and the field
    named in the Event; nginx serves throughout and no second pod is made."""

    async def body(s: Story) -> None:
        old_install(s)
        unreadable = status_0_2_1()
        for member in unreadable["members"]:
            member["slot"] = str(member["slot"])
            member["phase"] = "RUNNING"
        await s.set_status(unreadable)
        wired_before = s.wired()

        await s.loops(2)
        assert s.wired() == wired_before  # nothing unwired
        assert s.effects("create") == []
        assert s.effects("terminate") == []
        assert len(s.world.cloud.pods) == 2
        status = s.status()
        assert {m.pod_id for m in status.members} == {pod_id for pod_id, *_ in OLD_PODS}
        assert {m.slot for m in status.members} == {8081, 8082}
        annotations = s.world.kube.pool(s.name)["metadata"]["annotations"]
        assert json.loads(annotations[f"{API_GROUP}/{OLD_STATUS_ANNOTATION}"]) == unreadable
        (event,) = [e for e in s.world.kube.events if e["reason"] == "StatusRebuilt"]
        assert "status.members[0]" in event["message"]

        await s.loops(3)
        ready = s.status().condition("Ready")
        assert ready is not None
        assert ready.status == "True"
        assert s.wired() == wired_before
        assert s.effects("create") == []
        assert len(s.world.cloud.pods) == 2

    story(body)
