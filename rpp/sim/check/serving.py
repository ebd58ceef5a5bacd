"""What nginx serves, loop by loop: never empty for nothing, never stale, no dead weight.

Where it sits: an invariant group of the simulator's checker (rpp/sim/check/checker.py),
checked after every reconcile of a pool in Manage mode, against the slots ConfigMap as
stored (what nginx reads) and the fake cloud's pods:

- never 0 wired while a healthy Ready pod exists, beyond one loop: a Ready member whose
  pod RUNs and answers must be in nginx by the next loop;
- no slot on a pod RunPod no longer lists, beyond 2 loops (the member machine counts two
  missing listings before it lets a pod go); loops whose listing failed do not count,
  since the controller could not know;
- no flagged pod that serves nothing (Flagged and out of nginx) kept past its rule's
  duration plus one create-and-warm time: from the loop it is first seen so (its rule's
  duration has run by then), RunPod must stop listing it within health.warmupTimeout
  (one create-and-warm time), plus drain.period, the 5-minute terminate retry and 3
  loops of slack. Each further deletePod of the pod that RunPod answered without
  removing it (a fault) adds one terminate retry: the controller cannot terminate
  faster than RunPod lets it, and it must keep trying at that pace.
"""

from __future__ import annotations

import httpx

from rpp.controller.reconcile import PoolResult
from rpp.machines.signals import MemberSettings
from rpp.model.members import Phase
from rpp.model.runpod_operations import RunPodOperation
from rpp.model.status import PoolStatus
from rpp.sim.check.checker import Checker, NoChecks, pod_in_path

TERMINATE_RETRY_S = MemberSettings().terminate_retry_s
STALE_SLOT_LOOPS = 2
ZERO_WIRED_LOOPS = 1


def listing_failed(status: PoolStatus) -> bool:
    cond = status.condition("NotActing")
    return (
        cond is not None
        and cond.status == "True"
        and cond.reason in ("RunPodUnavailable", "RunPodKeyRefused")
    )


class Serving(NoChecks):
    """Wired pods, stale slots and flagged pods that serve nothing."""

    def __init__(self) -> None:
        self.zero_wired = 0
        self.stale: dict[str, int] = {}
        self.dead_weight: dict[str, float] = {}
        self.reported: set[tuple[str, str]] = set()
        self.deletes_sent: dict[str, int] = {}  # since the last loop, by pod id
        self.deletes_failed: dict[str, int] = {}  # deletes after which RunPod still lists it

    def on_call(self, checker: Checker, operation: str, request: httpx.Request) -> None:
        if operation == RunPodOperation.DELETE_POD and (pid := pod_in_path(request)):
            self.deletes_sent[pid] = self.deletes_sent.get(pid, 0) + 1

    def on_loop(self, checker: Checker, result: PoolResult) -> None:
        pods = checker.world.cloud.pods
        for pid, sent in self.deletes_sent.items():
            if pid in pods:
                self.deletes_failed[pid] = self.deletes_failed.get(pid, 0) + sent
        self.deletes_sent.clear()
        status = checker.status()
        spec = checker.spec()
        if status is None or status.mode != "Manage" or spec.paused:
            self.zero_wired = 0
            self.stale.clear()
            self.dead_weight.clear()
            return
        wired = checker.wired()
        self._zero_wired(checker, status, wired)
        self._stale(checker, status, wired)
        self._dead_weight(checker, status)

    def _once(self, checker: Checker, invariant: str, key: str, detail: str) -> None:
        if (invariant, key) not in self.reported:
            self.reported.add((invariant, key))
            checker.violate(invariant, detail)

    def _zero_wired(self, checker: Checker, status: PoolStatus, wired: dict[int, str]) -> None:
        pods = checker.world.cloud.pods
        healthy = [
            m.pod_id
            for m in status.members
            if m.phase == Phase.READY and m.pod_id in pods and checker.answers(pods[m.pod_id])
        ]
        self.zero_wired = self.zero_wired + 1 if not wired and healthy else 0
        if self.zero_wired > ZERO_WIRED_LOOPS:
            checker.violate(
                "0 wired while a healthy Ready pod exists",
                f"nginx has no pod for {self.zero_wired} loops while {', '.join(healthy)} "
                "are Ready and answer",
            )

    def _stale(self, checker: Checker, status: PoolStatus, wired: dict[int, str]) -> None:
        pods = checker.world.cloud.pods
        gone = {pid for pid in wired.values() if pid not in pods}
        self.stale = {pid: n for pid, n in self.stale.items() if pid in gone}
        if listing_failed(status):
            return
        for pid in gone:
            self.stale[pid] = self.stale.get(pid, 0) + 1
            if self.stale[pid] > STALE_SLOT_LOOPS:
                slot = next(s for s, p in wired.items() if p == pid)
                self._once(
                    checker,
                    "slot on a pod RunPod no longer lists",
                    pid,
                    f"slot {slot} still points at pod {pid} after {self.stale[pid]} loops "
                    "that listed the pool without it",
                )

    def _dead_weight(self, checker: Checker, status: PoolStatus) -> None:
        pods = checker.world.cloud.pods
        now = checker.seconds
        for m in status.members:
            if m.phase == Phase.FLAGGED and m.slot is None:
                self.dead_weight.setdefault(m.pod_id, now)
        self.dead_weight = {pid: t for pid, t in self.dead_weight.items() if pid in pods}
        spec = checker.spec()
        bound = (
            spec.health.warmup_timeout
            + spec.drain.period
            + TERMINATE_RETRY_S
            + 3 * checker.world.interval
        )
        for pid, since in self.dead_weight.items():
            refused = max(0, self.deletes_failed.get(pid, 0) - 1)
            if now - since > bound + refused * TERMINATE_RETRY_S:
                extra = f" + {refused} more terminate retries" if refused else ""
                self._once(
                    checker,
                    "flagged pod serving nothing kept",
                    pid,
                    f"pod {pid} has been flagged and out of nginx for {now - since:g}s, past "
                    f"{bound + refused * TERMINATE_RETRY_S:g}s (health.warmupTimeout "
                    f"{spec.health.warmup_timeout:g}s + drain.period {spec.drain.period:g}s + "
                    f"terminate retry {TERMINATE_RETRY_S:g}s + 3 loops{extra}; deletePod "
                    f"answered {self.deletes_failed.get(pid, 0)} time(s) without removing it)",
                )
