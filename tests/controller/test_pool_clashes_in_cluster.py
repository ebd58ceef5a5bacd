"""Two pools the API server admitted that would fight: one waits, the other acts.

`rpp validate` refuses two pools with one namePrefix, one adopted pod or one nginx
ConfigMap when it is given both (rpp/model/clashes.py); the CRD cannot, since it judges
one object at a time. Past the API server the controller gives the same verdict to one
of the two: the one whose spec just changed (a pool applied beside a running one, or a
running pool edited into the clash), else the later one, waits in InvalidSpec naming the
other and what to change, and acts on nothing (no create, no terminate of the pods it
would take for its own); it keeps waiting while the clash lasts. Once it is changed, it
acts. The real controller loop runs over the simulated world on virtual time.
"""

from __future__ import annotations

import asyncio

from rpp.model.clashes import Stored, held_back
from rpp.model.spec_load import load_pool
from rpp.sim.virtual_time import VirtualClock, run_virtual
from rpp.sim.world import World
from tests.controller_kit import manifest, raised, status, world


def invalid(w: World, pool: str) -> str | None:
    return raised(status(w, pool), "InvalidSpec")


async def loops(w: World, count: int) -> None:
    for _ in range(count):
        await w.loop()
        await asyncio.sleep(30)


def test_a_later_pool_with_the_first_ones_name_prefix_waits_and_takes_none_of_its_pods() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"))
        await loops(w, 12)
        assert status(w, "inference").ready == 2
        first = {m.pod_id for m in status(w, "inference").members}
        pods = {p.info.pod_id for p in w.cloud.pods.values()}

        w.apply_pool(manifest("batch", namePrefix="rpp-inference-"))
        await loops(w, 6)

        message = invalid(w, "batch")
        assert message is not None
        assert "namePrefix rpp-inference- is also pool inference" in message
        assert "give each pool its own prefix" in message
        assert status(w, "batch").members == ()
        assert invalid(w, "inference") is None
        assert {m.pod_id for m in status(w, "inference").members} == first
        assert {p.info.pod_id for p in w.cloud.pods.values()} == pods  # nothing made or ended

        w.patch_pool("batch", {"namePrefix": "rpp-batch-"})
        await loops(w, 12)
        assert invalid(w, "batch") is None
        assert status(w, "batch").ready == 2
        assert {m.pod_id for m in status(w, "inference").members} == first
        await w.close()

    run_virtual(body)


def test_a_running_pool_edited_into_a_clash_waits_and_the_pool_it_would_fight_acts() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"))
        await loops(w, 12)
        w.apply_pool(manifest("batch"))
        await loops(w, 12)
        assert status(w, "batch").ready == 2
        kept = {m.pod_id for m in status(w, "batch").members}
        pods = {p.info.pod_id for p in w.cloud.pods.values()}

        # The older pool is edited to the newer one's prefix: it would take the newer
        # one's pods for its own. It is the one that waits, on every loop after (once
        # its change is judged too), and the newer one keeps its pods.
        w.patch_pool("inference", {"namePrefix": "rpp-batch-"})
        await loops(w, 6)

        message = invalid(w, "inference")
        assert message is not None
        assert "namePrefix rpp-batch- is also pool batch" in message
        held = status(w, "inference").condition("InvalidSpec")
        assert held is not None
        assert held.reason == "ClashesWithPool"
        assert invalid(w, "batch") is None
        assert {m.pod_id for m in status(w, "batch").members} == kept
        assert {p.info.pod_id for p in w.cloud.pods.values()} == pods
        await w.close()

    run_virtual(body)


def test_two_clashing_pools_applied_together_are_not_both_acted_on_through_the_watch() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock)
        w.apply_pool(manifest("inference"))
        w.apply_pool(manifest("batch", namePrefix="rpp-inference-"))
        # The watch sees both before any loop has listed them.
        for pool in ("inference", "batch"):
            await w.controller.loop.reconcile_now(pool)
        await loops(w, 12)

        held = [pool for pool in ("inference", "batch") if invalid(w, pool)]
        assert held == ["inference"]  # created in the same second: the name decides
        assert status(w, "inference").create_log == ()
        assert status(w, "batch").ready == 2
        assert len(w.cloud.pods) == 2
        await w.close()

    run_virtual(body)


def stored(name: str, created: str, *, changed: bool = False, held: bool = False) -> Stored:
    pool, problems = load_pool(manifest(name, adopt=["abcdefgh1234"]))
    assert pool is not None, problems
    return Stored(pool=pool, created=created, changed=changed, held=held)


def test_of_two_clashing_pools_the_waiting_then_the_changed_then_the_later_one_yields() -> None:
    t1, t2 = "2026-03-01T00:00:00Z", "2026-03-01T00:00:05Z"
    a, b = stored("a", t1), stored("b", t2)
    assert held_back(b, [a]) == [
        f"pool b (created {t2}): adopts pod abcdefgh1234, as pool a (created {t1}) does; "
        "two pools would drive one pod: adopt it in one pool only"
    ]
    assert held_back(a, [b]) == []
    # The older one's spec just changed: the change made the clash, it waits.
    changed = stored("a", t1, changed=True)
    assert held_back(changed, [b]) != []
    assert held_back(b, [changed]) == []
    # One already waiting keeps waiting, even when the other changes later.
    assert held_back(stored("a", t1, held=True), [stored("b", t2, changed=True)]) != []
    # Created in the same second: the name decides, the same way for both.
    a2, b1 = stored("a", t2), stored("b", t2)
    assert held_back(b1, [a2]) != []
    assert held_back(a2, [b1]) == []
    # A pool of its own clashes with nobody.
    other, _ = load_pool(manifest("c"))
    assert other is not None
    assert held_back(Stored(pool=other, created=t2, changed=True, held=False), [a]) == []
