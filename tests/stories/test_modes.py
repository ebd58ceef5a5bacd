"""Stories of the modes: DryRun plans exactly what Manage does; Observe and DryRun
never write to RunPod (even a Read Only key suffices); paused stops every change."""

from __future__ import annotations

from typing import Any

import pytest

from rpp.controller import reconcile
from rpp.decide.pool import Decision, decide
from rpp.model.effects import Finalizer, RecordEvent
from rpp.model.spec import RunPodPoolSpec
from tests.stories.test_replacement import healthy_pool, ready_pods
from tests.stories.world_kit import Story, pool_manifest, story


def actions(decision: Decision) -> list[str]:
    """What a plan shows: neither Events nor the pool's finalizer (bookkeeping, done in
    every mode, like the status)."""
    kept = (e for e in decision.effects if not isinstance(e, RecordEvent | Finalizer))
    return [e.describe() for e in kept]


def test_dry_run_plans_exactly_the_actions_manage_performs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compared: list[tuple[list[str], list[str]]] = []

    def twin(**kwargs: Any) -> Decision:
        managed = decide(**kwargs)
        spec: RunPodPoolSpec = kwargs["spec"]
        dry = decide(**{**kwargs, "spec": spec.model_copy(update={"dry_run": True})})
        planned = [a.detail for a in dry.status.planned_actions]
        compared.append((actions(managed), planned))
        assert dry.status.planned == len(planned)
        return managed

    monkeypatch.setattr(reconcile, "decide", twin)

    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        victim = sorted(ready_pods(before))[0]
        s.world.pods[victim].die()
        await s.until(lambda st: st.member(victim) is None and st.ready == 2, limit=60)

    story(body)
    kinds = {a.split(" ")[0] for performed, _ in compared for a in performed}
    assert {"create", "wire", "unwire", "write", "terminate"} <= kinds
    for performed, planned in compared:
        assert planned == performed


def test_dry_run_with_a_read_only_key_writes_nothing_to_runpod_and_plans_the_creates() -> None:
    async def body(s: Story) -> None:
        await s.loops(20)
        assert s.world.cloud.write_calls == []
        status = s.status()
        assert status.mode == "DryRun"
        assert status.planned >= 1
        assert any(a.action == "create" for a in status.planned_actions)
        assert status.members == ()
        assert s.wired() == {}

    story(body, manifest=pool_manifest(dryRun=True), api_key="ro-read-only-key")


def test_dry_run_with_existing_pods_keeps_their_phases_real_and_writes_nothing() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        s.apply(dryRun=True)
        await s.world.restart_controller()
        writes_before = len(s.world.cloud.write_calls)
        slots_before = s.wired()
        victim = sorted(s.wired().values())[0]
        s.world.pods[victim].die()
        await s.loops(20)
        status = s.status()
        assert len(s.world.cloud.write_calls) == writes_before
        assert s.wired() == slots_before
        member = status.member(victim)
        assert member is not None
        assert member.slot is not None, "DryRun did not unwire it: status says so"
        planned = [a.action for a in status.planned_actions]
        assert "unwire" in planned
        assert "write-slots" in planned

    story(body)


def test_observe_with_a_read_only_key_reports_but_never_plans() -> None:
    async def body(s: Story) -> None:
        await s.loops(10)
        status = s.status()
        assert status.mode == "Observe"
        assert status.planned == 0
        assert s.world.cloud.write_calls == []
        assert s.world.kube.events == []

    story(body, manifest=pool_manifest(paused=True), api_key="ro-read-only-key")


def test_pausing_stops_every_change_from_the_next_loop() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        s.apply(paused=True)
        writes_before = len(s.world.cloud.write_calls)
        victim = sorted(ready_pods(before))[0]
        s.world.pods[victim].die()
        await s.loops(20)
        assert len(s.world.cloud.write_calls) == writes_before
        assert s.status().mode == "Observe"
        s.apply(paused=False)
        await s.until(lambda st: st.member(victim) is None and st.ready == 2, limit=60)

    story(body)
