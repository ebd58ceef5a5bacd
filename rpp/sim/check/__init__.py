"""The simulator's invariant checker (`rpp simulate --check`, the soak); see checker.py."""

from __future__ import annotations

from rpp.sim.check.caps import Caps
from rpp.sim.check.checker import Checker, Violation
from rpp.sim.check.dead_billed import DeadBilled
from rpp.sim.check.dead_wired import DeadWired
from rpp.sim.check.ending import Ending
from rpp.sim.check.hands import HandsOff
from rpp.sim.check.needs import OnePodPerNeed
from rpp.sim.check.ready_claims import ReadyClaims
from rpp.sim.check.serving import Serving
from rpp.sim.check.unconfirmed import NoCreateWhileUnconfirmed
from rpp.sim.world import World

__all__ = ["Checker", "Violation", "check"]


def check(world: World, pool: str) -> Checker:
    """A checker with every invariant group, watching `pool` in `world` from now on."""
    groups = (
        Caps(),
        OnePodPerNeed(),
        NoCreateWhileUnconfirmed(),
        HandsOff(),
        Serving(),
        DeadWired(),
        DeadBilled(),
        ReadyClaims(),
        Ending(),
    )
    return Checker(world, pool, groups=groups)
