"""Stories of the safeguards: caps, backoff, pool-wide trouble, hand-made changes,
ownership, and the controller's own crashes."""

from __future__ import annotations

from rpp.sim.faults import CreatedButFailed, Refuse
from tests.stories.test_replacement import healthy_pool, ready_pods
from tests.stories.world_kit import Story, pool_manifest, story


def blocked(s: Story) -> tuple[str, str] | None:
    cond = s.status().condition("CreateBlocked")
    if cond is None or cond.status != "True":
        return None
    return cond.reason, cond.message


def test_pod_terminated_by_hand_is_unwired_at_once_gone_after_two_loops_and_replaced() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        victim = sorted(ready_pods(before))[0]
        s.world.cloud.remove_pod(victim)
        first = await s.loops(1)
        assert first.status is not None
        member = first.status.member(victim)
        assert member is not None, "one missing listing is not enough to let it go"
        # But its proxy answers 404, twice: out of nginx at once (quarantine).
        assert member.quarantine is not None
        assert victim not in s.wired().values()
        second = await s.loops(1)
        assert second.status is not None
        assert second.status.member(victim) is None
        assert victim not in s.wired().values()
        final = await s.until(lambda st: st.ready == 2, limit=30)
        assert victim not in {m.pod_id for m in final.members}
        assert not [e for e in s.effects("terminate") if e.pod_id == victim]

    story(body)


def test_max_pods_blocks_the_surge_and_says_so() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        victim = sorted(ready_pods(before))[0]
        s.world.pods[victim].slow(3.0)
        await s.until(lambda st: any(m.phase == "Flagged" for m in st.members), limit=40)
        await s.loops(2)
        reason, message = blocked(s) or ("", "")
        assert reason == "MaxPodsReached"
        assert "limits.maxPods is 2" in message
        assert len(s.effects("create")) == 2

    limits = {
        "maxPods": 2,
        "maxHourlyCostUsd": 10.0,
        "maxCreatesPerHour": 3,
        "estimatedPodCostUsd": 0.7,
    }
    story(body, manifest=pool_manifest(limits=limits))


def test_cost_cap_counts_the_new_pods_estimate() -> None:
    async def body(s: Story) -> None:
        await s.loops(6)
        reason, message = blocked(s) or ("", "")
        assert reason == "CostCapReached"
        assert "maxHourlyCostUsd $1.00/h" in message
        assert len(s.effects("create")) == 1  # 0.69 + 0.7 > 1.0: the second never goes
        assert s.status().cost_per_hour <= 1.0

    limits = {
        "maxPods": 4,
        "maxHourlyCostUsd": 1.0,
        "maxCreatesPerHour": 3,
        "estimatedPodCostUsd": 0.7,
    }
    story(body, manifest=pool_manifest(limits=limits))


def test_zero_budget_means_never_create() -> None:
    async def body(s: Story) -> None:
        await s.loops(3)
        reason, message = blocked(s) or ("", "")
        assert reason == "CostCapReached"
        assert "means never create" in message
        assert s.effects("create") == []
        assert s.world.cloud.write_calls == []

    limits = {"maxPods": 4, "maxHourlyCostUsd": 0, "maxCreatesPerHour": 3}
    story(body, manifest=pool_manifest(limits=limits))


def test_creates_per_hour_cap_and_refused_creates_do_not_count() -> None:
    async def body(s: Story) -> None:
        s.out_of_stock()
        await s.loops(40)  # 20 minutes of refused creates
        status = s.status()
        assert status.creates_in_last_hour(s.clock.now()) == 0
        assert status.condition("CapacityUnavailable").status == "True"  # type: ignore[union-attr]
        assert blocked(s) is None, "waiting for stock is told by CapacityUnavailable alone"
        s.restock()
        # New pods die young: each is replaced, until the hourly cap stops it.
        s.new_pods_die()
        await s.loops(60)
        status = s.status()
        assert status.creates_in_last_hour(s.clock.now()) <= 2
        counted = [a for a in status.create_log if a.outcome == "created"]
        assert len(counted) >= 2
        reason, message = blocked(s) or ("", "")
        assert reason == "CreateRateLimited"
        assert "maxCreatesPerHour is 2" in message

    limits = {
        "maxPods": 4,
        "maxHourlyCostUsd": 10.0,
        "maxCreatesPerHour": 2,
        "estimatedPodCostUsd": 0.7,
    }
    story(body, manifest=pool_manifest(limits=limits))


