"""What the world does each time a controller process crosses into it.

Where it sits: the simulator. rpp/sim/process.py reports every RunPod call, status
write, slots write and step between two effects of a controller process, before it is
sent and after it is answered; this is the world's side of that report:

- an armed crash point that matches kills the process right there
  (rpp/sim/crash_points.py);
- a scripted Kubernetes fault for the status write strikes (`do: fault` with
  `operation: status-write`): `Conflict` answers 409 without storing anything, and
  `OtherWriter` stores another writer's status first, so the process's write meets a
  status it did not read (its write is then lost, as it should be); a `Conflict` with
  `for` is a storm: every status write answers 409 for that long;
- listeners hear each RunPod request before it is sent: the invariant checker learns
  there which pods the controller touches.
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from rpp.adapters.clock import Clock, to_rfc3339
from rpp.adapters.kube.api import Conflict
from rpp.sim.crash_points import STATUS_WRITE, CrashPlan
from rpp.sim.kube_memory import MemoryKubeApi
from rpp.sim.process import Lifeline

KUBE_FAULT_KINDS = ("Conflict", "OtherWriter")
OTHER_WRITER_CONDITION = "WrittenByAnotherWriter"

CallListener = Callable[[str, httpx.Request], None]
CrashListener = Callable[[str], None]


@dataclass(frozen=True)
class KubeFault:
    """One scripted failure of a Kubernetes write (`kind` is one of KUBE_FAULT_KINDS);
    with `seconds`, every write of its target fails so for that long (a storm)."""

    kind: str
    seconds: float | None = None


class WorldCrossings:
    """The world's `Crossings` (rpp/sim/process.py): crashes, kube faults, listeners."""

    def __init__(self, kube: MemoryKubeApi, clock: Clock) -> None:
        self.kube = kube
        self.clock = clock
        self.crashes = CrashPlan()
        self.kube_faults: dict[str, deque[KubeFault]] = {}
        self.call_listeners: list[CallListener] = []
        self.crash_listeners: list[CrashListener] = []
        self.kube_faults_struck = 0
        self.storms: dict[str, tuple[dt.datetime, KubeFault]] = {}  # target -> until, fault

    def fault_next(self, target: str, fault: KubeFault, *, times: int = 1) -> None:
        if fault.seconds is not None:
            until = self.clock.now() + dt.timedelta(seconds=fault.seconds)
            self.storms[target] = (until, fault)
            return
        self.kube_faults.setdefault(target, deque()).extend([fault] * times)

    def _storm(self, target: str) -> KubeFault | None:
        storm = self.storms.get(target)
        if storm is None or self.clock.now() >= storm[0]:
            return None
        return storm[1]

    async def before(self, life: Lifeline, target: str, request: httpx.Request | None) -> None:
        if request is not None:
            for listener in self.call_listeners:
                listener(target, request)
        self._maybe_crash(life, "before", target)
        if target != STATUS_WRITE:
            return
        queue = self.kube_faults.get(target)
        fault = queue.popleft() if queue else self._storm(target)
        if fault is not None:
            self.kube_faults_struck += 1
            await self._strike(fault)

    async def after(self, life: Lifeline, target: str) -> None:
        self._maybe_crash(life, "after", target)

    def _maybe_crash(self, life: Lifeline, when: str, target: str) -> None:
        point = self.crashes.take(when, target)
        if point is None:
            return
        cause = f"the controller process is killed {point.describe()}"
        for listener in self.crash_listeners:
            listener(cause)
        life.kill(cause)

    async def _strike(self, fault: KubeFault) -> None:
        if fault.kind == "OtherWriter":
            for pool in await self.kube.list_pools():
                await self._write_as_another_writer(pool)
            return
        raise Conflict("update", "runpodpools/status", None, namespace="(simulated)")

    async def _write_as_another_writer(self, pool: dict[str, Any]) -> None:
        """Another writer (a second controller, a hand edit) stores the pool's status
        with one condition of its own: the process's write then meets a status it did
        not read, and must not overwrite it."""
        status = dict(pool.get("status") or {})
        conditions = [
            c for c in status.get("conditions") or [] if c.get("type") != OTHER_WRITER_CONDITION
        ]
        conditions.append(
            {
                "type": OTHER_WRITER_CONDITION,
                "status": "True",
                "reason": "Simulated",
                "message": "the simulator wrote this status as another writer",
                "lastTransitionTime": to_rfc3339(self.clock.now()),
            }
        )
        meta = pool["metadata"]
        await self.kube.replace_pool_status(
            meta["name"],
            status={**status, "conditions": conditions},
            resource_version=str(meta["resourceVersion"]),
        )
