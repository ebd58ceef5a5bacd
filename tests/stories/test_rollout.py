"""Stories of the rolling image update: in place, one pod at a time, keeping each GPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rpp.model.effects import RecordEvent
from rpp.model.members import MemberRecord
from rpp.model.rollout_records import Rollout
from rpp.model.status import PoolStatus
from rpp.sim.cloud_model import FakePodInfo
from rpp.sim.faults import Refuse
from tests.stories.prom_stub import PromStub
from tests.stories.world_kit import Story, pool_manifest, story

OLD = "ghcr.io/example/inference:1.4.2"
NEW = "ghcr.io/example/inference:1.5.0"


def four_pods() -> dict[str, Any]:
    return pool_manifest(
        replicas={"min": 4, "max": 4},
        maxPerDatacenter=2,
        limits={
            "maxPods": 6,
            "maxHourlyCostUsd": 10.0,
            "maxCreatesPerHour": 6,
            "estimatedPodCostUsd": 0.7,
        },
        nginx={"slotPorts": 5},
    )


def on_image(status: PoolStatus, image: str) -> int:
    return sum(1 for m in status.members if m.phase == "Ready" and m.slot and m.image == image)


async def started_at(s: Story) -> dict[str, Any]:
    pods = await s.world.controller.runpod.list_pods()
    return {p.id: p for p in pods}


def test_roll_of_four_pods_one_at_a_time_detecting_restarts_from_metrics() -> None:
    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 4, limit=40)
        before = {pid: info.info.started_at for pid, info in cloud_pods(s).items()}
        gpus = {p.id: (p.gpu_type, p.datacenter) for p in (await started_at(s)).values()}
        s.apply(image=NEW)
        most_in_update = 0
        for _ in range(200):
            result = await s.loops(1)
            status = result.status
            assert status is not None
            in_update = [m for m in status.members if m.phase in ("Draining", "Updating")]
            most_in_update = max(most_in_update, len(in_update))
            assert status.ready >= 3, "one pod at a time"
            if on_image(status, NEW) == 4:
                break
        assert status is not None
        assert on_image(status, NEW) == 4
        assert most_in_update == 1
        assert status.rollout is None or status.rollout.updated == 4
        after = {pid: info.info.started_at for pid, info in cloud_pods(s).items()}
        assert after == before, "RunPod's startedAt never moved: restarts came from metrics"
        assert {p.id: (p.gpu_type, p.datacenter) for p in (await started_at(s)).values()} == gpus
        assert len(s.effects("create")) == 4, "no new pod for a roll"
        updates = s.effects("update")
        assert len(updates) == 4
        assert len({u.pod_id for u in updates}) == 4
        # Each pod came back only after its process restarted.
        for pod_id, server in s.world.pods.items():
            assert server.process_start > before[pod_id]
        env = cloud_pods(s)[updates[0].pod_id].info.env
        assert env.get("METRICS_TOKEN") == "tok-123", "env merged with envFromSecret"

    story(body, manifest=four_pods())


def cloud_pods(s: Story) -> dict[str, Any]:
    return dict(s.world.cloud.pods)


def test_roll_pauses_while_a_pod_goes_bad_and_resumes_after_its_replacement() -> None:
    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 4, limit=40)
        s.apply(image=NEW)
        await s.until(lambda st: on_image(st, NEW) == 1, limit=40)
        bad = next(
            m.pod_id
            for m in s.status().members
            if m.phase == "Ready" and m.image == OLD and m.update is None
        )
        s.world.pods[bad].die()
        died_at = s.clock.now()
        final = await s.until(
            lambda st: on_image(st, NEW) == 4 and st.member(bad) is None, limit=300
        )
        assert final.ready == 4
        history = [h for h in s.status().history if h.time >= died_at]
        replaced_at = next(h.time for h in history if h.pod and h.outcome == "Warming -> Ready")
        update_drains = [
            h.time
            for h in history
            if h.outcome == "Ready -> Draining" and "update" in h.detail and h.pod != bad
        ]
        assert update_drains, "the roll resumed"
        assert all(t >= replaced_at for t in update_drains), (
            "no pod is drained for the roll while the bad one waits for its replacement"
        )

    story(body, manifest=four_pods())


def broken_new_image(s: Story):  # type: ignore[no-untyped-def]
    original = s.world._pod_server

    def factory(info: FakePodInfo):  # type: ignore[no-untyped-def]
        server = original(info)
        restart = server.restart

        def restart_and_fail(now):  # type: ignore[no-untyped-def]
            restart(now)
            if info.image == NEW:
                server.die()

        server.restart = restart_and_fail  # type: ignore[method-assign]
        return server

    return factory


def test_update_not_healthy_in_time_is_rolled_back_and_updates_pause_30_minutes() -> None:
    async def body(s: Story) -> None:
        s.world.cloud.pod_server_factory = broken_new_image(s)
        await s.until(lambda st: st.ready == 2, limit=20)
        s.apply(image=NEW)
        failed = await s.until(
            lambda st: (c := st.condition("UpdateFailed")) is not None and c.status == "True",
            limit=80,
        )
        cond = failed.condition("UpdateFailed")
        assert cond is not None
        assert NEW in cond.message
        back = await s.until(lambda st: st.ready == 2 and on_image(st, OLD) == 2, limit=80)
        until = back.backoff.update_until
        assert until is not None
        rolled_at = s.clock.now()
        await s.loops(20)  # 10 minutes: no new attempt
        assert sum(1 for u in s.effects("update") if not u.rollback) == 1
        rollbacks = [u for u in s.effects("update") if u.rollback]
        assert len(rollbacks) == 1
        assert rollbacks[0].image == OLD
        await s.until(lambda st: any(m.phase == "Draining" for m in st.members), limit=80)
        assert s.clock.now() >= until, "the next attempt waits for the 30-minute pause"
        assert (s.clock.now() - rolled_at).total_seconds() > 10 * 60

    story(body)


def test_refused_update_is_rolled_back_with_runpods_words() -> None:
    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        s.world.cloud.faults.next(
            "updatePod", Refuse(status=400, detail="Image pull not allowed for this account.")
        )
        s.apply(image=NEW)
        failed = await s.until(
            lambda st: (c := st.condition("UpdateFailed")) is not None and c.status == "True",
            limit=40,
        )
        assert "Image pull not allowed" in failed.condition("UpdateFailed").message  # type: ignore[union-attr]
        await s.until(lambda st: st.ready == 2, limit=40)
        assert [u.rollback for u in s.effects("update")] == [False, True]

    story(body)


def test_roll_completes_with_every_gpu_type_out_of_stock() -> None:
    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        s.out_of_stock()
        s.apply(image=NEW)
        final = await s.until(lambda st: on_image(st, NEW) == 2, limit=120)
        assert final.ready == 2
        assert len(s.effects("create")) == 2

    story(body)


def test_controller_restart_in_the_middle_of_a_roll_continues_it() -> None:
    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        s.apply(image=NEW)
        for _ in range(40):
            await s.world.restart_controller()
            await s.loops(1)
            if on_image(s.status(), NEW) == 2:
                break
        assert on_image(s.status(), NEW) == 2
        updates = s.effects("update")
        assert len(updates) == 2
        assert len({u.pod_id for u in updates}) == 2

    story(body)


# --- the release's canary -------------------------------------------------------------


def phase_is(phase: str) -> Callable[[PoolStatus], bool]:
    return lambda st: st.rollout is not None and st.rollout.phase == phase


def release_of(status: PoolStatus | None) -> Rollout:
    """The status' release block, which these stories expect to be there."""
    assert status is not None
    assert status.rollout is not None
    return status.rollout