def test_failed_create_waits_five_minutes() -> None:
    async def body(s: Story) -> None:
        s.world.cloud.faults.always(
            "createPod", Refuse(status=422, detail="templateId does not exist")
        )
        await s.loops(1)
        refusal_time = s.clock.now()
        await s.loops(9)  # 4.5 more minutes: no second attempt
        assert len([h for h in s.status().history if h.action == "create"]) == 1
        reason, message = blocked(s) or ("", "")
        assert reason == "CreateBackoff"
        assert "5m backoff" in message
        await s.until(
            lambda st: len([h for h in st.history if h.action == "create"]) == 2, limit=4
        )
        assert (s.clock.now() - refusal_time).total_seconds() >= 300
        assert "templateId does not exist" in s.status().history[-1].detail

    story(body)


def test_every_pod_degraded_at_once_replaces_nothing() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        for pod in s.world.pods.values():
            pod.slow(3.0)
        await s.loops(30)  # 15 minutes, past SlowScrape's 10
        status = s.status()
        cond = status.condition("PoolWideDegradation")
        assert cond is not None
        assert cond.status == "True"
        assert "SlowScrape" in cond.message
        assert all(m.phase == "Ready" for m in status.members)
        assert len(s.effects("create")) == 2

    story(body)


def test_create_that_answered_500_but_made_a_pod_is_adopted_not_duplicated() -> None:
    async def body(s: Story) -> None:
        s.world.cloud.faults.next("createPod", CreatedButFailed())
        await s.loops(1)
        status = s.status()
        assert status.members == ()
        assert [a.outcome for a in status.create_log] == ["unknown"]
        made = [c for c in s.world.cloud.calls if c.operation == "createPod"]
        assert len(made) == 1, "a create after a 5xx is never retried blindly"
        await s.loops(1)
        status = s.status()
        assert len(status.members) == 1
        assert status.members[0].name == status.create_log[0].name
        final = await s.until(lambda st: st.ready == 2, limit=40)
        names = [m.name for m in final.members]
        assert len(names) == len(set(names)) == 2
        listed = await s.world.controller.runpod.list_pods()
        assert len(listed) == 2

    story(body)


def test_controller_restarted_between_every_two_loops_creates_no_duplicates() -> None:
    async def body(s: Story) -> None:
        for _ in range(12):
            await s.world.restart_controller()
            await s.loops(1)
        status = s.status()
        assert status.ready == 2
        listed = await s.world.controller.runpod.list_pods()
        assert len(listed) == 2
        assert len([c for c in s.world.cloud.calls if c.operation == "createPod"]) == 2

    story(body)


def test_lost_status_is_rebuilt_from_runpod_and_the_slots_configmap() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        wired = s.wired()
        await s.set_status({})  # status wiped by hand
        await s.world.restart_controller()
        after = await s.loops(1)
        assert after.status is not None
        assert {m.pod_id: m.slot for m in after.status.members if m.slot} == {
            pod: slot for slot, pod in wired.items()
        }
        assert all(m.phase == "Ready" for m in after.status.members)
        assert s.wired() == wired
        assert len(s.effects("create")) == 2
        assert ready_pods(before) == ready_pods(after.status)

    story(body)


def test_a_controller_restarted_before_every_loop_decides_exactly_as_one_that_runs_on() -> None:
    """Status is the only memory: what a process remembers (the status and spec it last
    wrote and loaded) may save work but never change a decision."""

    async def body(s: Story, *, restart: bool) -> list[dict[str, object]]:
        statuses = []
        for loop in range(40):
            if restart:
                await s.world.restart_controller()
            if loop == 12:
                victim = sorted(ready_pods(s.status()))[0]
                s.world.pods[victim].die()
            if loop == 22:
                s.apply(image="ghcr.io/example/inference:1.5.0")
            result = await s.loops(1)
            assert result.status is not None
            statuses.append(result.status.stored())
        return statuses

    continuous = story(lambda s: body(s, restart=False))
    restarted = story(lambda s: body(s, restart=True))
    assert len(continuous) == len(restarted) == 40
    for loop, (kept, fresh) in enumerate(zip(continuous, restarted, strict=True)):
        assert kept == fresh, f"loop {loop} decided differently after a restart"
    phases = {m["phase"] for st in continuous for m in st["members"]}  # type: ignore[attr-defined]
    assert {"Warming", "Ready", "Flagged", "Draining", "Updating"} <= phases
