"""The dead-pool shapes for the soak: the cases where a dead pool once billed in silence.

Where it sits: the simulator, under the soak's scenario generator (rpp/sim/generate.py),
which calls `draw_shapes` on a scenario it has drawn. Each shape is drawn for a share of
the scenarios from a generator of its own (seeded by the soak's seed and the scenario's
index), so every other draw of a scenario stays what an earlier soak drew for it:

- a single-pod pool at its caps (`maxPods: 1`, a cost cap that fits one pod, or
  `maxCreatesPerHour: 1`) whose pod dies or hangs: the pod cannot be replaced first;
- independent failures minutes apart: one pod answers 30 % errors, another dies 3
  minutes later (not one shared cause);
- every pod dying at once (PoolWideDegradation's shape), half the time with no stock
  for a while;
- a status-write storm: every status write answered 409 for 10 to 60 minutes.

Every shape ends before the scenario's quiet settle time, as the other trouble does.
"""

from __future__ import annotations

import random
from typing import Any

SINGLE_POD = 0.12
INDEPENDENT = 0.15
ALL_DIE = 0.12
STORM = 0.15
CAPS = ("maxPods", "maxHourlyCostUsd", "maxCreatesPerHour")


def draw_shapes(
    rng: random.Random,
    *,
    pool: dict[str, Any],
    cloud: dict[str, Any],
    events: list[dict[str, Any]],
    active: float,
    prefix: str,
) -> list[str]:
    """Add the dead-pool shapes drawn for this scenario; the names of those added."""
    drawn = [rng.random() for _ in range(4)]  # one draw per shape, always all four
    shapes: list[str] = []
    size = int(pool["spec"]["replicas"]["min"])
    if drawn[0] < SINGLE_POD:
        shapes.append(_single_pod(rng, pool, cloud, events, active=active, prefix=prefix))
        size = 1
    if drawn[1] < INDEPENDENT and size >= 2:
        shapes.append(_independent(rng, events, size=size, active=active))
    if drawn[2] < ALL_DIE:
        shapes.append(_all_die(rng, cloud, events, size=size, active=active))
    if drawn[3] < STORM and active >= 900.0:
        shapes.append(_storm(rng, events, active=active))
    return shapes


def _at(seconds: float) -> str:
    return f"{seconds:.0f}s"


def _single_pod(
    rng: random.Random,
    pool: dict[str, Any],
    cloud: dict[str, Any],
    events: list[dict[str, Any]],
    *,
    active: float,
    prefix: str,
) -> str:
    """One pod, its cap full: it dies or hangs, and cannot be replaced surge-first."""
    spec = pool["spec"]
    spec["replicas"] = {"min": 1, "max": 1}
    spec.pop("autoscaling", None)
    spec["nginx"] = {**spec.get("nginx", {}), "slotPorts": 3}
    limits = spec["limits"]
    cap = rng.choice(CAPS)
    if cap == "maxPods":
        limits["maxPods"] = 1
    elif cap == "maxHourlyCostUsd":
        price = max(entry["costPerHr"] for entry in cloud["stock"])
        for entry in cloud["stock"]:
            entry["costPerHr"] = price  # one price, so the cap fits exactly one pod
        limits["maxHourlyCostUsd"] = round(price * 1.5, 2)
        limits["estimatedPodCostUsd"] = price
    else:
        limits["maxCreatesPerHour"] = 1
    # At most the first of the pool's pods runs at the start; foreign pods stay.
    ours = [e for e in cloud["existing"] if e["name"].startswith(f"{prefix}e")]
    cloud["existing"] = [e for e in cloud["existing"] if e not in ours[1:]]
    # Resizes and load swings do not fit a one-pod pool.
    events[:] = [
        e
        for e in events
        if e["do"] != "load" and not (e["do"] == "apply" and "replicas" in e["patch"]["spec"])
    ]
    start = rng.uniform(300.0, active * 0.6)
    events.append({"at": _at(start), "do": rng.choice(("die", "hang")), "pod": 1})
    if rng.random() < 0.5:  # its replacement dies too, later
        later = rng.uniform(start + 300.0, active)
        events.append({"at": _at(later), "do": rng.choice(("die", "hang")), "pod": 2})
    return f"single pod at {cap}"


def _independent(
    rng: random.Random, events: list[dict[str, Any]], *, size: int, active: float
) -> str:
    """One pod errs, another dies 3 minutes later: two causes, not one."""
    erring, dying = rng.sample(range(1, size + 1), 2)
    start = rng.uniform(300.0, max(300.0, active - 600.0))
    events.append({"at": _at(start), "do": "errors", "pod": erring, "ratio": 0.3})
    events.append({"at": _at(start + 180.0), "do": "die", "pod": dying})
    return "independent failures"


def _all_die(
    rng: random.Random,
    cloud: dict[str, Any],
    events: list[dict[str, Any]],
    *,
    size: int,
    active: float,
) -> str:
    """Every pod that exists then dies at once; sometimes no stock for a while."""
    start = rng.uniform(300.0, active * 0.6)
    for number in range(1, size + 7):  # replacements made before then die too
        events.append({"at": _at(start), "do": "die", "pod": number})
    if rng.random() >= 0.5:
        return "all pods die"
    end = rng.uniform(min(start + 600.0, active), active)
    for entry in cloud["stock"]:
        where = {"datacenter": entry["datacenter"], "gpuType": entry["gpuType"]}
        events.append({"at": _at(start), "do": "stock", **where, "count": 0})
        back = max(2, int(entry["count"]))
        events.append({"at": _at(end), "do": "stock", **where, "count": back})
    return "all pods die, no stock"


def _storm(rng: random.Random, events: list[dict[str, Any]], *, active: float) -> str:
    """Every status write answered 409 for 10 to 60 minutes."""
    start = rng.uniform(60.0, active - 600.0)
    length = rng.uniform(600.0, min(3600.0, active - start))
    kind = {"kind": "Conflict", "for": _at(length)}
    events.append({"at": _at(start), "do": "fault", "operation": "status-write", "kind": kind})
    return "status-write storm"