def canary_of(status: PoolStatus) -> MemberRecord:
    canary = release_of(status).canary
    assert canary is not None
    member = status.member(canary)
    assert member is not None
    return member


def sample(s: Story, name: str, **labels: str) -> float | None:
    registry = s.world.controller.registry
    value: float | None = registry.get_sample_value(
        name, {"pool_namespace": "runpod", "pool": "inference", **labels}
    )
    return value


def test_without_prometheus_the_canary_bakes_on_probes_only_and_says_so() -> None:
    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        s.apply(image=NEW)
        baking = await s.until(phase_is("Baking"), limit=40)
        wired_at = canary_of(baking).since
        rolling = await s.until(phase_is("Rolling"), limit=40)
        verdict = release_of(rolling).verdict
        assert verdict is not None
        assert (verdict.result, verdict.judged_by) == ("Passed", "probes")
        assert "the pool sets no prometheus.errorRatioQuery or latencyQuery" in verdict.message
        assert (s.clock.now() - wired_at).total_seconds() >= 600, "the whole 10-minute bake"
        await s.until(lambda st: on_image(st, NEW) == 2, limit=40)

    story(body)


def test_a_failed_canary_goes_back_and_its_image_waits_for_a_new_spec_image() -> None:
    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        s.apply(image=NEW)
        baking = await s.until(phase_is("Baking"), limit=40)
        canary = canary_of(baking).pod_id
        s.world.pods[canary].die()  # the new image stops answering mid-bake
        failed = await s.until(
            lambda st: (c := st.condition("UpdateFailed")) is not None and c.status == "True",
            limit=20,
        )
        cond = failed.condition("UpdateFailed")
        assert cond is not None
        assert cond.reason == "CanaryFailed"
        assert "a health rule flagged it: Unreachable" in cond.message
        assert f"{NEW} is not tried again until spec.image changes" in cond.message
        failed_verdict = release_of(failed).verdict
        assert failed_verdict is not None
        assert failed_verdict.judged_by == "probes"
        assert canary_of(failed).phase == "Draining"
        await s.until(lambda st: on_image(st, OLD) == 2, limit=40)
        assert sample(s, "runpod_pool_rollbacks_total") == 1.0
        assert sample(s, "runpod_pool_rollout_phase", phase="RolledBack") == 1.0
        assert sample(s, "runpod_pool_rollout_phase", phase="Baking") == 0.0
        events = [
            e.reason
            for r in s.results
            if r.decision
            for e in r.decision.effects
            if isinstance(e, RecordEvent)
        ]
        assert "CanaryFailed" in events
        await s.loops(90)  # 45 minutes, well past the 30-minute update backoff
        assert [(u.image, u.rollback) for u in s.effects("update")] == [(NEW, False), (OLD, True)]
        assert release_of(s.status()).phase == "RolledBack"
        assert len(s.effects("create")) == 2, "no pod was replaced for the release"
        # To try the same image again: set the running image, then the one to retry.
        s.apply(image=OLD)
        done = await s.until(phase_is("Done"), limit=5)
        cleared = done.condition("UpdateFailed")
        assert cleared is not None
        assert cleared.status == "False"
        s.apply(image=NEW)
        again = await s.until(phase_is("Canary"), limit=5)
        assert release_of(again).verdict is None

    story(body)


