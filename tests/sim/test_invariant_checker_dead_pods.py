"""The checker catches a dead pool that bills in silence, and a Ready that lies (issue 25).

Each invariant is shown a controller that does nothing (the stand-in: loops end, the
checker judges them, but no decision is made), so what the checker says is about the
world alone: a dead pod RunPod bills past 15 minutes, dead pods kept in nginx past 60 s
even when they are the last or all of them, a status saying Ready while nothing in nginx
answers. And each is shown what the controller may do on purpose: the pool-wide hold, one
loop of lag, all pods down while RunPod's listing cannot be read.
"""

from __future__ import annotations

import asyncio
import contextlib

from rpp.adapters.clock import to_rfc3339
from rpp.adapters.runpod.answers import RunPodError
from rpp.controller.reconcile import PoolResult
from rpp.sim.check import Checker
from rpp.sim.check.dead_billed import DEAD_BILLED
from rpp.sim.check.dead_wired import DEAD_WIRED
from rpp.sim.check.ready_claims import READY_LIE
from rpp.sim.faults import ServerError
from tests.sim.test_invariant_checker import ROOMY, checked
from tests.stories.world_kit import Story


async def idle(s: Story, checker: Checker, loops: int, *, list_pods: bool = False) -> None:
    """A controller that does nothing for `loops` loops of 30 s; the checker judges each.
    With `list_pods`, each loop reads RunPod's listing through the controller's client."""
    for _ in range(loops):
        await asyncio.sleep(30)
        if list_pods:
            with contextlib.suppress(RunPodError):
                await s.world.controller.runpod.list_pods()
        checker._loop(PoolResult(s.name, None, (), None, True))


async def ready_pool(s: Story) -> list[str]:
    await s.until(lambda st: st.ready == 2, limit=20)
    return sorted(s.wired().values())


async def hold(s: Story) -> None:
    """The pool's stored status says PoolWideDegradation True, as the hold writes it."""
    stored = dict(s.world.kube.pool(s.name)["status"])
    held = {
        "type": "PoolWideDegradation",
        "status": "True",
        "reason": "Unreachable",
        "message": "every Ready pod breaches Unreachable; health.poolWideHold 30m",
        "lastTransitionTime": to_rfc3339(s.clock.now()),
    }
    stored["conditions"] = [*stored.get("conditions", []), held]
    await s.set_status(stored)


def dead_pod_left(minutes: int, *, held: bool = False) -> list[str]:
    async def body(s: Story, checker: Checker) -> None:
        victim = (await ready_pool(s))[0]
        s.world.pods[victim].die()
        if held:
            await hold(s)
        await idle(s, checker, 2 * minutes)

    return checked(body)


def test_a_dead_pod_billed_15_minutes_after_a_loop_could_see_it_is_caught() -> None:
    broken = dead_pod_left(16)
    assert broken.count(DEAD_BILLED) == 1
    assert dead_pod_left(14).count(DEAD_BILLED) == 0


def test_a_dead_pod_kept_while_the_pool_wide_hold_holds_is_not_counted() -> None:
    assert dead_pod_left(40, held=True).count(DEAD_BILLED) == 0


def test_a_dead_pod_the_controller_replaces_and_terminates_is_not_billed_too_long() -> None:
    async def body(s: Story, checker: Checker) -> None:
        victim = (await ready_pool(s))[0]
        s.world.pods[victim].die()
        await s.until(lambda st: st.member(victim) is None and st.ready == 2, limit=60)

    assert checked(body, limits=ROOMY) == []


def test_ready_true_while_no_wired_pod_answers_is_caught_after_one_loop_of_lag() -> None:
    def all_dead(loops: int) -> list[str]:
        async def body(s: Story, checker: Checker) -> None:
            for pod in await ready_pool(s):
                s.world.pods[pod].hang()
            await idle(s, checker, loops)

        return checked(body)

    assert all_dead(1) == []  # the status of the loop that probed before they hung
    assert all_dead(2) == [READY_LIE]


def test_ready_true_while_one_wired_pod_answers_is_no_lie() -> None:
    async def body(s: Story, checker: Checker) -> None:
        s.world.pods[(await ready_pool(s))[0]].die()
        await idle(s, checker, 2)

    assert READY_LIE not in checked(body)


def test_dead_pods_kept_wired_are_caught_even_the_last_and_all_of_them() -> None:
    """Every wired pod dead, and RunPod's listing read: the controller's network works, so
    nginx must lose them within 60 s. Only while the listing fails are they kept."""

    def all_dead(*, listing_fails: bool) -> list[str]:
        async def body(s: Story, checker: Checker) -> None:
            for pod in await ready_pool(s):
                s.world.pods[pod].die()
            if listing_fails:
                s.world.cloud.faults.always("listPods", ServerError(status=503))
            await idle(s, checker, 4, list_pods=True)

        return checked(body)

    assert all_dead(listing_fails=False).count(DEAD_WIRED) == 2
    assert all_dead(listing_fails=True).count(DEAD_WIRED) == 0


def test_the_last_wired_pod_dead_is_caught() -> None:
    async def body(s: Story, checker: Checker) -> None:
        await s.until(lambda st: st.ready == 1, limit=20)
        s.world.pods[sorted(s.wired().values())[0]].die()
        await idle(s, checker, 4, list_pods=True)

    broken = checked(body, replicas={"min": 1, "max": 1})
    assert broken.count(DEAD_WIRED) == 1
