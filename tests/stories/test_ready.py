"""Stories of the aggregate Ready condition, the one `kubectl wait --for=condition=Ready`,
Argo CD and Flux judge a pool by (docs/operating.md#ready).

True in Manage once at least `desired` members are Ready and in nginx; in DryRun and
Observe once the controller plans or observes without trouble; False while the spec is
invalid, the pool is NotActing, its reconcile failed, or it is being deleted. Its flips
are Events: NotReady (Warning), Ready (Normal).
"""

from __future__ import annotations

from rpp.model.status import PoolStatus
from rpp.sim.faults import ServerError
from tests.stories.test_replacement import healthy_pool, ready_pods
from tests.stories.world_kit import Story, pool_manifest, story


def ready(status: PoolStatus) -> tuple[str, str]:
    cond = status.condition("Ready")
    assert cond is not None, "every status the controller writes has Ready"
    assert cond.observed_generation == status.observed_generation  # kstatus reads both
    return cond.status, cond.reason


def flips(s: Story) -> dict[str, int]:
    """How many times Ready's Events were recorded, by reason (repeats bump a count)."""
    counts: dict[str, int] = {}
    for event in s.world.kube.events:
        if event["reason"] in ("Ready", "NotReady"):
            counts[event["reason"]] = counts.get(event["reason"], 0) + event["count"]
    return counts


def test_a_manage_pool_is_ready_once_desired_pods_serve_and_says_when_it_is_not() -> None:
    async def body(s: Story) -> None:
        await s.loops(1)
        assert ready(s.status()) == ("False", "PodsNotReady")
        first = s.status().condition("Ready")
        assert first is not None
        assert "0 of 2 desired" in first.message

        status = await healthy_pool(s)
        assert ready(status) == ("True", "PodsReady")
        assert flips(s) == {"Ready": 1}

        victim = sorted(ready_pods(status))[0]
        s.world.pods[victim].die()
        down = await s.until(lambda st: st.ready < 2, limit=20)
        assert ready(down) == ("False", "PodsNotReady")
        back = await s.until(lambda st: st.ready == 2 and st.member(victim) is None, limit=60)
        assert ready(back) == ("True", "PodsReady")
        assert flips(s) == {"Ready": 2, "NotReady": 1}

    story(body)


def test_not_acting_makes_the_pool_not_ready_with_its_reason() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        s.world.cloud.faults.always("listPods", ServerError(status=503))
        await s.loops(1)
        assert ready(s.status()) == ("False", "NotActing")
        s.world.cloud.faults.clear()
        await s.loops(1)
        assert ready(s.status()) == ("True", "PodsReady")

    story(body)


def test_an_invalid_spec_makes_the_pool_not_ready() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        s.apply(replicas={"min": 3, "max": 2})
        await s.loops(1)
        assert ready(s.status()) == ("False", "InvalidSpec")

    story(body)


def test_dry_run_and_observe_are_ready_when_the_controller_plans_or_observes() -> None:
    async def body(s: Story) -> None:
        await s.loops(2)
        assert ready(s.status()) == ("True", "DryRun")
        s.apply(paused=True)
        await s.loops(1)
        assert ready(s.status()) == ("True", "Observe")

    story(body, manifest=pool_manifest(dryRun=True))


def test_a_pool_being_deleted_is_not_ready() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        s.world.kube.delete_pool(s.name)
        await s.loops(1)
        assert ready(s.status()) == ("False", "Deleting")

    story(body)
