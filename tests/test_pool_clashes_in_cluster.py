"""Two pools the API server admitted that would fight: the later one waits, the first acts.

`rpp validate` refuses two pools with one namePrefix, one adopted pod or one nginx
ConfigMap when it is given both (rpp/model/clashes.py); the CRD cannot, since it judges
one object at a time. Past the API server the controller gives the same verdict: the
pool created first keeps acting, the later one is held in InvalidSpec naming the other
and what to change, and acts on nothing (no create, no terminate of the first pool's
pods it would take for its own). Once it is changed, it acts. The real controller loop
runs over the simulated world on virtual time.
"""

from __future__ import annotations

import asyncio

from rpp.model.clashes import held_back
from rpp.model.spec_load import load_pool
from rpp.model.status import PoolStatus
from rpp.sim.virtual_time import VirtualClock, run_virtual
from rpp.sim.world import World
from tests.controller_kit import manifest, world


def status(w: World, pool: str) -> PoolStatus:
    return PoolStatus.from_stored(w.kube.pool(pool).get("status") or {})


def invalid(w: World, pool: str) -> str | None:
    cond = status(w, pool).condition("InvalidSpec")
    return cond.message if cond is not None and cond.status == "True" else None


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


def test_only_pools_created_before_hold_a_pool_back() -> None:
    older, _ = load_pool(manifest("a", adopt=["abcdefgh1234"]))
    newer, _ = load_pool(manifest("b", adopt=["abcdefgh1234"]))
    other, _ = load_pool(manifest("c"))
    assert older is not None
    assert newer is not None
    assert other is not None
    t1, t2 = "2026-03-01T00:00:00Z", "2026-03-01T00:00:05Z"
    said = held_back(newer, created=t2, others=[(older, t1), (other, t1)])
    assert said == [
        f"pool b (created {t2}): adopts pod abcdefgh1234, as pool a (created {t1}) does; "
        "two pools would drive one pod: adopt it in one pool only"
    ]
    assert held_back(older, created=t1, others=[(newer, t2)]) == []
    # Created in the same second: the name decides, the same way for both.
    assert held_back(newer, created=t1, others=[(older, t1)]) != []
    assert held_back(older, created=t1, others=[(newer, t1)]) == []
