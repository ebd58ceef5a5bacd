"""RunPod lists a created pod late (finding 4 of issue 25: unconfirmed creates count).

RunPod answers a create with the new pod's id, yet its pod list (and GET) may show the
pod a minute or more later. Each story sets the fake cloud's listing lag and checks, from
RunPod's ground truth, that the pod the pool was told about counts while it waits: no
second create for its need, maxPods and the cost cap hold, and no other create goes out
until it is listed or health.createListingGrace has passed.
"""

from __future__ import annotations

from rpp.sim.faults import ListingLag
from tests.stories.test_replacement import healthy_pool, ready_pods
from tests.stories.world_kit import LIMITS, Story, pool_manifest, story


def creates(s: Story) -> int:
    return sum(1 for c in s.world.cloud.calls if c.operation == "createPod")


def test_a_pod_listed_90s_late_is_waited_for_not_created_again() -> None:
    async def body(s: Story) -> None:
        s.world.cloud.listing_lag = 90.0
        await s.loops(2)  # the first create, then a loop whose listing lacks its pod
        first = s.status()
        (waiting,) = first.members
        assert waiting.phase == "Warming"
        assert waiting.unconfirmed_since is not None
        assert not await s.world.controller.runpod.list_pods(), "RunPod does not list it yet"
        blocked = first.condition("CreateBlocked")
        assert blocked is not None
        assert blocked.reason == "CreateUnconfirmed"
        assert waiting.pod_id in blocked.message
        assert creates(s) == 1
        status = await healthy_pool(s)
        assert creates(s) == 2, "one pod per need, though each was listed 90 s late"
        assert len(s.world.cloud.pods) == 2
        assert all(m.unconfirmed_since is None for m in status.members)

    story(body)


def test_an_unlisted_replacement_counts_against_max_pods_and_the_cost_cap() -> None:
    # Room for exactly one surge pod, by count and by cost ($0.69 a pod).
    limits = {**LIMITS, "maxPods": 3, "maxHourlyCostUsd": 2.1, "maxCreatesPerHour": 6}

    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        s.world.cloud.listing_lag = 150.0
        victim = sorted(ready_pods(before))[0]
        s.world.pods[victim].die()
        most = 0
        for _ in range(30):
            await s.loops(1)
            most = max(most, len(s.world.cloud.pods))
        final = s.status()
        assert most == 3, "the two pods and one replacement, never a second one"
        assert creates(s) == 3
        assert final.ready == 2
        assert final.member(victim) is None
        assert final.cost_per_hour <= 2.1

    story(body, manifest=pool_manifest(limits=limits))


def test_a_pod_never_listed_within_the_grace_goes_and_its_need_is_created_again() -> None:
    manifest = pool_manifest()
    manifest["spec"]["health"] = {**manifest["spec"].get("health", {}), "createListingGrace": "2m"}

    async def body(s: Story) -> None:
        s.world.cloud.faults.next("createPod", ListingLag(seconds=3600))
        await s.loops(1)
        (lost,) = s.status().members
        await s.loops(3)  # up to 90 s after its create: still waited for
        assert s.status().member(lost.pod_id) is not None
        assert creates(s) == 1
        gone = await s.until(lambda st: st.member(lost.pod_id) is None, limit=6)
        assert gone.member(lost.pod_id) is None
        await healthy_pool(s)
        assert creates(s) == 3, "after the grace the unlisted pod is gone: its need is open"

    story(body, manifest=manifest)
