"""Status writes are conflict-safe: a pool changed during a loop is re-read, never
overwritten blindly, and status never claims an action that was not carried out."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tests.stories.test_replacement import healthy_pool
from tests.stories.world_kit import Story, pool_manifest, story


def change_spec_during_next_write(s: Story, change: Callable[[], None]) -> list[int]:
    """Before the next status write reaches the API, someone applies a spec change."""
    kube = s.world.kube
    original = kube.replace_pool_status
    calls: list[int] = []

    async def racing(
        name: str, *, status: Mapping[str, Any], resource_version: str
    ) -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 1:
            change()
        return await original(name, status=status, resource_version=resource_version)

    kube.replace_pool_status = racing  # type: ignore[method-assign]
    return calls


def test_dry_run_status_is_re_decided_on_the_changed_spec_and_written() -> None:
    async def body(s: Story) -> None:
        await s.loops(2)
        calls = change_spec_during_next_write(s, lambda: s.apply(replicas={"min": 3, "max": 3}))
        await s.loops(1)
        assert len(calls) == 2, "one conflict, then one write"
        status = s.status()
        generation = s.world.kube.pool(s.name)["metadata"]["generation"]
        assert status.observed_generation == generation
        assert status.desired == 3
        assert any("of 3 wanted" in a.detail for a in status.planned_actions)

    story(body, manifest=pool_manifest(dryRun=True))


def test_manage_status_after_acting_is_written_over_a_spec_change_with_its_facts() -> None:
    async def body(s: Story) -> None:
        calls = change_spec_during_next_write(s, lambda: s.apply(drain={"period": "3m"}))
        await s.loops(1)  # this loop creates a pod; its first status write conflicts
        # The intents (written before the create) meet the spec change and are written
        # over it; then the status after acting is written.
        assert len(calls) == 3
        status = s.status()
        assert status.intents == ()
        assert len(status.members) == 1, "the created pod is in status"
        await s.until(lambda st: st.ready == 2, limit=20)
        assert len([c for c in s.world.cloud.calls if c.operation == "createPod"]) == 2

    story(body)


def test_manage_status_is_not_written_when_the_changed_spec_wants_actions_not_taken() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        before = s.status()
        calls = change_spec_during_next_write(
            s, lambda: s.apply(image="ghcr.io/example/inference:1.5.0")
        )
        await s.loops(1)  # nothing to do on the old spec; the new one wants a drain
        assert len(calls) == 1, "not written: it would claim a drain that did not happen"
        after = s.status()
        assert [m.phase for m in after.members] == [m.phase for m in before.members]
        assert all(m.slot is not None for m in after.members)
        await s.loops(1)
        drained = [m for m in s.status().members if m.phase == "Draining"]
        assert len(drained) == 1
        assert drained[0].slot is None
        assert drained[0].pod_id not in s.wired().values()

    story(body)


def test_a_status_the_api_server_pruned_is_read_back_not_remembered() -> None:
    """The reconciler reuses the status it wrote only when the server kept all of it:
    decisions come from what is stored, never from what this process sent."""

    async def body(s: Story) -> None:
        kube = s.world.kube
        original = kube.replace_pool_status

        async def pruning(
            name: str, *, status: Mapping[str, Any], resource_version: str
        ) -> dict[str, Any]:
            kept = {k: v for k, v in status.items() if k != "history"}  # a schema without it
            return await original(name, status=kept, resource_version=resource_version)

        kube.replace_pool_status = pruning  # type: ignore[method-assign]
        for _ in range(12):  # the pool fills: a transition or a create on most loops
            result = await s.loops(1)
            assert result.status is not None
            stored = s.status()
            assert stored.history == ()
            # What this loop wrote holds only this loop's entries: the last loop's were
            # pruned by the server, so they were not there to carry forward.
            assert all(
                entry.time == result.status.history[-1].time for entry in result.status.history
            )
        assert s.status().ready == 2

    story(body)


def test_a_re_decide_after_another_controllers_write_says_second_controller() -> None:
    """The loop acted on nothing and its status write meets a 409: another controller
    wrote the status since. The re-decide on the fresh pool must see that writer, as a
    loop that read it would: SecondController raised, not the other's mark overwritten
    by a status that says nothing of it."""

    async def body(s: Story) -> None:
        await healthy_pool(s)
        kube = s.world.kube
        original = kube.replace_pool_status
        calls: list[int] = []

        async def racing(
            name: str, *, status: Mapping[str, Any], resource_version: str
        ) -> dict[str, Any]:
            calls.append(1)
            if len(calls) == 1:
                theirs = s.status().replace(writer="rpp-other_0000")
                version = kube.pool(name)["metadata"]["resourceVersion"]
                await original(name, status=theirs.stored(), resource_version=version)
            return await original(name, status=status, resource_version=resource_version)

        kube.replace_pool_status = racing  # type: ignore[method-assign]
        await s.loops(1)
        assert len(calls) == 2, "one conflict, then the re-decided status written"
        cond = s.status().condition("SecondController")
        assert cond is not None
        assert cond.status == "True"
        assert "written by rpp-other_0000 after this controller (simulator)" in cond.message

    story(body)