def test_a_baking_canary_survives_a_controller_restart_every_loop() -> None:
    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        s.apply(image=NEW)
        baking = await s.until(phase_is("Baking"), limit=40)
        wired_at = canary_of(baking).since
        for _ in range(40):
            await s.world.restart_controller()
            release = release_of((await s.loops(1)).status)
            if release.phase != "Baking":
                break
        assert release.phase == "Rolling"
        assert release.verdict is not None
        assert release.verdict.window >= 600
        assert (s.clock.now() - wired_at).total_seconds() < 600 + 60, "not started over"

    story(body)


def test_a_pod_created_while_the_canary_bakes_gets_the_old_image() -> None:
    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        s.apply(image=NEW)
        baking = await s.until(phase_is("Baking"), limit=40)
        canary = canary_of(baking).pod_id
        peer = next(m.pod_id for m in baking.members if m.pod_id != canary)
        s.world.cloud.remove_pod(peer)  # terminated in the RunPod console mid-bake
        await s.until(lambda st: len(s.effects("create")) == 3, limit=20)
        create = s.effects("create")[-1]
        assert create.image == OLD
        assert f"on {OLD}, the image the pool trusts" in create.describe()
        new_pod = next(p for p in s.world.cloud.pods.values() if p.info.name == create.name)
        assert new_pod.info.image == OLD
        final = await s.until(lambda st: st.ready == 2 and on_image(st, NEW) == 2, limit=120)
        assert release_of(final).phase == "Done"

    story(body)


