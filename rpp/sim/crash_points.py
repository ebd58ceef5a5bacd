"""Crash points: where a scenario kills the controller, and when they fire.

Where it sits: the simulator, between a scenario's `do: controller-restart` event
(rpp/sim/scenario.py reads its `point`) and the process wrappers that report every
crossing into the world (rpp/sim/process.py). A point is one of:

    point: {before: createPod}      # the call is never sent
    point: {after: createPod}       # RunPod acted and answered; the answer is never read
    point: {before: status-write}   # the status write is never sent
    point: {after: status-write}    # the status is stored; the controller never knows
    point: {after: slots-write}     # the slots ConfigMap is written
    point: between-effects          # the executor finished one effect, not the next

RunPod operations are the API's operationIds (listPods, getPod, createPod, updatePod,
deletePod, listGpuTypes, hostNotices). A point is armed at the event's `at` and fires
at the first matching crossing after it, so the same scenario and seed crash at the
same place; one that is never reached fires never, and the timeline says so at the end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rpp.sim.faults import RUNPOD_API_OPERATIONS

STATUS_WRITE = "status-write"
SLOTS_WRITE = "slots-write"
EFFECTS = "effects"
BETWEEN_EFFECTS = "between-effects"
KUBE_WRITES = (STATUS_WRITE, SLOTS_WRITE)
# Plain strings (`.value`): a point is written into the soak's scenario files (YAML).
TARGETS = (*(op.value for op in RUNPOD_API_OPERATIONS), *KUBE_WRITES)
WHENS = ("before", "after")
# Every point, as a scenario writes it: what the soak's generator cycles over and the
# crash-point benchmark enumerates. The order is the generator's, so a soak seed keeps
# drawing the scenarios it drew.
EVERY_POINT: tuple[Any, ...] = (
    *({"after": target} for target in TARGETS),
    *({"before": target} for target in TARGETS),
    BETWEEN_EFFECTS,
)


class PointError(ValueError):
    """A crash point a scenario cannot use; the message says what to write instead."""


@dataclass(frozen=True)
class CrashPoint:
    """Kill the controller `when` ("before" or "after") it crosses `target`."""

    when: str
    target: str

    def describe(self) -> str:
        if self.target == EFFECTS:
            return "between two effects"
        if self.target == STATUS_WRITE:
            thing = "the pool's status write"
        elif self.target == SLOTS_WRITE:
            thing = "the slots ConfigMap write"
        else:
            thing = f"a {self.target} call to RunPod"
        if self.when == "before":
            return f"right before {thing} is sent"
        return f"right after {thing} was answered, before the answer is read"

    def to_yaml(self) -> Any:
        """The scenario-file form, as `parse_point` reads it."""
        if self.target == EFFECTS:
            return BETWEEN_EFFECTS
        return {self.when: self.target}


def parse_point(value: Any) -> CrashPoint:
    """`{after: createPod}`, `{before: status-write}`, `between-effects` -> CrashPoint."""
    if value == BETWEEN_EFFECTS:
        return CrashPoint("before", EFFECTS)
    if not isinstance(value, Mapping) or len(value) != 1:
        raise PointError(
            "expected {before: OPERATION}, {after: OPERATION} or between-effects, where "
            f"OPERATION is one of {', '.join(TARGETS)}"
        )
    ((when, target),) = value.items()
    if when not in WHENS:
        raise PointError(f"expected before or after, got {when!r}")
    if target not in TARGETS:
        raise PointError(f"{when}: expected one of {', '.join(TARGETS)}, got {target!r}")
    return CrashPoint(str(when), str(target))


class CrashPlan:
    """The armed crash points of one simulation, fired in the order they match."""

    def __init__(self) -> None:
        self.armed: list[CrashPoint] = []
        self.fired: list[CrashPoint] = []

    def arm(self, point: CrashPoint) -> None:
        self.armed.append(point)

    def take(self, when: str, target: str) -> CrashPoint | None:
        """The first armed point matching this crossing, disarmed; None if none."""
        for i, point in enumerate(self.armed):
            if point.when == when and point.target == target:
                del self.armed[i]
                self.fired.append(point)
                return point
        return None
