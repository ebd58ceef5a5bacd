"""Stories of deleting a pool: the pods stop billing before the pool goes, or stay on purpose.

Every Manage pool carries the controller's finalizer. Deleted with deletionPolicy Delete,
its pods are drained, terminated (each re-read first) and the pool goes only once RunPod
lists none of them; when that cannot happen (RunPod unreachable, a Read Only key) the pool
stays and DeletionBlocked says why. Retain, DryRun and Observe leave the pods, and an
Event names them. A pool deleted while no controller ran is handled by the next one.
"""

from __future__ import annotations

from rpp.adapters.kube.api import KubeSettings
from rpp.sim.faults import ServerError
from tests.crd_admission import status_problems
from tests.stories.test_replacement import healthy_pool
from tests.stories.world_kit import Story, pool_manifest, story

FINALIZER = KubeSettings(namespace="runpod").finalizer


def finalizers(s: Story) -> list[str]:
    return list(s.world.kube.pool(s.name)["metadata"].get("finalizers") or [])


def exists(s: Story) -> bool:
    return s.world.kube.has_pool(s.name)


async def loops_while_it_exists(s: Story, count: int) -> None:
    """Up to `count` loops, stopping once the pool is gone (a loop then has no pool)."""
    for _ in range(count):
        if not exists(s):
            return
        await s.loops(1)


def blocked(s: Story) -> tuple[str, str, str] | None:
    cond = s.status().condition("DeletionBlocked")
    return None if cond is None else (cond.status, cond.reason, cond.message)


def events(s: Story, reason: str) -> list[str]:
    return [e["message"] for e in s.world.kube.events if e["reason"] == reason]


def pods_on_runpod(s: Story) -> set[str]:
    return set(s.world.cloud.pods)


def test_a_deleted_pool_drains_and_terminates_every_pod_before_it_goes() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        pods = {m.pod_id for m in before.members}
        assert finalizers(s) == [FINALIZER]

        s.world.kube.delete_pool(s.name)
        await s.loops(1)

        assert exists(s)  # held by the finalizer
        status = s.status()
        assert {m.phase for m in status.members} == {"Draining"}
        assert s.wired() == {}  # nginx stops sending to them first
        assert pods_on_runpod(s) == pods  # requests under way finish: drain.period
        assert any("2 pod(s) are drained and terminated" in m for m in events(s, "PoolDeleting"))
        await loops_while_it_exists(s, 12)

        assert not exists(s)
        assert pods_on_runpod(s) == set()  # nothing bills any more
        assert events(s, "PoolDeleted")

    story(body)


def test_a_pool_deleted_while_the_controller_was_down_is_cleaned_up_by_the_next_one() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        await s.world.controller.close()  # the controller is down...
        s.world.kube.delete_pool(s.name)  # ...when the pool is deleted
        s.world.controller = s.world.new_controller()

        await loops_while_it_exists(s, 12)

        assert not exists(s)
        assert pods_on_runpod(s) == set()

    story(body)


def test_a_read_only_key_blocks_the_deletion_and_the_status_says_why() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        s.world.api_key = "ro-read-only-key"  # someone rotated the key to a Read Only one
        await s.world.restart_controller()
        s.world.kube.delete_pool(s.name)

        await s.loops(10)  # past drain.period: the terminates are refused

        assert exists(s)
        status, reason, message = blocked(s) or ("", "", "")
        assert (status, reason) == ("True", "TerminateFailed")
        assert "Read Only" in message
        assert len(pods_on_runpod(s)) == 2
        assert any("Read Only" in m for m in events(s, "TerminateFailed"))
        assert events(s, "DeletionBlocked")
        # The API server would take this status: the CRD's status schema admits it.
        assert status_problems(s.world.kube.pool(s.name)["status"]) == []

        s.world.api_key = "an-all-key"  # fixed: the next retry goes through
        await s.world.restart_controller()
        await loops_while_it_exists(s, 20)
        assert not exists(s)
        assert pods_on_runpod(s) == set()

    story(body)


def test_runpod_unreachable_blocks_the_deletion_until_it_answers() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        s.world.cloud.faults.always("listPods", ServerError(status=503))
        s.world.kube.delete_pool(s.name)

        await s.loops(3)

        assert exists(s)
        status, reason, message = blocked(s) or ("", "", "")
        assert (status, reason) == ("True", "RunPodUnavailable")
        assert "cannot be read" in message
        # `kubectl describe rpp` says the same: one Warning Event, not one per loop.
        raised = [e for e in s.world.kube.events if e["reason"] == "DeletionBlocked"]
        assert [(e["type"], e["message"]) for e in raised] == [("Warning", message)]
        s.world.cloud.faults.clear()
        await loops_while_it_exists(s, 12)
        assert not exists(s)
        assert pods_on_runpod(s) == set()

    story(body)


def test_retain_leaves_the_pods_running_and_the_event_names_them() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        pods = {m.pod_id for m in before.members}
        s.world.kube.delete_pool(s.name)

        await loops_while_it_exists(s, 2)

        assert not exists(s)
        assert pods_on_runpod(s) == pods
        (retained,) = events(s, "PodsRetained")
        assert all(pod in retained for pod in pods)
        assert "deletionPolicy Retain" in retained

    story(body, manifest=pool_manifest(deletionPolicy="Retain"))


def test_a_pool_switched_out_of_manage_loses_its_finalizer_and_goes_at_once() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        assert finalizers(s) == [FINALIZER]
        s.apply(dryRun=True)
        await s.loops(1)
        assert finalizers(s) == []  # DryRun never terminates pods: nothing to wait for

        s.world.kube.delete_pool(s.name)

        assert not exists(s)
        assert pods_on_runpod(s) == {m.pod_id for m in before.members}

    story(body)


def test_a_pod_created_but_not_yet_in_status_is_terminated_with_the_pool() -> None:
    async def body(s: Story) -> None:
        await s.loops(1)  # the first create is sent
        # A create whose answer was lost: RunPod has the pod, the status does not yet.
        stray = s.world.cloud.add_pod(
            name="rpp-inference-zz9",
            image="ghcr.io/example/inference:1.4.2",
            gpu_type="NVIDIA GeForce RTX 4090",
            datacenter="EU-NL-1",
        )
        s.world.kube.delete_pool(s.name)

        await loops_while_it_exists(s, 12)

        assert not exists(s)
        assert stray.info.pod_id not in pods_on_runpod(s)
        assert pods_on_runpod(s) == set()

    story(body)
