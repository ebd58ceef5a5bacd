"""Parse and validate a RunPodPool as a user wrote it, reporting every problem at once.

Where it sits: the first thing observe does with a pool object (and all `rpp validate`
does). It walks the dataclasses of `rpp.model.spec`, so every field's type, default and
constraint comes from the one model the CRD is generated from; the cross-field rules
that a JSON schema cannot express (or that the API server checks with CEL) are here too,
so a file rejected by `rpp validate` would also be rejected or flagged in the cluster.

Nothing here raises on bad input: the result is a resolved `RunPodPoolSpec` or `None`,
plus the full list of `Problem`s, each with its field path and a sentence to act on.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any

from rpp.model import spec as model
from rpp.model.durations import DurationError, format_duration, parse_duration


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a pool, at a field path such as `spec.replicas.max`."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class Pool:
    """A RunPodPool object: identity, generation and its resolved spec."""

    name: str
    namespace: str | None
    generation: int
    spec: model.RunPodPoolSpec


_TYPE_WORDS = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """The resolved type hints of a spec dataclass (resolving them costs, and they never
    change: the controller parses every pool every loop)."""
    return typing.get_type_hints(cls)


def _known_keys(cls: type) -> dict[str, dataclasses.Field[Any]]:
    return {model.json_name(f): f for f in dataclasses.fields(cls)}


def _unknown_key(key: str, known: list[str], path: str) -> Problem:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f'did you mean "{close[0]}"?' if close else f"known fields: {', '.join(known)}"
    return Problem(f"{path}.{key}" if path else key, f"unknown field; {hint}")


class _Walker:
    """Turns raw YAML values into constructor arguments, collecting problems."""

    def __init__(self, derived: Mapping[str, Any]) -> None:
        self.problems: list[Problem] = []
        self.derived = derived

    def dataclass_value(self, cls: type, raw: Any, path: str, rel: str) -> Any:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            self.problems.append(Problem(path, f"expected a mapping of fields, got {raw!r}"))
            raw = {}
        fields = _known_keys(cls)
        for key in raw:
            if key not in fields:
                self.problems.append(_unknown_key(str(key), list(fields), path))
        hints = _hints(cls)
        kwargs: dict[str, Any] = {}
        for key, f in fields.items():
            sub_path, sub_rel = f"{path}.{key}", f"{rel}.{key}" if rel else key
            hint = hints[f.name]
            value = _INVALID
            if key in raw:
                value = self.value(hint, f, raw[key], sub_path, sub_rel)
            if value is _INVALID:
                # Missing, or invalid and already reported: carry on with the default so
                # the cross-field rules still run and every problem is reported at once.
                value = self.default(hint, f, sub_path, sub_rel)
            kwargs[f.name] = value
        return cls(**kwargs)

    def default(self, hint: Any, f: dataclasses.Field[Any], path: str, rel: str) -> Any:
        if dataclasses.is_dataclass(hint):
            return self.dataclass_value(hint, {}, path, rel)  # type: ignore[arg-type]
        if f.metadata.get("derived"):
            return self.derived[rel]
        if f.default_factory is not dataclasses.MISSING:
            return f.default_factory()
        return f.default

    def value(self, hint: Any, f: dataclasses.Field[Any], raw: Any, path: str, rel: str) -> Any:
        before = len(self.problems)
        optional = isinstance(hint, UnionType) and NoneType in typing.get_args(hint)
        if optional:
            hint = next(a for a in typing.get_args(hint) if a is not NoneType)
        if raw is None:
            if optional:
                return None
            if f.metadata.get("derived"):
                return self.derived[rel]
        if dataclasses.is_dataclass(hint):
            return self.dataclass_value(hint, raw, path, rel)  # type: ignore[arg-type]
        if typing.get_origin(hint) is tuple:
            value = self._string_list(raw, f, path)
        elif f.metadata.get("duration"):
            value = self._duration(raw, path)
        else:
            value = self._scalar(hint, raw, path)
        if value is not _INVALID:
            self._constraints(f, value, path)
        return _INVALID if len(self.problems) > before else value

    def _scalar(self, hint: Any, raw: Any, path: str) -> Any:
        good = (
            isinstance(raw, bool)
            if hint is bool
            else not isinstance(raw, bool)
            and isinstance(raw, int | float if hint is float else hint)
        )
        if not good:
            want = _TYPE_WORDS.get(hint, str(hint))
            self.problems.append(Problem(path, f"expected {want}, got {raw!r}"))
            return _INVALID
        return float(raw) if hint is float else raw

    def _duration(self, raw: Any, path: str) -> Any:
        if isinstance(raw, bool) or not isinstance(raw, str):
            self.problems.append(
                Problem(path, f'expected a duration such as "150s" or "2m", got {raw!r}')
            )
            return _INVALID
        try:
            seconds = parse_duration(raw)
        except DurationError as err:
            self.problems.append(Problem(path, str(err)))
            return _INVALID
        if seconds <= 0:
            self.problems.append(Problem(path, f"{raw!r} must be longer than zero"))
            return _INVALID
        return seconds

    def _string_list(self, raw: Any, f: dataclasses.Field[Any], path: str) -> Any:
        if not isinstance(raw, list):
            self.problems.append(Problem(path, f"expected a list of strings, got {raw!r}"))
            return _INVALID
        if f.metadata.get("min_items") and len(raw) < f.metadata["min_items"]:
            self.problems.append(Problem(path, f"is empty; {f.metadata['min_items_hint']}"))
            return _INVALID
        item_pattern = f.metadata.get("item_pattern")
        seen: set[str] = set()
        for i, item in enumerate(raw):
            if not isinstance(item, str) or not item.strip():
                self.problems.append(
                    Problem(f"{path}[{i}]", f"expected a non-empty string, got {item!r}")
                )
            elif item_pattern and not re.match(item_pattern, item):
                self.problems.append(
                    Problem(
                        f"{path}[{i}]",
                        f"{item!r} is not a RunPod pod id (lowercase letters and digits, "
                        "like 5pd0l3pw8xqhzt); copy the id from the RunPod console",
                    )
                )
            elif item in seen:
                self.problems.append(Problem(f"{path}[{i}]", f"{item!r} is listed twice"))
            else:
                seen.add(item)
        return tuple(raw)

    def _constraints(self, f: dataclasses.Field[Any], value: Any, path: str) -> None:
        meta = f.metadata
        shown = format_duration(value) if meta.get("duration") else value
        if meta.get("minimum") is not None and value < meta["minimum"]:
            word = "negative" if meta["minimum"] == 0 else f"below {meta['minimum']}"
            self.problems.append(
                Problem(path, f"{shown} is {word}; use {meta['minimum']} or more")
            )
        if meta.get("exclusive_minimum") is not None and value <= meta["exclusive_minimum"]:
            self.problems.append(
                Problem(path, f"{shown} must be greater than {meta['exclusive_minimum']}")
            )
        if meta.get("maximum") is not None and value > meta["maximum"]:
            self.problems.append(Problem(path, f"{shown} is above the maximum {meta['maximum']}"))
        if meta.get("enum") and value not in meta["enum"]:
            choices = " or ".join(meta["enum"])
            self.problems.append(Problem(path, f"{value!r} is not valid; use {choices}"))
        if meta.get("pattern") and not re.match(meta["pattern"], value):
            self.problems.append(
                Problem(path, f"{value!r} does not match the pattern {meta['pattern']}")
            )


_INVALID: Any = object()


def load_spec(
    pool: str, raw: Any, *, path: str = "spec"
) -> tuple[model.RunPodPoolSpec | None, list[Problem]]:
    """The resolved spec of pool `pool`, or None, and every problem found."""
    replicas_raw = raw.get("replicas") if isinstance(raw, Mapping) else None
    raw_min = replicas_raw.get("min") if isinstance(replicas_raw, Mapping) else None
    replicas_min = raw_min if isinstance(raw_min, int) and not isinstance(raw_min, bool) else 1
    walker = _Walker(model.derived_defaults(pool, replicas_min=max(replicas_min, 1)))
    spec = walker.dataclass_value(model.RunPodPoolSpec, raw, path, "")
    problems = list(walker.problems)
    reported = {p.path for p in problems}
    problems += [p for p in cross_field_problems(spec, path=path) if p.path not in reported]
    return (None if problems else spec), problems


def cross_field_problems(spec: model.RunPodPoolSpec, *, path: str = "spec") -> list[Problem]:
    """Rules between fields; each also stands as a CEL rule in the CRD where it can."""
    out: list[Problem] = []
    r, lim, ngx = spec.replicas, spec.limits, spec.nginx
    if r.min > r.max:
        out.append(
            Problem(
                f"{path}.replicas",
                f"min ({r.min}) is greater than max ({r.max}); raise max or lower min",
            )
        )
    if ngx.slot_ports < r.max + 1:
        out.append(
            Problem(
                f"{path}.nginx.slotPorts",
                f"{ngx.slot_ports} slot ports cannot hold replicas.max ({r.max}) plus one "
                f"replacement; set slotPorts to at least {r.max + 1}",
            )
        )
    if ngx.base_port + ngx.slot_ports - 1 > 65535:
        out.append(Problem(f"{path}.nginx.slotPorts", "basePort + slotPorts runs past port 65535"))
    both = [dc for dc in spec.datacenters.allow if dc in spec.datacenters.deny]
    for dc in both:
        out.append(
            Problem(
                f"{path}.datacenters.deny",
                f"{dc!r} is both allowed and denied; remove it from one list",
            )
        )
    if spec.mode is model.Mode.MANAGE and not spec.datacenters.allow:
        out.append(
            Problem(
                f"{path}.datacenters.allow",
                "required to create pods (dryRun: false); list the datacenters pods may use, "
                "in order of preference",
            )
        )
    if lim.max_pods < r.min:
        out.append(
            Problem(
                f"{path}.limits.maxPods",
                f"{lim.max_pods} is below replicas.min ({r.min}); the pool could never "
                "reach its size",
            )
        )
    if spec.autoscaling.enabled and not (spec.autoscaling.query or "").strip():
        out.append(
            Problem(
                f"{path}.autoscaling.query",
                "required when autoscaling is enabled; give a PromQL query returning one value",
            )
        )
    if spec.metrics_token_key and not spec.env_from_secret:
        out.append(
            Problem(
                f"{path}.metricsTokenKey",
                "needs envFromSecret: the token is read from that Secret",
            )
        )
    slow = spec.health.replace_when.slow_scrape.threshold
    if spec.probe.timeout <= slow:
        out.append(
            Problem(
                f"{path}.probe.timeout",
                f"{format_duration(spec.probe.timeout)} must be longer than "
                f"health.replaceWhen.slowScrape.threshold ({format_duration(slow)}), "
                "or slow scrapes would count as failures",
            )
        )
    return out


def load_pool(obj: Any, *, group: str = model.API_GROUP) -> tuple[Pool | None, list[Problem]]:
    """Validate a whole RunPodPool object (apiVersion, kind, metadata, spec)."""
    if not isinstance(obj, Mapping):
        return None, [Problem("(document)", f"expected a RunPodPool object, got {obj!r}")]
    problems: list[Problem] = []
    for key in obj:
        if key not in ("apiVersion", "kind", "metadata", "spec", "status"):
            problems.append(_unknown_key(str(key), ["apiVersion", "kind", "metadata", "spec"], ""))
    want_api = f"{group}/{model.API_VERSION}"
    if obj.get("apiVersion") != want_api:
        problems.append(
            Problem("apiVersion", f"expected {want_api}, got {obj.get('apiVersion')!r}")
        )
    if obj.get("kind") != model.KIND:
        problems.append(Problem("kind", f"expected {model.KIND}, got {obj.get('kind')!r}"))
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name")
    if not isinstance(name, str) or not re.match(model.POOL_NAME_PATTERN, name):
        problems.append(
            Problem(
                "metadata.name",
                f"{name!r} is not a valid pool name; use lowercase letters, digits and '-'",
            )
        )
        name = "pool"
    elif len(name) > model.POOL_NAME_MAX:
        problems.append(
            Problem(
                "metadata.name", f"is {len(name)} characters; keep it to {model.POOL_NAME_MAX}"
            )
        )
    generation = meta.get("generation", 0)
    spec, spec_problems = load_spec(name, obj.get("spec"))
    problems += spec_problems
    if problems or spec is None:
        return None, problems
    namespace = meta.get("namespace")
    return Pool(name, namespace if isinstance(namespace, str) else None, int(generation), spec), []


def spec_for_storage(value: Any) -> Any:
    """The spec as a user would write it, every default shown (`--show-defaults`)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.metadata.get("duration"):
                out[model.json_name(f)] = format_duration(item)
            else:
                out[model.json_name(f)] = spec_for_storage(item)
        return out
    if isinstance(value, tuple):
        return list(value)
    return value
