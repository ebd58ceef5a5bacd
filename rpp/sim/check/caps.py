"""The hard caps, checked at every create the controller makes, from ground truth.

Where it sits: an invariant group of the simulator's checker (rpp/sim/check/checker.py).
Only a create can break a cap, so each is checked the moment the fake cloud makes a
pod for the controller, over the pods RunPod has then and the prices it bills them at:

- the pool's pods, the new one included, are at most limits.maxPods;
- their cost per hour at RunPod's actual prices is at most limits.maxHourlyCostUsd;
- the pool's creates in the hour up to this one are at most limits.maxCreatesPerHour.

A spec applied while the loop that creates was under way may have lowered a cap the
loop did not see yet: the checker allows the larger of the spec now and the spec at
the last loop's end.
"""

from __future__ import annotations

from rpp.sim.check.checker import Checker, NoChecks
from rpp.sim.world import CloudChange

HOUR_S = 3600.0
EPSILON = 1e-9


class Caps(NoChecks):
    """maxPods, maxHourlyCostUsd and maxCreatesPerHour."""

    def on_create(self, checker: Checker, change: CloudChange) -> None:
        specs = [checker.spec(), checker.last_loop_spec or checker.spec()]
        pods = checker.owned(specs[0])
        name = f"pod {change.pod_id} ({change.name})"
        max_pods = max(s.limits.max_pods for s in specs)
        if len(pods) > max_pods:
            checker.violate(
                "maxPods",
                f"{len(pods)} pods after the create of {name}; limits.maxPods is {max_pods}",
            )
        cost = sum(p.cost_per_hr for p in pods)
        cap = max(s.limits.max_hourly_cost_usd for s in specs)
        if cost > cap + EPSILON:
            prices = ", ".join(f"${p.cost_per_hr:g}" for p in pods)
            checker.violate(
                "maxHourlyCostUsd",
                f"${cost:.2f}/h at RunPod's prices ({prices}) after the create of {name}; "
                f"limits.maxHourlyCostUsd is ${cap:g}/h",
            )
        now = checker.seconds
        recent = [t for t in checker.create_times if t > now - HOUR_S]
        allowed = max(s.limits.max_creates_per_hour for s in specs)
        if len(recent) > allowed:
            checker.violate(
                "maxCreatesPerHour",
                f"{len(recent)} creates in the hour up to the create of {name} (at "
                f"{', '.join(f'{t:g}s' for t in recent)}); limits.maxCreatesPerHour is {allowed}",
            )
