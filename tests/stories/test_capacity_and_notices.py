"""Stories of RunPod itself: machine notices, GPU stock-outs, pods that never warm up."""

from __future__ import annotations

import datetime as dt

from rpp.model.status import PoolStatus
from rpp.sim.faults import NoCapacity
from tests.stories.test_replacement import healthy_pool, ready_pods
from tests.stories.world_kit import DATACENTERS, GPU, Story, pool_manifest, story

CRITICAL = (
    "We have detected a critical error on this machine which may affect some pods. We are "
    "looking into the root cause and apologize for any inconvenience. We would recommend "
    "backing up your data and creating a new pod in the meantime."
)


def condition(status: PoolStatus, kind: str) -> tuple[str, str] | None:
    cond = status.condition(kind)
    return None if cond is None else (cond.status, cond.message)


def with_host_notice(on: bool) -> dict[str, object]:
    manifest = pool_manifest()
    manifest["spec"]["health"]["replaceWhen"]["hostNotice"] = on
    return manifest


def test_critical_error_note_replaces_the_pod_when_host_notice_is_on() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        victim = sorted(ready_pods(before))[0]
        s.world.cloud.set_machine_note(victim, CRITICAL)
        flagged = await s.until(
            lambda st: (m := st.member(victim)) is not None and m.phase == "Flagged", limit=5
        )
        assert flagged.member(victim).flagged_rule == "HostNotice"  # type: ignore[union-attr]
        raised = condition(flagged, "HostNotice")
        assert raised is not None
        assert raised[0] == "True"
        assert "critical error on this machine" in raised[1]
        await s.until(lambda st: st.member(victim) is None and st.ready == 2, limit=60)

    story(body, manifest=with_host_notice(True))


def test_critical_error_note_only_raises_a_condition_when_host_notice_is_off() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        victim = sorted(ready_pods(before))[0]
        s.world.cloud.set_machine_note(victim, CRITICAL)
        result = await s.loops(10)
        status = result.status
        assert status is not None
        assert status.member(victim).phase == "Ready"  # type: ignore[union-attr]
        raised = condition(status, "HostNotice")
        assert raised is not None
        assert raised[0] == "True"
        assert victim in raised[1]
        assert "hostNotice: true" in raised[1]
        assert not s.effects("terminate")
        s.world.cloud.set_machine_note(victim, None)
        cleared = await s.loops(1)
        assert condition(cleared.status, "HostNotice")[0] == "False"  # type: ignore[arg-type,index]

    story(body, manifest=with_host_notice(False))


def test_no_stock_for_two_hours_raises_capacity_unavailable_and_keeps_the_flagged_pod() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        victim = sorted(ready_pods(before))[0]
        s.out_of_stock()
        s.world.pods[victim].slow(3.0)
        raised = await s.until(
            lambda st: (
                (c := st.condition("CapacityUnavailable")) is not None and c.status == "True"
            ),
            limit=60,
        )
        message = raised.condition("CapacityUnavailable").message  # type: ignore[union-attr]
        assert GPU in message
        assert "SECURE" in message
        used = {m.datacenter for m in before.members}
        free = [dc for dc in DATACENTERS if dc not in used]  # maxPerDatacenter is 1
        assert free
        assert all(dc in message for dc in free)
        assert "without stock in the catalog" in message
        # The datacenters the pool's own rule kept out are named with the rule.
        tried = sorted((dc for dc in used if dc is not None), key=DATACENTERS.index)
        assert f"not tried: {', '.join(tried)} " in message
        assert "(maxPerDatacenter 1 reached)" in message
        refusal = raised.last_capacity_refusal
        assert refusal is not None
        assert "(maxPerDatacenter 1 reached)" in refusal.message
        started = s.clock.now()
        while (s.clock.now() - started) < dt.timedelta(hours=2):
            result = await s.loops(1)
            status = result.status
            assert status is not None
            victim_member = status.member(victim)
            assert victim_member is not None
            assert victim_member.phase == "Flagged"
            assert victim_member.slot is not None, "the flagged pod keeps serving"
            assert status.condition("CapacityUnavailable").status == "True"  # type: ignore[union-attr]
        assert status is not None
        creates = [h for h in status.history if h.action == "create"]
        assert len(creates) <= 2 * 60 // 5 + 2, "failed creates wait 5 minutes each"
        s.restock()
        cleared = await s.until(
            lambda st: getattr(st.condition("CapacityUnavailable"), "status", None) == "False",
            limit=20,
        )
        assert any(m.replacement_for == victim for m in cleared.members)
        await s.until(lambda st: st.member(victim) is None and st.ready == 2, limit=60)

    story(body)


def test_runpod_refusing_for_stock_is_quoted_in_capacity_unavailable() -> None:
    """The catalog can be stale: RunPod's own words from the refused create are kept."""

    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        victim = sorted(ready_pods(before))[0]
        s.world.cloud.faults.always("createPod", NoCapacity())
        s.world.pods[victim].die()
        raised = await s.until(
            lambda st: (
                (c := st.condition("CapacityUnavailable")) is not None and c.status == "True"
            ),
            limit=20,
        )
        message = raised.condition("CapacityUnavailable").message  # type: ignore[union-attr]
        assert "There are no longer any instances available" in message
        s.world.cloud.faults.clear()
        await s.until(lambda st: st.condition("CapacityUnavailable").status == "False", limit=20)  # type: ignore[union-attr]

    story(body)


def test_a_pod_that_never_warms_up_is_terminated_and_its_datacenter_cools_down() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        # From now on, every new pod boots but its service never answers.
        s.new_pods_die()
        victim = sorted(ready_pods(s.status()))[0]
        s.world.pods[victim].die()
        timed_out: list[str] = []
        for _ in range(400):
            await s.loops(1)
            timed_out = [
                h.detail
                for h in s.status().history
                if h.action == "transition" and h.outcome == "Warming -> Terminating"
            ]
            if len(timed_out) >= 2:
                break
        assert len(timed_out) >= 2, s.status().history
        status = s.status()
        twice = [dc for dc, times in status.datacenter_replacements.items() if len(times) >= 2]
        assert twice, status.datacenter_replacements
        assert set(twice) <= status.cooldown_datacenters(s.clock.now())
        creates_before = len(s.effects("create"))
        await s.until(lambda st: len(s.effects("create")) > creates_before, limit=200)
        latest = s.effects("create")[-1]
        assert not set(twice) & set(latest.datacenters), latest.datacenters

    story(body, manifest=pool_manifest(maxPerDatacenter=3))
