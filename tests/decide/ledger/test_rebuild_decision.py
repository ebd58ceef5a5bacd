"""Whether a loop rebuilds the status is judged on the status the cluster stored
(rpp/decide/ledger/rebuild.py), never on the one the loop has begun to build.

An empty stored status while the slots ConfigMap wires pods is a lost status (a backup
restored without it). The loop itself writes conditions into its new status before
it judges, as when one of the pool's pods reads oddly in RunPod's answer
(UnreadablePods) or another controller wrote the pool (SecondController); neither
makes the stored status any less lost, and the loop must still rebuild quietly.
"""

from __future__ import annotations

import datetime as dt

import pytest

from rpp.decide.nginx_slots import SlotTarget, render_slots
from rpp.decide.pool import decide
from rpp.model.effects import RecordEvent
from rpp.model.observations import (
    PodStatus,
    PoolObject,
    PoolObservation,
    RunPodPod,
    SecretState,
)
from rpp.model.spec import RunPodPoolSpec
from rpp.model.spec_load import load_pool
from rpp.model.status import PoolStatus
from tests.stories.world_kit import GPU, pool_manifest

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
POOL = "inference"


def spec() -> RunPodPoolSpec:
    """A pool of three: a loop that acted on two serving pods would create a third."""
    pool, problems = load_pool(pool_manifest(replicas={"min": 3, "max": 3}))
    assert pool is not None, problems
    return pool.spec


def pod(spec: RunPodPoolSpec, pod_id: str, *, unreadable: str | None = None) -> RunPodPod:
    return RunPodPod(
        id=pod_id,
        name=f"{spec.name_prefix}{pod_id}",
        status=PodStatus.RUNNING,
        image=spec.image or "",
        gpu_type=GPU,
        gpu_count=1,
        cloud="SECURE",
        datacenter="EU-RO-1",
        cost_per_hr=0.69,
        created_at=NOW - dt.timedelta(hours=1),
        unreadable=unreadable,
    )


def serving(
    spec: RunPodPoolSpec, pods: list[RunPodPod], *, other_controller: str | None
) -> PoolObservation:
    """The pods listed and wired in nginx's slots, as a pool that served before."""
    slots = {spec.nginx.base_port + i: SlotTarget(p.id, p.datacenter) for i, p in enumerate(pods)}
    data = render_slots(pool=POOL, spec=spec, slots=slots)
    return PoolObservation(
        pods=tuple(pods),
        slots=data,
        secret=SecretState(configured=True),
        pool=PoolObject(finalizer=True),
        other_controller=other_controller,
    )


@pytest.mark.parametrize(
    ("odd_pod", "other_controller"),
    [
        pytest.param("gpu.count: 'two'", None, id="a-pod-reads-oddly"),
        pytest.param(None, "its status was written by rpp-b", id="another-controller-wrote"),
    ],
)
def test_an_empty_stored_status_with_wired_pods_is_rebuilt_whatever_the_loop_raised_first(
    odd_pod: str | None, other_controller: str | None
) -> None:
    s = spec()
    pods = [pod(s, "aaa111", unreadable=odd_pod), pod(s, "bbb222")]
    obs = serving(s, pods, other_controller=other_controller)

    decision = decide(pool=POOL, generation=1, spec=s, status=PoolStatus(), obs=obs, now=NOW)

    assert decision.rebuilt is not None, "the stored status was empty while nginx served"
    assert "stored status is empty" in decision.rebuilt
    acted = [e.action for e in decision.effects if e.action in ("create", "terminate", "update")]
    assert acted == [], "the rebuild loop creates, terminates and updates nothing"
    events = [e.reason for e in decision.effects if isinstance(e, RecordEvent)]
    assert "StatusRebuilt" in events
    assert {m.pod_id: m.slot for m in decision.status.members} == {
        "aaa111": s.nginx.base_port,
        "bbb222": s.nginx.base_port + 1,
    }


def test_an_empty_stored_status_with_nothing_wired_is_a_new_pool_not_a_rebuild() -> None:
    s = spec()
    obs = serving(s, [], other_controller="its status was written by rpp-b")

    decision = decide(pool=POOL, generation=1, spec=s, status=PoolStatus(), obs=obs, now=NOW)

    assert decision.rebuilt is None
    assert [e.action for e in decision.effects if e.action == "create"] == ["create"]
