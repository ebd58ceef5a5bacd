"""The serving scenarios: what breaks or changes while clients are served, and one run.

Each scenario starts a fresh rig (tests/serving/rig.py), with every pod Ready, runs the
client mix (tests/serving/load.py) and, at set moments of it, breaks a pod or changes
the pool. `Scale` says how long: `BENCH` is the benchmark's (40-60 s of traffic, 20 s
streams and one of 35 s, RunPod's 100 s CDN limit scaled to 30 s); `TEST` is a short
version for the test suite, with every duration cut so the same story fits in seconds.

The pod that breaks is the second one in nginx's slots. The moments are offsets from
the start of the traffic: a fault lands while requests and streams of every kind are in
flight on it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from rpp.adapters.nginx import VERSION_PATH
from tests.serving.analysis import Fault, summarize
from tests.serving.load import Load, Mix
from tests.serving.rig import IMAGE, PoolShape, Rig

CRITICAL = "We have detected a critical error on this machine which may affect some pods."


@dataclass(frozen=True)
class Scale:
    mix: Mix
    shape: PoolShape
    fault_at: float  # seconds into the traffic
    change_at: float  # when the pool changes (roll, scale-down, scale-up)
    undo_at: float  # slot-change: when the added pod is taken away again


BENCH = Scale(
    mix=Mix(duration=60.0, stream_s=20.0, long_s=35.0, deadline_s=150.0),
    shape=PoolShape(pods=3, drain_s=40.0, unreachable_s=20.0, cdn_limit_s=30.0),
    fault_at=10.0,
    change_at=5.0,
    undo_at=25.0,
)
TEST = Scale(
    mix=Mix(
        duration=14.0,
        post_rate=15.0,
        get_rate=5.0,
        streams=3,
        stream_s=3.0,
        long_s=7.0,
        deadline_s=60.0,
    ),
    # Unreachable's duration well above 2 loops: the quarantine comes first, even on
    # a loaded machine.
    shape=PoolShape(pods=3, drain_s=12.0, unreachable_s=10.0, cdn_limit_s=4.0),
    fault_at=3.0,
    change_at=2.0,
    undo_at=8.0,
)

# An action changes the world, and names the faults it caused (a broken pod).
Action = Callable[[Rig, Scale], list[Fault]]


def _victim(rig: Rig) -> str:
    return rig.wired()[1]


def _service(mode: str, *, after: float | None = None) -> Action:
    def act(rig: Rig, scale: Scale) -> list[Fault]:
        pod = _victim(rig)
        at = time.time()
        rig.service(pod, mode, after=after)
        delay = scale.shape.cdn_limit_s if mode == "hangs" else after or 0.0
        return [Fault(pod, at, delay)]

    return act


def _terminate(rig: Rig, scale: Scale) -> list[Fault]:
    pod = _victim(rig)
    at = time.time()
    rig.terminate(pod)
    return [Fault(pod, at)]


def _notice(rig: Rig, scale: Scale) -> list[Fault]:
    rig.note(_victim(rig), CRITICAL)  # it keeps serving: no fault
    return []


def _roll(rig: Rig, scale: Scale) -> list[Fault]:
    rig.patch_spec(image=IMAGE.replace("1.4.2", "1.5.0"))
    return []


def _resize(delta: int) -> Action:
    def act(rig: Rig, scale: Scale) -> list[Fault]:
        pods = scale.shape.pods + delta
        rig.patch_spec(replicas={"min": pods, "max": max(pods, scale.shape.pods + 1)})
        return []

    return act


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    actions: Callable[[Scale], list[tuple[float, Action]]]
    spec: dict[str, Any] = field(default_factory=dict)  # applied before the traffic
    changes_slots: bool = False  # the test checks nginx loaded new slots mid-traffic
    quarantines: bool = False  # the failing pod's probes fail hard: quarantined at once


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("baseline", "nothing breaks", lambda sc: []),
        Scenario(
            "dies",
            "a wired pod's service dies: RunPod's proxy answers 502 at once",
            lambda sc: [(sc.fault_at, _service("dies"))],
            changes_slots=True,
            quarantines=True,
        ),
        Scenario(
            "fails-0.1s",
            "a wired pod fails 0.1 s into every request (502; streams cut)",
            lambda sc: [(sc.fault_at, _service("fails", after=0.1))],
            changes_slots=True,
            quarantines=True,
        ),
        Scenario(
            "fails-1.5s",
            "a wired pod fails 1.5 s into every request (502; streams cut)",
            lambda sc: [(sc.fault_at, _service("fails", after=1.5))],
            changes_slots=True,
            quarantines=True,
        ),
        Scenario(
            "hangs",
            "a wired pod stops answering; RunPod's CDN gives up after its limit (524)",
            lambda sc: [(sc.fault_at, _service("hangs"))],
        ),
        Scenario(
            "console",
            "a wired pod is terminated in RunPod's console: its proxy answers 404",
            lambda sc: [(sc.fault_at, _terminate)],
            changes_slots=True,
        ),
        Scenario(
            "replace",
            "RunPod flags a serving pod's machine: surge-first replacement, then a drain",
            lambda sc: [(sc.fault_at, _notice)],
            spec={"health": {"replaceWhen": {"hostNotice": True}}},
            changes_slots=True,
        ),
        Scenario(
            "roll",
            "a new image rolls in place: each pod drained, updated, rewired",
            lambda sc: [(sc.change_at, _roll)],
            changes_slots=True,
        ),
        Scenario(
            "scale-down",
            "the pool shrinks by one: a pod drained, then terminated",
            lambda sc: [(sc.change_at, _resize(-1))],
            changes_slots=True,
        ),
        Scenario(
            "slot-change",
            "a pod is added, then taken away, while long streams run",
            lambda sc: [(sc.change_at, _resize(+1)), (sc.undo_at, _resize(0))],
            changes_slots=True,
        ),
    )
}


async def run(scenario: Scenario, *, scale: Scale, workdir: Path) -> dict[str, Any]:
    """One scenario on a fresh rig: what the clients saw, judged (analysis.summarize)."""
    rig = Rig(workdir, scale.shape)
    tasks: list[asyncio.Task[Any]] = []
    try:
        await asyncio.to_thread(rig.start)
        if scenario.spec:
            await asyncio.to_thread(lambda: rig.patch_spec(**scenario.spec))
        load = Load(f"http://127.0.0.1:{rig.public}", scale.mix)
        traffic = asyncio.create_task(load.run())
        versions = asyncio.create_task(_loaded_versions(rig.status_port, traffic))
        watched = asyncio.create_task(_members_seen(rig, traffic))
        tasks += [traffic, versions, watched]
        faults: list[Fault] = []
        while not load.started:
            await asyncio.sleep(0.01)
        for at, action in sorted(scenario.actions(scale), key=lambda a: a[0]):
            await asyncio.sleep(max(0.0, load.started + at - time.time()))
            faults += await asyncio.to_thread(action, rig, scale)
        records = await traffic
        loaded = await versions
        seen = await watched
        work = await asyncio.to_thread(rig.work)
        members = await asyncio.to_thread(rig.members)
    finally:
        # On a failure the clients and watchers stop (closing their connections) before
        # the rig they talk to does.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.to_thread(rig.stop)
    return {
        "scenario": scenario.name,
        "what": scenario.what,
        "mix": asdict(scale.mix),
        "shape": asdict(scale.shape),
        "faults": [asdict(f) for f in faults],
        "summary": summarize(records, work, faults),
        "slot_versions_loaded": loaded,
        "failing_pods_out": [_way_out(fault, seen) for fault in faults],
        "members_after": [
            {k: m.get(k) for k in ("podId", "phase", "slot", "quarantine", "flaggedRule")}
            for m in members
        ],
    }


async def _loaded_versions(status_port: int, traffic: asyncio.Task[Any]) -> list[str]:
    """Every slots version nginx served during the traffic, in order."""
    seen: list[str] = []
    url = f"http://127.0.0.1:{status_port}{VERSION_PATH}"
    async with httpx.AsyncClient(timeout=2) as client:
        while not traffic.done():
            try:
                version = (await client.get(url)).text.strip()
            except httpx.HTTPError:
                version = ""
            if version and (not seen or seen[-1] != version):
                seen.append(version)
            await asyncio.sleep(0.25)
    return seen


async def _members_seen(rig: Rig, traffic: asyncio.Task[Any]) -> list[tuple[float, list[Any]]]:
    """The pool's members as the status showed them, every quarter second of the run."""
    seen: list[tuple[float, list[Any]]] = []
    while not traffic.done():
        try:
            members = await asyncio.to_thread(rig.members)
        except httpx.HTTPError:
            members = []
        seen.append((time.time(), members))
        await asyncio.sleep(0.25)
    return seen


def _way_out(fault: Fault, seen: list[tuple[float, list[Any]]]) -> dict[str, Any]:
    """How the failing pod left nginx: seconds after it failed, and by which transition
    (a quarantine and its reason, or a health rule flagging it)."""
    for at, members in seen:
        if at < fault.at:
            continue
        mine = [m for m in members if m.get("podId") == fault.pod]
        if mine and mine[0].get("slot") is None:
            member = mine[0]
            how = member.get("quarantine") or {}
            return {
                "pod": fault.pod,
                "unwired_after_s": round(at - fault.at, 1),
                "quarantine": how.get("reason"),
                "flagged": member.get("flaggedRule"),
                "phase": member.get("phase"),
            }
        if not mine:
            return {"pod": fault.pod, "gone_after_s": round(at - fault.at, 1)}
    return {"pod": fault.pod, "unwired_after_s": None}
