"""Scenario files for `rpp simulate`: a pool, a fake RunPod cloud, and what happens when.

Where it sits: the simulator's input, outside observe -> decide -> act. A scenario is
read and checked whole before anything runs; every mistake is reported with the file
and the path of the field, like `rpp validate` (the pool is checked by the very same
code), never as a traceback:

    description: One pod hangs; the pool replaces it surge-first.
    duration: 2h                 # simulated time (`--until` overrides)
    interval: 30s                # RECONCILE_INTERVAL (default 30s)
    pool: {apiVersion: ..., kind: RunPodPool, metadata: {name: inference}, spec: {...}}
    cloud: {bootTime: 90s, stock: [...], existing: [...]}   # see rpp/sim/cloud_scenario.py
    events:
      - {at: 20m, do: hang, pod: 2}
      - {at: 1h, do: stock, datacenter: EU-RO-1, gpuType: NVIDIA GeForce RTX 4090, count: 0}
      - {at: 90m, do: fault, operation: createPod, kind: CreatedButFailed, times: 2}
      - {at: 2h, do: controller-restart, point: {after: createPod}}

docs/simulator.md describes every event and its fields.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rpp.model.durations import DurationError, parse_duration
from rpp.model.runpod_operations import RunPodOperation
from rpp.model.spec_load import load_pool
from rpp.sim.cloud_scenario import (
    CloudScenario,
    ScenarioError,
    parse_cloud_section,
    read_scenario_document,
    scenario_document,
)
from rpp.sim.crash_points import KUBE_WRITES, STATUS_WRITE, CrashPoint, PointError, parse_point
from rpp.sim.crossings import KUBE_FAULT_KINDS, KubeFault
from rpp.sim.faults import Fault, FaultError, ListingLag, check_operation, fault_from_dict
from rpp.sim.kube_memory import merge_patch

DEFAULT_DURATION_S = 3600.0
DEFAULT_INTERVAL_S = 30.0
MAX_DURATION_S = 30 * 24 * 3600.0
TOP_LEVEL = ("description", "duration", "interval", "pool", "cloud", "events")

# do -> (needs `pod`, required fields, optional fields)
EVENTS: dict[str, tuple[bool, tuple[str, ...], tuple[str, ...]]] = {
    "die": (True, (), ()),
    "hang": (True, (), ()),
    "slow": (True, ("latency",), ()),
    "errors": (True, ("ratio",), ()),
    "note": (True, ("text",), ()),
    "recover": (True, (), ()),
    "restart": (True, (), ()),
    "terminate": (True, (), ()),
    "stock": (False, ("datacenter", "gpuType", "count"), ("cloud", "costPerHr")),
    "load": (False, ("value",), ()),
    "apply": (False, ("patch",), ()),
    "controller-restart": (False, (), ("point",)),
    "delete": (False, (), ()),
    "fault": (False, ("operation", "kind"), ("times",)),
    "edit-status": (False, ("status",), ()),
    "clock-step": (False, ("by",), ()),
}


_T = TypeVar("_T")


@dataclass(frozen=True, kw_only=True)
class ScenarioEvent:
    """One thing that happens to the world at `at` seconds after the start."""

    at: float
    do: str
    index: int  # position in the file's `events:` list, for messages
    pod: int | None = None  # the Nth pool pod by creation, from 1
    latency: float | None = None
    ratio: float | None = None
    text: str | None = None
    datacenter: str | None = None
    gpu_type: str | None = None
    cloud: str = "SECURE"
    count: int | None = None
    cost_per_hr: float | None = None
    value: float | None = None
    patch: Mapping[str, Any] | None = None
    point: CrashPoint | None = None  # controller-restart: where (None: at `at`)
    operation: str | None = None  # fault: a RunPod operationId or status-write
    fault: Fault | KubeFault | None = None
    times: int = 1
    status: Any = None  # edit-status: what the pool's status becomes (any YAML value)
    by: float | None = None  # clock-step: seconds the controller's host clock steps, signed


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """A whole scenario file, checked."""

    source: str
    pool: Mapping[str, Any] = field(repr=False)
    name: str
    namespace: str
    cloud: CloudScenario
    events: tuple[ScenarioEvent, ...] = ()
    duration: float = DEFAULT_DURATION_S
    interval: float = DEFAULT_INTERVAL_S
    description: str | None = None


def load_scenario(path: Path) -> Scenario:
    """Read and check a scenario file; `ScenarioError` names the file and the field."""
    return _checked(read_scenario_document(path), source=str(path))


def parse_scenario_text(text: str | bytes, *, source: str) -> Scenario:
    """A scenario from a file's contents, with the limits of every user file."""
    return _checked(scenario_document(text, source=source), source=source)


