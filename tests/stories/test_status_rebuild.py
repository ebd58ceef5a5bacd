"""An unreadable or empty status is rebuilt from ground truth (finding 5).

Status is the pool's only memory; a backup restored without it, a status written by
another version, or a hand edit used to stop the pool for good with only a log line.
Now the pool rebuilds it in one loop that creates and terminates nothing: the pods
RunPod lists for the pool, each serving in the slot nginx has for it, the old status
kept in an annotation, an Event and a history entry saying what happened.
"""

from __future__ import annotations

import json

from rpp.controller.pool_writes import OLD_STATUS_ANNOTATION
from rpp.model.spec import API_GROUP
from rpp.model.status import PoolStatus
from rpp.sim import faults
from tests.stories.test_replacement import healthy_pool, ready_pods
from tests.stories.world_kit import Story, story


def actions(s: Story, since: int) -> list[str]:
    return [
        e.action
        for r in s.results[since:]
        if r.decision
        for e in r.decision.effects
        if e.action in ("create", "terminate", "update")
    ]


def test_an_unreadable_status_is_rebuilt_and_the_old_one_kept_in_an_annotation() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        broken = {**before.stored(), "members": "lost in a bad edit"}
        await s.set_status(broken)
        mark = len(s.results)
        result = await s.loops(1)
        assert result.status is not None
        rebuilt = s.status()
        assert ready_pods(rebuilt) == ready_pods(before), "serving in the same slots"
        assert {m.pod_id: m.slot for m in rebuilt.members} == {
            m.pod_id: m.slot for m in before.members
        }
        assert actions(s, mark) == [], "the rebuild loop creates and terminates nothing"
        kept = s.world.kube.pool(s.name)["metadata"]["annotations"]
        assert json.loads(kept[f"{API_GROUP}/{OLD_STATUS_ANNOTATION}"]) == broken
        (event,) = [e for e in s.world.kube.events if e["reason"] == "StatusRebuilt"]
        assert "status.members" in event["message"]
        (entry,) = [h for h in rebuilt.history if h.action == "rebuild"]
        assert "status rebuilt from ground truth" in entry.detail
        await s.loops(10)
        assert s.status().ready == 2
        assert len(s.world.cloud.pods) == 2, "no second pod for a member it forgot"

    story(body)


def test_an_empty_status_while_nginx_serves_pods_is_rebuilt() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        await s.set_status({})
        mark = len(s.results)
        await s.loops(1)
        rebuilt = s.status()
        assert ready_pods(rebuilt) == ready_pods(before)
        assert actions(s, mark) == []
        assert [e for e in s.world.kube.events if e["reason"] == "StatusRebuilt"]
        annotations = s.world.kube.pool(s.name)["metadata"].get("annotations") or {}
        assert f"{API_GROUP}/{OLD_STATUS_ANNOTATION}" not in annotations, "nothing to keep"

    story(body)


def test_a_status_holding_only_the_defaulted_observed_generation_counts_as_empty() -> None:
    """What the API server reads back for a restored pool when the CRD defaults
    status.observedGeneration to 0 (so kstatus waits for a new pool): still empty."""

    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        await s.set_status({"observedGeneration": 0})
        await s.loops(1)
        assert ready_pods(s.status()) == ready_pods(before)
        assert [e for e in s.world.kube.events if e["reason"] == "StatusRebuilt"]

    story(body)


def test_an_empty_status_is_rebuilt_while_runpods_answer_for_a_pool_pod_reads_oddly() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        odd = sorted(ready_pods(before))[0]
        s.world.cloud.faults.always(
            "listPods", faults.OddFields(set={"gpu.count": "two"}, pods=(odd,))
        )
        await s.set_status({})
        mark = len(s.results)
        await s.loops(1)
        rebuilt = s.status()
        assert {m.pod_id: m.slot for m in rebuilt.members} == {
            m.pod_id: m.slot for m in before.members
        }
        assert actions(s, mark) == []
        assert [e for e in s.world.kube.events if e["reason"] == "StatusRebuilt"]
        unreadable = rebuilt.condition("UnreadablePods")
        assert unreadable is not None
        assert unreadable.status == "True"

    story(body)


def test_a_new_pool_starts_without_a_rebuild() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        assert not [e for e in s.world.kube.events if e["reason"] == "StatusRebuilt"]
        assert not [h for h in s.status().history if h.action == "rebuild"]
        assert PoolStatus.from_stored(s.world.kube.pool(s.name)["status"]).ready == 2

    story(body)
