"""Ready=True only while nginx has a pod that answers: the pool's summary never lies.

Where it sits: an invariant group of the simulator's checker (rpp/sim/check/checker.py),
checked at the end of every loop of a pool in Manage mode. Ready is what `kubectl wait`,
Argo CD, Flux and the dashboards read; issue 25 saw `Ready True: 2 of 2 desired pod(s) are
Ready and in nginx` while both pods had been dead for two hours. The stored status is
compared with ground truth: the slots ConfigMap as stored (what nginx reads) and the fake
cloud (the pod RUNs and its service answers).

A status is written at the end of the loop that probed, so a pod that dies after its
probe is still Ready in that loop's status: one loop of lag is allowed. Ready True in two
loops in a row while no wired pod answers is a violation. A loop whose status write the
API server refused (a scripted 409, a status-write storm) could not correct it and is
not counted (what the controller must do then is dead_wired.py's and dead_billed.py's
to judge). DryRun and Observe say Ready
for what the controller does there (it plans or observes), and a pool desiring no pods
has nothing to serve: neither is judged.
"""

from __future__ import annotations

from rpp.controller.reconcile import PoolResult
from rpp.sim.check.checker import Checker, NoChecks

READY_LIE = "Ready=True while no wired pod passes"
LAG_LOOPS = 1


class ReadyClaims(NoChecks):
    """Loops in a row whose stored Ready is True while no wired pod answers."""

    def __init__(self) -> None:
        self.lying = 0
        self.reported = False
        self.refused = 0  # status writes refused by the simulated API server, so far

    def on_loop(self, checker: Checker, result: PoolResult) -> None:
        refused, self.refused = self.refused, checker.world.crossings.kube_faults_struck
        if self.refused != refused:
            return  # this loop's status was not written: it could not say otherwise
        status = checker.status()
        if status is None or status.mode != "Manage" or status.desired == 0:
            self.lying = 0
            return
        ready = status.condition("Ready")
        if ready is None or ready.status != "True":
            self.lying = 0
            self.reported = False
            return
        pods = checker.world.cloud.pods
        wired = set(checker.wired().values())
        if any(pid in pods and checker.answers(pods[pid]) for pid in wired):
            self.lying = 0
            self.reported = False
            return
        self.lying += 1
        if self.lying > LAG_LOOPS and not self.reported:
            self.reported = True
            what = ", ".join(sorted(wired)) or "no pod"
            checker.violate(
                READY_LIE,
                f"the pool's status says Ready True ({ready.message}) for {self.lying} loops "
                f"while nginx has {what} and none of them answers",
            )
