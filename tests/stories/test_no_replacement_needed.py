"""A flagged pod is replaced only when the pool needs it (finding 3).

When the pods that serve meet desired without a flagged pod, the pool does not create
its replacement: scale-down takes it first (drained if it serves, terminated at once
if it serves nothing), and no healthy Ready pod is drained in its place.
"""

from __future__ import annotations

from typing import Any

from tests.stories.test_capacity_and_notices import CRITICAL, with_host_notice
from tests.stories.test_replacement import ready_pods
from tests.stories.world_kit import LIMITS, Story, pool_manifest, story

# Each story grows the pool to 3 and may replace a pod: more than 3 creates an hour.
ROOMY = {**LIMITS, "maxCreatesPerHour": 6}


def test_a_flagged_pod_the_pool_does_not_need_is_taken_by_scale_down_not_replaced() -> None:
    async def body(s: Story) -> None:
        s.apply(replicas={"min": 3, "max": 3})
        before = await s.until(lambda st: st.ready == 3, limit=20)
        creates = len([c for c in s.world.cloud.calls if c.operation == "createPod"])
        healthy = sorted(ready_pods(before))
        victim, keep = healthy[0], healthy[1:]
        # One instant: the pool shrinks to 2, and RunPod flags the machine of a pod.
        s.apply(replicas={"min": 2, "max": 2})
        s.world.cloud.set_machine_note(victim, CRITICAL)
        final = await s.until(lambda st: st.member(victim) is None and st.ready == 2, limit=20)
        assert sorted(ready_pods(final)) == keep, "the healthy pods stay"
        assert len([c for c in s.world.cloud.calls if c.operation == "createPod"]) == creates
        transitions = [h for h in final.history if h.pod == victim and h.action == "transition"]
        assert any(h.outcome == "Flagged -> Draining" for h in transitions)
        assert any("not replaced" in h.detail for h in transitions)
        assert not [h for h in final.history if h.pod in keep and "Draining" in h.outcome]

    manifest: dict[str, Any] = with_host_notice(True)
    manifest["spec"]["limits"] = ROOMY
    story(body, manifest=manifest)


def test_a_flagged_pod_with_a_warming_replacement_goes_first_when_the_pool_shrinks() -> None:
    async def body(s: Story) -> None:
        s.apply(replicas={"min": 3, "max": 3})
        before = await s.until(lambda st: st.ready == 3, limit=20)
        victim = sorted(ready_pods(before))[0]
        # Slow, not dead: a flagged pod that still serves waits for its replacement
        # (surge-first); a dead one would be terminated at once, and with it the story.
        s.world.pods[victim].slow(8.0)
        warming = await s.until(
            lambda st: any(m.replacement_for == victim for m in st.members), limit=40
        )
        flagged = warming.member(victim)
        assert flagged is not None
        assert (flagged.phase, flagged.wired) == ("Flagged", True), "it still serves"
        s.apply(replicas={"min": 2, "max": 2})
        final = await s.until(lambda st: st.member(victim) is None, limit=20)
        assert set(ready_pods(before)) - {victim} <= {m.pod_id for m in final.members}
        left = [h for h in final.history if h.pod == victim and h.action == "transition"]
        assert any(h.outcome == "Flagged -> Draining" for h in left), "drained: it served"
        settled = await s.until(lambda st: len(st.members) == 2 and st.ready == 2, limit=20)
        assert set(ready_pods(settled)) == set(ready_pods(before)) - {victim}

    story(body, manifest=pool_manifest(limits=ROOMY, maxPerDatacenter=2))
