"""The invariant checker catches what it is there to catch.

A checker that never fires proves nothing, so each invariant group is shown a world
where the controller's hands (its own RunPod client and Kubernetes view) do the wrong
thing: a pod past maxPods and the cost cap, creates past the hourly cap, a create the
pool did not need, a foreign pod deleted, a slot left on a vanished pod, a pod RunPod
lists that status forgot. Each yields one violation naming the loop and the numbers.
And `rpp simulate --check` exits 1 when a run breaks one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml

from rpp.adapters.runpod.wire import PodRequest
from rpp.cli import main
from rpp.controller.reconcile import PoolResult
from rpp.model.durations import parse_duration
from rpp.sim.check import Checker, Violation, check
from rpp.sim.check.checker import NoChecks
from rpp.sim.check.ending import HEAL_LOOPS
from rpp.sim.check.serving import Serving
from rpp.sim.faults import MalformedJson, Timeout
from rpp.sim.soak import CaseResult
from rpp.sim.virtual_time import VirtualClock, run_virtual
from rpp.sim.world import World
from tests.stories.world_kit import GPU, Story, pool_manifest

ROOT = Path(__file__).parents[2]
LIMITS = {
    "maxPods": 3,
    "maxHourlyCostUsd": 2.0,
    "maxCreatesPerHour": 3,
    "estimatedPodCostUsd": 0.7,
}
# Room for a pod more than the pool, and for its creates.
ROOMY = {**LIMITS, "maxPods": 4, "maxHourlyCostUsd": 10.0, "maxCreatesPerHour": 6}


def checked(body: Callable[[Story, Checker], Awaitable[None]], **spec: Any) -> list[str]:
    """Run `body` on a story world with a checker; the invariants it broke."""
    spec.setdefault("limits", LIMITS)

    async def main_(clock: VirtualClock) -> list[str]:
        s = Story(clock, manifest=pool_manifest(**spec))
        checker = check(s.world, s.name)
        try:
            await body(s, checker)
            checker.finish()
        finally:
            await s.world.close()
        return [v.invariant for v in checker.violations]

    return run_virtual(main_)


async def create(world: World, name: str, datacenter: str = "EU-RO-1") -> str:
    """The controller's own client makes a pod, as a buggy loop would."""
    pod = await world.controller.runpod.create_pod(
        PodRequest(name=name, image="img:1", template_id="tpl-inference"),
        gpu_type=GPU,
        datacenter=datacenter,
        cloud="SECURE",
    )
    return pod.id


def test_creates_past_max_pods_the_cost_cap_and_the_hourly_cap_are_caught() -> None:
    async def body(s: Story, checker: Checker) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        await create(s.world, "rpp-inference-extra1", "EU-CZ-1")  # 3 pods, $2.07/h, 3 creates
        await create(s.world, "rpp-inference-extra2", "EU-CZ-1")  # 4 pods, 4 creates

    broken = checked(body)
    assert broken.count("maxHourlyCostUsd") == 2
    assert broken.count("maxPods") == 1
    assert broken.count("maxCreatesPerHour") == 1
    assert "one pod per need" in broken


def test_a_create_while_enough_pods_serve_is_caught_as_a_second_pod_for_one_need() -> None:
    async def body(s: Story, checker: Checker) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        await create(s.world, "rpp-inference-again", "EU-CZ-1")
        await s.loops(1)  # adopted, so nothing leaks

    assert checked(body, limits=ROOMY) == ["one pod per need"]


def test_a_create_while_a_created_pod_is_not_listed_yet_is_caught() -> None:
    async def body(s: Story, checker: Checker) -> None:
        s.world.cloud.listing_lag = 90.0
        await s.loops(2)  # the pool's first pod: created, held in status, not listed yet
        assert [m.unconfirmed_since is not None for m in s.status().members] == [True]
        await create(s.world, "rpp-inference-extra1", "EU-CZ-1")

    broken = checked(body, limits=ROOMY)
    assert broken.count("create while a created pod is unconfirmed") == 1


def test_a_foreign_pod_touched_is_caught() -> None:
    async def body(s: Story, checker: Checker) -> None:
        foreign = s.world.cloud.add_pod(
            name="other-team-a1", image="img:1", gpu_type=GPU, datacenter="EU-RO-1"
        )
        await s.world.controller.runpod.delete_pod(foreign.info.pod_id)

    assert checked(body) == ["non-owned pod touched"]


def test_a_slot_on_a_vanished_pod_and_a_forgotten_pod_are_caught() -> None:
    async def body(s: Story, checker: Checker) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        slots = s.world.kube.config_map("inference-nginx-slots")
        assert slots is not None
        stored = dict(slots.data)
        gone = sorted(s.wired().values())[0]
        s.world.cloud.remove_pod(gone)
        for _ in range(4):  # what a controller that never unwires would leave
            s.world.kube.put_config_map("inference-nginx-slots", stored)
            checker._loop(PoolResult(s.name, None, (), None, True))
        s.world.cloud.add_pod(
            name="rpp-inference-forgotten", image="img:1", gpu_type=GPU, datacenter="EU-SE-1"
        )
        await asyncio.sleep(0)

    broken = checked(body)
    assert "slot on a pod RunPod no longer lists" in broken
    assert "leaked pod" in broken