def _checked(document: Any, *, source: str) -> Scenario:
    try:
        return parse_scenario(document, source=source)
    except ScenarioError as error:
        lines = str(error).splitlines()
        raise ScenarioError("\n".join(f"{source}: {line}" for line in lines)) from None


def parse_scenario(document: Any, *, source: str = "scenario") -> Scenario:
    """A scenario from parsed YAML; every error, as `path: message`, one per line."""
    if not isinstance(document, Mapping):
        raise ScenarioError("(document): expected a mapping with pool:, cloud: and events:")
    errors: list[str] = []

    def attempt(part: Callable[[], _T], fallback: _T) -> _T:
        try:
            return part()
        except ScenarioError as error:
            errors.extend(str(error).splitlines())
            return fallback

    errors += [
        f"{key}: unknown field; known fields: {', '.join(TOP_LEVEL)}"
        for key in document
        if key not in TOP_LEVEL
    ]
    pool_obj = document.get("pool")
    pool = None
    if pool_obj is None:
        errors.append("pool: is required: a RunPodPool (apiVersion, kind, metadata, spec)")
    else:
        pool, problems = load_pool(pool_obj)
        errors += [f"pool.{p.path}: {p.message}" for p in problems]
    duration = attempt(
        lambda: _duration(document, "duration", default=DEFAULT_DURATION_S, minimum=1.0),
        DEFAULT_DURATION_S,
    )
    if duration > MAX_DURATION_S:
        errors.append("duration: at most 30 days of simulated time")
    interval = attempt(
        lambda: _duration(document, "interval", default=DEFAULT_INTERVAL_S, minimum=1.0),
        DEFAULT_INTERVAL_S,
    )
    cloud = attempt(lambda: parse_cloud_section(document.get("cloud") or {}), None)
    description = document.get("description")
    if description is not None and not isinstance(description, str):
        errors.append("description: expected text")
    raw_events = document.get("events") or []
    events: list[ScenarioEvent] = []
    if not isinstance(raw_events, list):
        errors.append("events: expected a list of {at, do, ...}")
    else:
        for i, item in enumerate(raw_events):
            try:
                events.append(_event(item, index=i, duration=duration))
            except ScenarioError as error:
                errors.extend(str(error).splitlines())
    events.sort(key=lambda e: (e.at, e.index))
    if pool is not None and pool_obj is not None:
        attempt(lambda: _check_patches(pool_obj, events), None)
    if errors or pool is None or cloud is None or not isinstance(pool_obj, Mapping):
        raise ScenarioError("\n".join(errors) or "pool: expected a RunPodPool mapping")
    namespace = pool.namespace or "runpod"
    return Scenario(
        source=source,
        pool=copy.deepcopy(dict(pool_obj)),
        name=pool.name,
        namespace=namespace,
        cloud=cloud,
        events=tuple(events),
        duration=duration,
        interval=interval,
        description=description.strip() if isinstance(description, str) and description else None,
    )


def _duration(data: Mapping[str, Any], key: str, *, default: float, minimum: float) -> float:
    if key not in data:
        return default
    seconds = _seconds(data[key], key)
    if seconds < minimum:
        raise ScenarioError(f"{key}: must be at least {minimum:g}s")
    return seconds


