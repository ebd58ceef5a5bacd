"""The executor's safeguards: ownership re-read before delete and update, env merge,
and modes that never reach RunPod."""

from __future__ import annotations

import datetime as dt

import httpx

from rpp.act.executor import Executor
from rpp.adapters.clock import UTC, ManualClock
from rpp.adapters.kube.api import KubeSettings
from rpp.adapters.runpod.client import RunPodClient
from rpp.model.effects import Effect, TerminatePod, UpdatePod, WriteSlots
from rpp.model.spec_load import load_spec
from rpp.sim.cloud import FakeCloud
from rpp.sim.cloud_api import CloudApi
from rpp.sim.kube_memory import MemoryKubeApi

T0 = dt.datetime(2026, 1, 1, tzinfo=UTC)


def spec(**changes: object):  # type: ignore[no-untyped-def]
    resolved, problems = load_spec(
        "inference",
        {"templateId": "t", "dryRun": False, "datacenters": {"allow": ["EU-RO-1"]}, **changes},
    )
    assert problems == []
    return resolved


POOL = {"metadata": {"name": "inference", "namespace": "runpod", "uid": "u1"}}


async def setup(name: str) -> tuple[FakeCloud, Executor, str, MemoryKubeApi]:
    clock = ManualClock(T0)
    cloud = FakeCloud(clock=clock, boot_time=0)
    cloud.set_stock("EU-RO-1", "NVIDIA GeForce RTX 4090", "SECURE", 3, cost_per_hr=0.69)
    pod = cloud.add_pod(
        name=name,
        image="img:1",
        gpu_type="NVIDIA GeForce RTX 4090",
        datacenter="EU-RO-1",
        env={"KEEP": "1", "A": "old"},
    )
    kube = MemoryKubeApi(KubeSettings(namespace="runpod"), clock=clock)
    client = RunPodClient(
        api_key="k", base_url="http://fake", transport=httpx.ASGITransport(app=CloudApi(cloud))
    )
    return cloud, Executor(runpod=client, kube=kube), pod.info.pod_id, kube


async def test_terminate_is_refused_when_runpod_says_the_pod_is_not_the_pools() -> None:
    cloud, executor, pod_id, _ = await setup("someone-elses-pod")
    effect = TerminatePod(pod_id=pod_id, name="rpp-inference-abc", reason="drained")
    [done, event] = await executor.execute(
        pool=POOL, spec=spec(), effects=[effect], env={}, now=T0
    )
    assert done.result == "not-owned"
    assert "not touched" in done.detail
    assert cloud.write_calls == []
    assert event.effect.reason == "TerminateFailed"  # type: ignore[union-attr]


async def test_terminate_of_an_owned_pod_deletes_it_and_a_gone_pod_is_success() -> None:
    cloud, executor, pod_id, _ = await setup("rpp-inference-abc")
    effect = TerminatePod(pod_id=pod_id, name="rpp-inference-abc", reason="drained")
    first = await executor.execute(pool=POOL, spec=spec(), effects=[effect], env={}, now=T0)
    assert first[0].result == "ok"
    again = await executor.execute(pool=POOL, spec=spec(), effects=[effect], env={}, now=T0)
    assert again[0].result == "gone"
    assert [c.operation for c in cloud.write_calls] == ["deletePod"]


async def test_update_sends_the_pods_env_merged_with_the_secret() -> None:
    cloud, executor, pod_id, _ = await setup("rpp-inference-abc")
    effect = UpdatePod(
        pod_id=pod_id, name="rpp-inference-abc", image="img:2", from_image="img:1", reason="roll"
    )
    [done, _] = await executor.execute(
        pool=POOL, spec=spec(), effects=[effect], env={"A": "new", "TOKEN": "t"}, now=T0
    )
    assert done.result == "ok"
    info = cloud.pods[pod_id].info
    assert info.image == "img:2"
    assert info.env == {"KEEP": "1", "A": "new", "TOKEN": "t"}


async def test_dry_run_and_observe_never_call_runpod_or_write_slots() -> None:
    for mode_spec, expected in (
        (spec(dryRun=True), ["planned", "planned"]),
        (spec(paused=True), []),
    ):
        cloud, executor, pod_id, kube = await setup("rpp-inference-abc")
        effects: list[Effect] = [
            TerminatePod(pod_id=pod_id, name="rpp-inference-abc", reason="drained"),
            WriteSlots(slots=(), data=(("upstream.conf", "x"),)),
        ]
        results = await executor.execute(
            pool=POOL, spec=mode_spec, effects=effects, env={}, now=T0
        )
        assert cloud.write_calls == []
        assert cloud.calls == []
        assert kube.config_map("inference-nginx-slots") is None
        assert [r.result for r in results] == expected
