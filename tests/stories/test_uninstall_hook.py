"""Stories of `helm uninstall`: the chart's pre-delete hook (`rpp delete-pools --wait`) deletes
the chart's pools while the controller still runs, and waits until each is gone.

Without it Helm deletes the controller and the pools together, the finalizer is never
removed, and the pools stay Terminating with their pods billing. Here the real controller
loop runs on virtual time beside the hook's own code (`delete_pools`, over an in-memory
twin of its two API calls): the hook returns 0 only once RunPod lists none of the pool's
pods, and when the controller cannot finish (a Read Only key) it gives up at its timeout
with exit 1 and says why, so Helm keeps the controller and nothing is left half-deleted.
"""

from __future__ import annotations

import asyncio
import io
from typing import Any

from rpp.adapters.kube.api import KubeSettings
from rpp.commands.delete_pools import delete_pools
from rpp.sim.kube_memory import MemoryKubeApi
from tests.stories.test_replacement import healthy_pool
from tests.stories.world_kit import Story, story


class MemoryPoolDeletion:
    """The hook's two calls (rpp/adapters/kube/pool_deletion.py) on the in-memory API."""

    def __init__(self, kube: MemoryKubeApi) -> None:
        self.kube = kube

    @property
    def settings(self) -> KubeSettings:
        return self.kube.settings

    async def delete(self, name: str) -> bool:
        if not self.kube.has_pool(name):
            return False
        self.kube.delete_pool(name)
        return True

    async def read(self, name: str) -> dict[str, Any] | None:
        return self.kube.pool(name) if self.kube.has_pool(name) else None


async def controller_running(s: Story) -> None:
    """The controller's loop every 30 s, as long as the pool exists."""
    while s.world.kube.has_pool(s.name):
        await s.loops(1)


async def uninstall(s: Story, *, timeout: float) -> tuple[int, str]:
    out = io.StringIO()
    controller = asyncio.create_task(controller_running(s))
    try:
        code = await delete_pools(
            MemoryPoolDeletion(s.world.kube),
            [s.name, "never-installed"],
            wait=True,
            timeout=timeout,
            clock=s.clock,
            out=out,
        )
    finally:
        controller.cancel()
    return code, out.getvalue()


def test_the_hook_returns_once_the_controller_has_terminated_every_pod() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        assert len(s.world.cloud.pods) == 2
        started = s.clock.now()

        code, out = await uninstall(s, timeout=600)

        assert code == 0, out
        assert not s.world.kube.has_pool(s.name)
        assert s.world.cloud.pods == {}  # nothing left billing
        # The pods drained out of nginx for drain.period (150 s) before they went.
        assert (s.clock.now() - started).total_seconds() >= 150
        assert out.splitlines() == [
            "runpod/inference: deleted; its deletionPolicy is applied",
            "runpod/never-installed: not found, nothing to delete",
            "runpod/inference: gone",
        ]

    story(body)


def test_a_blocked_deletion_fails_the_hook_at_its_timeout_and_says_why() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        s.world.api_key = "ro-read-only-key"  # a Read Only key cannot terminate
        await s.world.restart_controller()

        code, out = await uninstall(s, timeout=300)

        assert code == 1
        assert s.world.kube.has_pool(s.name)  # still held: the controller keeps trying
        assert len(s.world.cloud.pods) == 2
        [still] = [line for line in out.splitlines() if "still there" in line]
        assert still.startswith("runpod/inference: still there after 5m: DeletionBlocked blocked")
        assert "(TerminateFailed)" in still
        assert "Read Only" in still

    story(body)
