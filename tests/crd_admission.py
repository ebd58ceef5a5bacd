"""The API server's admission of a RunPodPool, modelled from the generated CRD.

Shared by tests/test_crd.py and tests/test_spec_agreement.py. What a user who runs
`kubectl apply` gets is decided by the API server from deploy/crd.yaml; this module does
the same steps, in the same order, from the same generated CRD (rpp/model/crd.py):

1. kubectl sends JSON: NaN and Infinity cannot be encoded, so they are refused before
   anything else; the API server decodes an integer outside int64 as a float (which an
   `integer` field then refuses);
2. null fields are pruned (no field of the schema is `nullable`), then structural
   defaults are applied;
3. the OpenAPI schema is checked with a JSON-schema validator, with three API-server
   behaviours Python's defaults would get wrong: `pattern` is a Go regular expression,
   whose `$` matches only at the very end (Python's `$` also matches before a final
   newline); a list marked `x-kubernetes-list-type: set` refuses an entry listed twice;
   unknown fields are refused, as kubectl's strict field validation does;
4. the CEL rules (`x-kubernetes-validations`) of every node, list items included, are
   evaluated with cel-python; a rule that cannot be evaluated (a duration past Go's
   range) refuses the object, as the API server does.

`admit_object` returns every reason for refusal, empty when the object is admitted.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator
from typing import Any

import celpy
import jsonschema
from jsonschema import validators

from rpp.model.crd import build_crd

INT64 = (-(2**63), 2**63 - 1)


@functools.cache
def _schema() -> dict[str, Any]:
    version = build_crd()["spec"]["versions"][0]
    return version["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def schema() -> dict[str, Any]:
    """The whole object's openAPIV3Schema from the generated CRD (a copy to change)."""
    return copy.deepcopy(_schema())


def spec_schema() -> dict[str, Any]:
    return schema()["properties"]["spec"]  # type: ignore[no-any-return]


def _go_pattern(pattern: str) -> re.Pattern[str]:
    """A Go (RE2) `pattern` as Python evaluates it: `$` only at the very end."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if isinstance(instance, str) and not _go_pattern(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _list_type(validator: Any, kind: str, instance: Any, schema: Any) -> Iterator[Any]:
    if kind == "set" and isinstance(instance, list):
        seen: list[Any] = []
        for item in instance:
            if item in seen:
                yield jsonschema.ValidationError(f"Duplicate value: {item!r}")
            seen.append(item)


_Validator = validators.extend(
    jsonschema.Draft4Validator,
    {"pattern": _pattern, "x-kubernetes-list-type": _list_type},
)


def as_json_schema(node: dict[str, Any], *, open_: bool = False) -> dict[str, Any]:
    """OpenAPI v3.0 -> JSON Schema draft 4, unknown fields refused (kubectl's strict field
    validation) except under `metadata`, which the API server owns; `x-kubernetes-list-type`
    kept for the validator above."""
    out = {
        k: v
        for k, v in node.items()
        if not k.startswith("x-kubernetes") or k == "x-kubernetes-list-type"
    }
    if out.pop("nullable", False):
        out["type"] = [out["type"], "null"]
    if "properties" in out:
        out["properties"] = {
            k: as_json_schema(v, open_=k == "metadata") for k, v in out["properties"].items()
        }
        if not open_ and not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    if "items" in out:
        out["items"] = as_json_schema(out["items"])
    if isinstance(out.get("additionalProperties"), dict):  # a map: its values' schema
        out["additionalProperties"] = as_json_schema(out["additionalProperties"])
    return out


def status_problems(status: Any) -> list[str]:
    """What the API server would refuse in a status write, per the CRD's status schema
    (timestamps checked as RFC 3339, as its date-time format demands)."""
    validator = _Validator(
        as_json_schema(_schema()["properties"]["status"]),
        format_checker=jsonschema.FormatChecker(["date-time"]),
    )
    return [f"{'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(status)]


def _decoded(value: Any) -> Any:
    """JSON numbers as the API server decodes them: int64 when they fit, else float64."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
        return float(value)
    if isinstance(value, dict):
        return {k: _decoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    return value


def prune_nulls(node: dict[str, Any], value: Any) -> Any:
    """Null fields of a non-nullable schema are dropped, as the API server does."""
    if isinstance(value, dict) and "properties" in node:
        return {
            k: prune_nulls(node["properties"].get(k, {}), v)
            for k, v in value.items()
            if not (v is None and not node["properties"].get(k, {}).get("nullable"))
        }
    if isinstance(value, list) and "items" in node:
        return [prune_nulls(node["items"], v) for v in value]
    return value


def apply_defaults(node: dict[str, Any], value: Any) -> Any:
    """Structural defaulting as the API server does it, before validation."""
    if isinstance(value, dict) and "properties" in node:
        for key, sub in node["properties"].items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                value[key] = apply_defaults(sub, value[key])
    return value


@functools.cache
def _program(rule: str) -> Any:
    env = celpy.Environment()
    return env.program(env.compile(rule))


def cel_failures(node: dict[str, Any], value: Any) -> list[str]:
    """The messages of the CEL rules that refuse `value`, at every node below `node`."""
    failures: list[str] = []
    rules = node.get("x-kubernetes-validations", [])
    this = celpy.adapter.json_to_cel(value) if rules else None
    for rule in rules:
        try:
            result = _program(rule["rule"]).evaluate({"self": this})
        except Exception as err:  # an evaluation error refuses, as the API server does
            result = err
        if isinstance(result, Exception) or not result:
            failures.append(rule["message"])
    if isinstance(value, dict):
        for key, sub in node.get("properties", {}).items():
            if key in value:
                failures += cel_failures(sub, value[key])
    if isinstance(value, list) and "items" in node:
        for item in value:
            failures += cel_failures(node["items"], item)
    return failures


@functools.cache
def _validator(node: str) -> Any:
    return _Validator(as_json_schema(json.loads(node)))


def _refusals(node: dict[str, Any], value: Any) -> list[str]:
    try:
        value = json.loads(json.dumps(value, allow_nan=False))
    except ValueError:
        return ["json: unsupported value: NaN or Infinity"]
    value = apply_defaults(node, prune_nulls(node, _decoded(value)))
    validator = _validator(json.dumps(node, sort_keys=True))
    errors = [f"{'.'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(value)]
    return errors or cel_failures(node, value)


def admit(spec: Any) -> list[str]:
    """What the API server would say about this spec alone."""
    return _refusals(_schema()["properties"]["spec"], spec)


def admit_object(obj: dict[str, Any]) -> list[str]:
    """What the API server would say about a whole RunPodPool (metadata.name included)."""
    return _refusals(_schema(), obj)