def _seconds(value: Any, path: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value < 0:
            raise ScenarioError(f"{path}: must not be negative")
        return float(value)
    try:
        return parse_duration(value)
    except DurationError as error:
        raise ScenarioError(f"{path}: {error}") from None


def _signed_seconds(value: Any, path: str) -> float:
    """A duration that may step backwards: 1h, -1h, +30m, or seconds (-3600)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = value.strip() if isinstance(value, str) else value
    sign = -1.0 if isinstance(text, str) and text.startswith("-") else 1.0
    if isinstance(text, str) and text[:1] in "+-":
        text = text[1:]
    return sign * _seconds(text, path)


def _event(item: Any, *, index: int, duration: float) -> ScenarioEvent:
    path = f"events[{index}]"
    if not isinstance(item, Mapping):
        raise ScenarioError(f"{path}: expected a mapping such as {{at: 10m, do: die, pod: 1}}")
    do = item.get("do")
    if do not in EVENTS:
        raise ScenarioError(f"{path}.do: expected one of {', '.join(EVENTS)}, got {do!r}")
    needs_pod, required, optional = EVENTS[do]
    allowed = ("at", "do", *(("pod",) if needs_pod else ()), *required, *optional)
    for key in item:
        if key not in allowed:
            raise ScenarioError(
                f"{path}.{key}: not a field of `do: {do}`; its fields: {', '.join(allowed)}"
            )
    for key in ("at", *(("pod",) if needs_pod else ()), *required):
        if key not in item:
            raise ScenarioError(f"{path}.{key}: is required for `do: {do}`")
    at = _seconds(item["at"], f"{path}.at")
    if at > duration:
        raise ScenarioError(f"{path}.at: {at:g}s is after the scenario's duration ({duration:g}s)")
    fields: dict[str, Any] = {}
    if needs_pod:
        pod = item["pod"]
        if isinstance(pod, bool) or not isinstance(pod, int) or pod < 1:
            raise ScenarioError(f"{path}.pod: the Nth pool pod by creation, a whole number >= 1")
        fields["pod"] = pod
    if do == "slow":
        fields["latency"] = _seconds(item["latency"], f"{path}.latency")
    elif do == "errors":
        fields["ratio"] = _number(item["ratio"], f"{path}.ratio", low=0.0, high=1.0)
    elif do == "note":
        text = item["text"]
        if text is not None and not isinstance(text, str):
            raise ScenarioError(f"{path}.text: expected text (empty clears the note)")
        fields["text"] = text or None
    elif do == "stock":
        fields.update(_stock(item, path))
    elif do == "load":
        fields["value"] = _number(item["value"], f"{path}.value", low=0.0)
    elif do == "apply":
        patch = item["patch"]
        if not isinstance(patch, Mapping) or set(patch) != {"spec"}:
            raise ScenarioError(
                f"{path}.patch: expected a merge patch of the pool's spec, e.g. "
                "{spec: {image: ghcr.io/acme/infer:1.5}}"
            )
        fields["patch"] = copy.deepcopy(dict(patch))
    elif do == "controller-restart" and "point" in item:
        try:
            fields["point"] = parse_point(item["point"])
        except PointError as error:
            raise ScenarioError(f"{path}.point: {error}") from None
    elif do == "fault":
        fields.update(_fault(item, path))
    elif do == "edit-status":
        status = item["status"]
        if status is not None and not isinstance(status, Mapping):
            raise ScenarioError(
                f"{path}.status: expected the status as stored (a mapping), or {{}} for none"
            )
        fields["status"] = copy.deepcopy(dict(status or {}))
    elif do == "clock-step":
        fields["by"] = _signed_seconds(item["by"], f"{path}.by")
    return ScenarioEvent(at=at, do=do, index=index, **fields)


def _fault(item: Mapping[str, Any], path: str) -> dict[str, Any]:
    """`{operation: createPod, kind: ServerError, times: 2}`; kind may carry fields."""
    operation = item["operation"]
    times = item.get("times", 1)
    if isinstance(times, bool) or not isinstance(times, int) or times < 1:
        raise ScenarioError(f"{path}.times: how many calls suffer it, a whole number >= 1")
    kind = item["kind"]
    described = {"kind": kind} if isinstance(kind, str) else kind
    if not isinstance(described, Mapping):
        raise ScenarioError(
            f"{path}.kind: a fault kind such as ServerError, or {{kind: ServerError, status: 503}}"
        )
    if operation in KUBE_WRITES:
        if operation != STATUS_WRITE or described.get("kind") not in KUBE_FAULT_KINDS:
            raise ScenarioError(
                f"{path}.kind: {STATUS_WRITE} takes {' or '.join(KUBE_FAULT_KINDS)}"
            )
        storm = KubeFault(described["kind"], seconds=_storm_seconds(described, path))
        return {"operation": operation, "fault": storm, "times": times}
    try:
        check_operation(operation)
        fault = fault_from_dict(described, where=f"{path}.kind")
    except FaultError as error:
        text = str(error)
        raise ScenarioError(
            text if text.startswith(path) else f"{path}.operation: {text}"
        ) from None
    if isinstance(fault, ListingLag) and operation != RunPodOperation.CREATE_POD:
        raise ScenarioError(
            f"{path}.operation: ListingLag delays the listing of created pods; "
            f"use operation: {RunPodOperation.CREATE_POD}"
        )
    return {"operation": operation, "fault": fault, "times": times}


def _storm_seconds(described: Mapping[str, Any], path: str) -> float | None:
    """`{kind: Conflict, for: 30m}`: every status write answers 409 for that long."""
    extra = [key for key in described if key not in ("kind", "for")]
    if extra or ("for" in described and described["kind"] != "Conflict"):
        raise ScenarioError(f"{path}.kind: {STATUS_WRITE} takes {{kind: Conflict, for: 30m}}")
    return _seconds(described["for"], f"{path}.kind.for") if "for" in described else None


def _stock(item: Mapping[str, Any], path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, name in (("datacenter", "datacenter"), ("gpuType", "gpu_type")):
        value = item[key]
        if not isinstance(value, str) or not value.strip():
            raise ScenarioError(f"{path}.{key}: expected a non-empty string")
        out[name] = value
    count = item["count"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ScenarioError(f"{path}.count: free GPUs, a whole number >= 0 (0: out of stock)")
    out["count"] = count
    cloud = item.get("cloud", "SECURE")
    if cloud not in ("SECURE", "COMMUNITY"):
        raise ScenarioError(f"{path}.cloud: expected SECURE or COMMUNITY, got {cloud!r}")
    out["cloud"] = cloud
    if "costPerHr" in item:
        out["cost_per_hr"] = _number(item["costPerHr"], f"{path}.costPerHr", low=0.0)
    return out


def _number(value: Any, path: str, *, low: float, high: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError(f"{path}: expected a number, got {value!r}")
    if value < low or (high is not None and value > high):
        bounds = f"between {low:g} and {high:g}" if high is not None else f">= {low:g}"
        raise ScenarioError(f"{path}: expected a number {bounds}, got {value!r}")
    return float(value)


def _check_patches(pool_obj: Mapping[str, Any], events: list[ScenarioEvent]) -> None:
    """Every `apply`, in time order, must leave a valid pool: say which one breaks it."""
    current: Any = copy.deepcopy(dict(pool_obj))
    for event in events:
        if event.do != "apply" or event.patch is None:
            continue
        current = merge_patch(current, event.patch)
        pool, problems = load_pool(current)
        if pool is None:
            raise ScenarioError(
                "\n".join(f"events[{event.index}].patch: {p.path}: {p.message}" for p in problems)
            )
