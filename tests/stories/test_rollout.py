"""Stories of the rolling image update: in place, one pod at a time, keeping each GPU."""

from __future__ import annotations

from typing import Any

from rpp.model.status import PoolStatus
from rpp.sim.cloud_model import FakePodInfo
from rpp.sim.faults import Refuse
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
