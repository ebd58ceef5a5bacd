"""The cost cap is a hard cap, at RunPod's prices (finding 2).

The pool used to add limits.estimatedPodCostUsd for the pod about to be created even
when RunPod's catalog said what it costs: with a $0.50 estimate and GPUs at $1.49/h, a
$2.50 cap let the pool reach $2.98/h. Now one more pod costs its catalog price, checked
in decide with the prices the last create read and again in act with the fresh catalog.
"""

from __future__ import annotations

from tests.stories.test_replacement import ready_pods
from tests.stories.world_kit import DATACENTERS, GPU, Story, pool_manifest, story

LIMITS = {
    "maxPods": 4,
    "maxHourlyCostUsd": 2.5,
    "maxCreatesPerHour": 6,
    "estimatedPodCostUsd": 0.5,
}


def cost(s: Story) -> float:
    return sum(p.cost_per_hr for p in s.world.cloud.pods.values())


def priced(s: Story, price: float) -> None:
    for dc in DATACENTERS:
        s.world.cloud.set_stock(dc, GPU, "SECURE", 5, cost_per_hr=price)


def test_a_pod_at_the_catalog_price_that_would_pass_the_cap_is_never_created() -> None:
    async def body(s: Story) -> None:
        priced(s, 1.49)
        costs: list[float] = []
        s.world.cloud_listeners.append(lambda _: costs.append(cost(s)))
        await s.until(lambda st: st.ready == 1, limit=20)
        await s.loops(20)
        assert max(costs) <= 2.5, costs
        assert len(s.world.cloud.pods) == 1, "a second pod at $1.49/h would pass $2.50/h"
        status = s.status()
        assert status.catalog_prices == {GPU: 1.49}
        blocked = status.condition("CreateBlocked")
        assert blocked is not None
        assert blocked.reason == "CostCapReached"
        assert "$1.49/h" in blocked.message
        assert "the pool costs $1.49/h" in blocked.message

    story(body, manifest=pool_manifest(limits=LIMITS))


def test_a_price_rise_after_the_last_create_is_caught_by_the_fresh_catalog() -> None:
    async def body(s: Story) -> None:
        priced(s, 0.69)
        first = await s.until(lambda st: st.ready == 2, limit=20)
        assert first.cost_per_hour == 1.38
        priced(s, 1.49)  # the list price rises; status still remembers $0.69
        victim = sorted(ready_pods(first))[0]
        s.world.pods[victim].die()
        await s.until(lambda st: st.member(victim) is None, limit=40)
        await s.loops(20)
        assert cost(s) <= 2.5
        refused = [
            done
            for result in s.results
            for done in result.results
            if done.effect.action == "create" and "over the cost cap" in done.detail
        ]
        assert refused, "act read $1.49 and tried no candidate over what was left"
        assert s.status().catalog_prices == {GPU: 1.49}

    story(body, manifest=pool_manifest(limits=LIMITS))