def test_turning_the_canary_off_mid_bake_lets_the_release_roll_on() -> None:
    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        s.apply(image=NEW)
        await s.until(phase_is("Baking"), limit=40)
        s.apply(rollout={"canary": {"enabled": False}})
        rolling = await s.until(phase_is("Rolling"), limit=3)
        verdict = release_of(rolling).verdict
        assert verdict is not None
        assert verdict.result == "Skipped"
        await s.until(lambda st: on_image(st, NEW) == 2, limit=40)

    story(body)


def six_autoscaled_pods() -> dict[str, Any]:
    return pool_manifest(
        replicas={"min": 2, "max": 6},
        maxPerDatacenter=2,
        autoscaling={
            "enabled": True,
            "query": "pool_load",
            "target": 1,
            "scaleDownStabilization": "6h",
        },
        limits={
            "maxPods": 8,
            "maxHourlyCostUsd": 10.0,
            "maxCreatesPerHour": 10,
            "estimatedPodCostUsd": 0.7,
        },
        nginx={"slotPorts": 7},
        rollout={"canary": {"bake": "2m"}, "maxParallel": 4},
    )


def test_after_its_canary_up_to_max_parallel_pods_update_while_ready_keeps_the_load_served() -> (
    None
):
    """Six pods carry a load worth three (the autoscaler's value: 3 pods' worth at target
    1, spread over the Ready pods). After the canary, pods update three at a time: a
    fourth would leave 2 Ready, fewer than the load needs, though maxParallel is 4."""
    prometheus = PromStub(value=2.0)

    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 6, limit=120)
        s.apply(image=NEW)
        most = 0
        lowest_while_rolling = 6
        waits: set[str] = set()
        for _ in range(200):
            prometheus.value = 3.0 / max(1, s.status().ready)
            status = (await s.loops(1)).status
            release = release_of(status)
            assert status is not None
            most = max(most, len(release.updating))
            if release.phase == "Rolling":
                lowest_while_rolling = min(lowest_while_rolling, status.ready)
                waits.add(release.waiting or "")
            if release.phase == "Done":
                break
        assert release.phase == "Done"
        assert on_image(s.status(), NEW) == 6
        assert most == 3
        assert lowest_while_rolling == 3
        assert any("below 3 (the load needs 3" in w for w in waits), waits
        assert len(s.effects("update")) == 6

    story(body, manifest=six_autoscaled_pods(), prometheus=prometheus)


def test_setting_the_old_image_back_mid_bake_takes_the_canary_back_without_a_bake() -> None:
    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        s.apply(image=NEW)
        baking = await s.until(phase_is("Baking"), limit=40)
        canary = canary_of(baking).pod_id
        s.apply(image=OLD)
        back = await s.until(phase_is("Rolling"), limit=3)
        verdict = release_of(back).verdict
        assert verdict is not None
        assert verdict.result == "Skipped"
        assert f"the pool already serves {OLD} on 1 Ready pod(s)" in verdict.message
        went_back = back.member(canary)
        assert went_back is not None
        assert went_back.phase == "Draining"
        done = await s.until(phase_is("Done"), limit=20)
        assert on_image(done, OLD) == 2
        assert [u.image for u in s.effects("update")] == [NEW, OLD]

    story(body)


def test_a_pod_created_the_loop_a_new_image_is_applied_gets_the_old_image() -> None:
    async def body(s: Story) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        s.apply(image=NEW, replicas={"min": 3, "max": 3}, nginx={"slotPorts": 4})
        await s.loops(1)
        (create,) = [c for c in s.effects("create") if c.reason.startswith("2 of 3")]
        assert create.image == OLD, "the new image has not passed a canary yet"
        final = await s.until(lambda st: on_image(st, NEW) == 3, limit=120)
        assert final.ready == 3
        verdict = release_of(final).verdict
        assert verdict is not None
        assert verdict.result == "Passed", "the canary was judged, not skipped"

    story(body)
