"""No dead, hung or deleted pod stays in nginx: out within 60 s of the first loop to see it.

Where it sits: an invariant group of the simulator's checker (rpp/sim/check/checker.py),
checked against ground truth: the slots ConfigMap as stored (what nginx reads) and the
fake cloud (the pod is gone, not RUNNING, or its service dies, fails or hangs). A wired
pod counts as down from the first moment the checker hears of anything after its
death (a RunPod call, which every loop starts with, or a loop's end): the first loop
that could see it. From there the controller has two probes to fail hard (a hung pod's
second waits out probe.timeout) before it quarantines the pod; at the default 30 s
interval and 10 s timeout that is 40 s, so the bound is 60 s, whatever the interval.
It holds while RunPod's listing cannot be read too: the probes do not need it.

The last pod in nginx, and every wired pod down at once, leave nginx within the same
60 s as long as the controller has evidence that its own network works: RunPod's listing
read, or another pod passing its probe (issue 25: a dead pod kept wired serves 502 to
every request it is given). One shape only is kept on purpose: every wired pod down
while RunPod's listing could not be read (a listPods call failed) within the last 60 s;
then the probes' failures may be the controller's own network, and an empty nginx
answers nothing at all. What such a pod costs is for dead_billed.py.
"""

from __future__ import annotations

import httpx

from rpp.controller.reconcile import PoolResult
from rpp.sim.check.checker import Checker, NoChecks

DEAD_WIRED_S = 60.0
DEAD_WIRED = "dead or hung pod wired"


class DeadWired(NoChecks):
    """Wired pods whose pod is gone, dead or hung, and since when the checker knows."""

    def __init__(self) -> None:
        self.down_since: dict[str, float] = {}
        self.reported: set[str] = set()

    def on_call(self, checker: Checker, operation: str, request: httpx.Request) -> None:
        self._see(checker)

    def on_loop(self, checker: Checker, result: PoolResult) -> None:
        self._see(checker)
        status = checker.status()
        spec = checker.spec()
        if status is None or status.mode != "Manage" or spec.paused:
            self.down_since.clear()
            return
        wired = set(checker.wired().values())
        down = {pid: t for pid, t in self.down_since.items() if pid in wired}
        now = checker.seconds
        if len(down) == len(wired) and checker.listing_failed_since(now - DEAD_WIRED_S):
            return  # all down, and the controller's own network may be what fails
        for pid, since in sorted(down.items()):
            if now - since > DEAD_WIRED_S and pid not in self.reported:
                self.reported.add(pid)
                checker.violate(
                    DEAD_WIRED,
                    f"pod {pid} is {self._what(checker, pid)} and still in nginx "
                    f"{now - since:g}s after the first loop that could see it (limit "
                    f"{DEAD_WIRED_S:g}s)",
                )

    def _see(self, checker: Checker) -> None:
        """Note when each wired pod was first known down; forget those that answer again."""
        if not checker.present:
            return
        now = checker.seconds
        for pid in set(checker.wired().values()):
            if self._down(checker, pid):
                self.down_since.setdefault(pid, now)
            else:
                self.down_since.pop(pid, None)
                self.reported.discard(pid)

    @staticmethod
    def _down(checker: Checker, pid: str) -> bool:
        pod = checker.world.cloud.pods.get(pid)
        return pod is None or not checker.answers(pod)

    @staticmethod
    def _what(checker: Checker, pid: str) -> str:
        pod = checker.world.cloud.pods.get(pid)
        if pod is None:
            return "gone from RunPod"
        server = checker.world.pods.get(pid)
        return f"down ({server.mode.value})" if server is not None else "down (not running)"
