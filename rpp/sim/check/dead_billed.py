"""No dead pod billed for long: terminated within 15 minutes of the first loop to see it.

Where it sits: an invariant group of the simulator's checker (rpp/sim/check/checker.py),
checked against ground truth: the fake cloud bills a pod for as long as it has it (listed
or still in its listing lag, and not terminated), and knows when it is dead: its container
ERROR or EXITED, or RUNNING with a service that died, fails every request or hangs. A pod
still booting (PROVISIONING, STARTING) is not dead, nor a slow or erroring one: those are
the health rules' to judge.

Every safety rule of the controller (terminate-first only while another pod serves, the
caps, the last wired pod, write-ahead) once had a case where the pods were really dead and
the pool sat still, serving nothing and billing for hours (issue 25). Whatever the rule, a
dead pod must be terminated, or replaced and then terminated, within `DEAD_BILLED_S` of
the first loop that could see it (the first listing of RunPod's pods, which every loop
starts with, or loop end after its death).

Time the controller keeps such a pod on purpose is not counted:

- while the pool's stored status has PoolWideDegradation True (the hold; it is bounded
  on its own by health.poolWideHold), at either end of the interval between two loops,
  or the status a loop decided has it when its write did not land;
- in DryRun or Observe, or while paused: the controller does not act there;
- while the pool is being deleted with deletionPolicy Retain: its pods are left alone;
- for a pod the controller asked RunPod to terminate, until its terminate is due again
  (`TERMINATE_RETRY_S` plus a loop): RunPod answering a terminate without acting is
  RunPod's doing, and the controller's part is to send it again, which it does.
"""

from __future__ import annotations

import httpx

from rpp.controller.reconcile import PoolResult
from rpp.decide.ownership import owns
from rpp.model.observations import PodStatus
from rpp.model.runpod_operations import RunPodOperation
from rpp.model.status import PoolStatus
from rpp.sim.check.checker import Checker, NoChecks, as_listed, pod_in_path
from rpp.sim.check.serving import TERMINATE_RETRY_S
from rpp.sim.cloud_model import FakePod
from rpp.sim.inference_work import ServiceMode

DEAD_BILLED_S = 15 * 60.0
DEAD_BILLED = "dead pod billed"
POOL_WIDE = "PoolWideDegradation"
_DEAD_SERVICE = frozenset({ServiceMode.DIES, ServiceMode.FAILS, ServiceMode.HANGS})


def dead(checker: Checker, pod: FakePod) -> str | None:
    """How the pod is dead (ground truth), or None while it may still serve."""
    status = checker.world.cloud.status(pod)
    if status in (PodStatus.ERROR, PodStatus.EXITED):
        return f"{status.value} at RunPod"
    if status is not PodStatus.RUNNING:
        return None  # booting: the warm-up rules judge it
    server = checker.world.pods.get(pod.info.pod_id)
    if server is None or server.mode not in _DEAD_SERVICE:
        return None
    return f"RUNNING, its service {server.mode.value}"


def kept_on_purpose(checker: Checker, decided: PoolStatus | None = None) -> str | None:
    """Why the pool keeps dead pods now without it counting, or None.

    `decided`: the status this loop decided, which holds the controller's view when its
    write did not land (a status-write storm keeps the stored one behind)."""
    status = checker.status()
    spec = checker.spec()
    if status is None:
        return "its status cannot be read"
    if status.mode != "Manage" or spec.paused:
        return "the controller does not act"
    for view in (status, decided):
        hold = None if view is None else view.condition(POOL_WIDE)
        if hold is not None and hold.status == "True":
            return "PoolWideDegradation"
    deleting = checker.world.kube.pool(checker.pool)["metadata"].get("deletionTimestamp")
    if deleting and spec.deletion_policy == "Retain":
        return "deleted with deletionPolicy Retain"
    return None


class DeadBilled(NoChecks):
    """Seconds each dead pod of the pool was billed, outside the time it was kept on purpose."""

    def __init__(self) -> None:
        self.seen: dict[str, float] = {}  # pod id -> when the checker first knew it dead
        self.billed: dict[str, float] = {}  # pod id -> seconds counted since then
        self.reported: set[str] = set()
        self.last_loop: float | None = None
        self.kept_before: str | None = "no loop yet"
        self.terminated_at: dict[str, float] = {}  # pod id -> its last deletePod

    def on_call(self, checker: Checker, operation: str, request: httpx.Request) -> None:
        if operation == RunPodOperation.LIST_PODS:  # every loop starts with it: the first
            self._see(checker)  # that could see
        elif operation == RunPodOperation.DELETE_POD and (pid := pod_in_path(request)):
            self.terminated_at[pid] = checker.seconds

    def on_loop(self, checker: Checker, result: PoolResult) -> None:
        self._see(checker)
        now = checker.seconds
        kept_now = kept_on_purpose(checker, None if result.written else result.status)
        kept = kept_now or self.kept_before
        for pid, since in sorted(self.seen.items()):
            start = since if self.last_loop is None else max(since, self.last_loop)
            asked = self.terminated_at.get(pid)
            retry_due = TERMINATE_RETRY_S + checker.world.interval
            if kept is None and (asked is None or now - asked > retry_due):
                self.billed[pid] = self.billed.get(pid, 0.0) + max(0.0, now - start)
            billed = self.billed.get(pid, 0.0)
            if billed > DEAD_BILLED_S and pid not in self.reported:
                self.reported.add(pid)
                pod = checker.world.cloud.pods[pid]
                checker.violate(
                    DEAD_BILLED,
                    f"pod {pid} ({pod.info.name}, ${pod.cost_per_hr:g}/h) is "
                    f"{dead(checker, pod)} and RunPod still bills it {billed:g}s after the "
                    f"first loop that could see it, not counting PoolWideDegradation "
                    f"(limit {DEAD_BILLED_S:g}s)",
                )
        self.last_loop = now
        self.kept_before = kept_now

    def _see(self, checker: Checker) -> None:
        """Note when each pool pod was first known dead; forget those alive or gone."""
        if not checker.present:
            return
        now = checker.seconds
        pods = checker.world.cloud.pods
        for pid in list(self.seen):
            pod = pods.get(pid)
            if pod is None or dead(checker, pod) is None:
                del self.seen[pid]
                self.billed.pop(pid, None)
                self.reported.discard(pid)
        spec = None
        for pid, pod in pods.items():
            if pid in self.seen or dead(checker, pod) is None:
                continue
            spec = spec or checker.spec()
            if owns(spec, as_listed(pod)):
                self.seen[pid] = now
