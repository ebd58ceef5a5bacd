"""One pod per need: no create while the pool already has what it needs.

Where it sits: an invariant group of the simulator's checker (rpp/sim/check/checker.py),
checked at each create the controller makes. The controller writes its intent to
create (the pod's name and what it is for) into the pool's status before it asks
RunPod, so the stored status at that moment is the controller's own account of the
loop that creates; the pods are RunPod's.

The pods that serve or will serve without anything more being created are the pool's
pods RunPod has now, other than the new one, less those the status says the pool is
removing (Flagged, draining to be terminated, Terminating, Gone). A pod the status
does not know counts as serving: it is somebody's create, and it will be adopted. A
create while those already meet `status.desired` is a second create for one need
(a crash lost the first one's link, say) or a replacement the pool does not need.
"""

from __future__ import annotations

from rpp.model.members import DrainReason, Phase
from rpp.model.status import PoolStatus
from rpp.sim.check.checker import Checker, NoChecks
from rpp.sim.world import CloudChange

_REMOVING = frozenset({Phase.FLAGGED, Phase.TERMINATING, Phase.GONE})


def removing(status: PoolStatus) -> set[str]:
    """Members the pool is taking out: they do not serve the pool's size any more."""
    return {
        m.pod_id
        for m in status.members
        if m.phase in _REMOVING
        or (m.phase == Phase.DRAINING and m.drain_reason != DrainReason.UPDATE)
    }


def purpose(status: PoolStatus, name: str | None) -> str:
    """What the controller said the pod named `name` is for, from its stored status."""
    for attempt in status.create_log:
        if attempt.name == name:
            return f"replacing {attempt.replacement_for}" if attempt.replacement_for else "size"
    return "no stored purpose"


class OnePodPerNeed(NoChecks):
    """No create while the pods that serve or will serve meet desired."""

    def on_create(self, checker: Checker, change: CloudChange) -> None:
        status = checker.status()
        if status is None or status.mode != "Manage":
            return
        taken_out = removing(status)
        serving = [
            p.info.pod_id
            for p in checker.owned()
            if p.info.pod_id != change.pod_id and p.info.pod_id not in taken_out
        ]
        if len(serving) >= status.desired:
            checker.violate(
                "one pod per need",
                f"created pod {change.pod_id} ({change.name}, {purpose(status, change.name)}) "
                f"while {len(serving)} pod(s) serve or will serve ({', '.join(serving)}) "
                f"and desired is {status.desired}",
            )