def test_each_leaked_pod_counts_once_as_a_leak_and_once_as_a_violation() -> None:
    async def main_(clock: VirtualClock) -> list[Violation]:
        s = Story(clock, manifest=pool_manifest(limits=LIMITS))
        checker = check(s.world, s.name)
        try:
            await s.until(lambda st: st.ready == 2, limit=20)
            for name in ("rpp-inference-forgotten1", "rpp-inference-forgotten2"):
                s.world.cloud.add_pod(name=name, image="img:1", gpu_type=GPU, datacenter="EU-SE-1")
            await asyncio.sleep(0)
            checker.finish()
        finally:
            await s.world.close()
        assert checker.leaks == 2
        return checker.violations

    violations = run_virtual(main_)
    assert [v.invariant for v in violations].count("leaked pod") == 2
    # The soak's case (what `rpp simulate --soak` adds up) counts them from the same list.
    case = CaseResult(
        index=0, loops=1, creates=0, crashes=0, faults=0, violations=tuple(violations), document=""
    )
    assert case.leaks == 2


def test_a_flagged_pod_runpod_will_not_delete_is_not_kept_while_the_controller_retries() -> None:
    """deletePod answered 200 without acting, six times: each costs the controller one
    terminate retry (5 minutes), which the bound on dead weight allows, no more."""

    async def body(s: Story, checker: Checker) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        victim = sorted(s.wired().values())[0]
        s.world.cloud.faults.next("deletePod", MalformedJson(), times=6)
        s.world.pods[victim].hang()
        await s.until(lambda st: st.member(victim) is None and st.ready == 2, limit=120)
        serving = next(g for g in checker.groups if isinstance(g, Serving))
        assert serving.deletes_failed[victim] == 6

    assert checked(body, limits=ROOMY) == []  # surge-first: Flagged and out of nginx first


def test_a_pool_one_short_at_the_end_is_caught_unless_a_pod_just_left() -> None:
    """Convergence: a pod gone with nothing done about it for longer than a create-and-
    warm time is a pool that did not converge; one gone a moment before the end had no
    time to be replaced."""

    def short_at_the_end(wait: float) -> list[str]:
        async def body(s: Story, checker: Checker) -> None:
            await s.until(lambda st: st.ready == 2, limit=20)
            s.world.cloud.remove_pod(sorted(s.wired().values())[0])
            await asyncio.sleep(wait)  # no loop runs: the controller does nothing
            await s.loops(1, interval=0)

        return checked(body)

    # One create-and-warm time (the checker's): health.warmupTimeout plus HEAL_LOOPS loops
    # of 30 s (Story.loops).
    warmup = parse_duration(pool_manifest()["spec"]["health"]["warmupTimeout"])
    heal = warmup + HEAL_LOOPS * 30.0
    assert short_at_the_end(60.0) == []
    assert short_at_the_end(heal + 60.0) == ["convergence"]


def test_a_pod_whose_create_answer_was_never_read_is_not_leaked_at_the_end() -> None:
    """The run ends right after a create that made its pod but never answered: status
    has no member for it yet, but the create log names it, and the next loop would
    adopt it. A pod nobody wrote down is still a leak (the test above)."""

    async def body(s: Story, checker: Checker) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        s.world.cloud.faults.next("createPod", Timeout(applied=True))
        s.world.pods[sorted(s.wired().values())[0]].die()
        await s.until(lambda st: any(a.outcome == "unknown" for a in st.create_log), limit=40)
        made = [p for p in checker.owned() if p.info.pod_id not in s.wired().values()]
        assert any(s.status().member(p.info.pod_id) is None for p in made)

    assert "leaked pod" not in checked(body, limits=ROOMY)


def test_a_healthy_pool_breaks_nothing() -> None:
    async def body(s: Story, checker: Checker) -> None:
        await s.until(lambda st: st.ready == 2, limit=20)
        await s.loops(10)
        assert checker.loops >= 10
        assert checker.creates == 2

    assert checked(body) == []


def test_simulate_check_exits_1_and_prints_the_loop_the_invariant_and_the_numbers(
    tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    """A controller that keeps every invariant cannot show this exit, so the checker is
    given one more group that a run always breaks."""

    class AlwaysBroken(NoChecks):
        def on_finish(self, checker: Checker) -> None:
            checker.violate("example", "3 of 2 allowed", loop=checker.loops)

    def with_broken(world: World, pool: str) -> Checker:
        checker = check(world, pool)
        checker.groups = (*checker.groups, AlwaysBroken())
        return checker

    monkeypatch.setattr("rpp.sim.run.check", with_broken)
    document = yaml.safe_load((ROOT / "examples" / "scenarios" / "pod-dies.yaml").read_text())
    document["duration"] = "5m"
    document["events"] = []
    path = tmp_path / "short.yaml"
    path.write_text(yaml.safe_dump(document))
    assert main(["simulate", "--scenario", str(path), "--check"]) == 1
    captured = capsys.readouterr()
    assert "+0:05:00  VIOLATION (loop 10) example: 3 of 2 allowed" in captured.out
    assert captured.err.strip().endswith("1 violations, 0 leaks")
    assert main(["simulate", "--scenario", str(path)]) == 0, "without --check: no verdict"
