"""The API server's admission of a RunPodPool, modelled from the generated CRD.

Shared by tests/model/test_crd.py and tests/model/test_spec_agreement.py. What a user who runs
`kubectl apply` gets is decided by the API server from deploy/crd.yaml; this module does
the same steps, in the same order, from the same generated CRD (rpp/model/crd.py):

1. kubectl turns the YAML into JSON: NaN and Infinity cannot be encoded, so they are
   refused before anything else; an integral float is written as an integer (Go writes
   the float64 2 as `2`, below 1e21), so `min: 2.0` arrives as 2; the API server decodes
   an integer outside int64 as a float;
2. null fields are pruned (no field of the schema is `nullable`), then structural
   defaults are applied;
3. the OpenAPI schema is checked with a JSON-schema validator, with the API server's
   behaviours where Python's defaults differ: `pattern` is a Go regular expression, whose
   `$` matches only at the very end; an `integer` takes a float that is a JSON integer
   (kube-openapi's type check, go-openapi/swag IsFloat64AJSONInteger); a list marked
   `x-kubernetes-list-type: set` refuses an entry listed twice, a `map` list two items
   with one key (pkg/apiserver/schema/listtype); unknown fields are refused, as kubectl's
   strict field validation does;
4. the CEL rules (`x-kubernetes-validations`) of every node, list items included, are
   evaluated as cel-go does (tests/cel_k8s.py); an evaluation error refuses the object.
   The rules run after the schema's errors unless one of them is blocking: a wrong type,
   a value outside an enum, a string or list too long, a missing required field (then the
   server says the rules were not checked); a pattern, a bound or a duplicate does not
   block (pkg/registry/customresource/strategy.go, hasBlockingErr).

A whole object is created as the API server creates it: its metadata and status are
decoded strictly first, so an unknown field there refuses the request before any check
(`strict decoding error: unknown field "metadata.foo"`; ObjectMeta's fields are the
kubernetes client's V1ObjectMeta; a status's are found as pruning finds them,
apiextensions-apiserver pkg/apiserver/schema/pruning/algorithm.go); then the status is
dropped (only the status subresource writes it), so nothing else in it is checked; a name
is required unless `generateName` is given (ValidateObjectMeta: "name or generateName is
required", which blocks the CEL rules).

`admit_object` returns every reason for refusal, empty when the object is admitted;
`refusals` gives each with the field path the API server names. Both take the object as
kubectl sends it: a file read with rpp/model/kube_yaml.py, the YAML kubectl reads. A date
PyYAML made of `2001-12-14` is sent as its ISO text (kubectl keeps the text; PyYAML lost
its spelling, and the ISO form is that text for a date written in full).
"""

from __future__ import annotations

import copy
import datetime
import functools
import json
import math
from collections.abc import Iterator
from typing import Any

import jsonschema
import re2  # type: ignore[import-untyped]  # RE2, which the API server's patterns are
from jsonschema import validators
from kubernetes.client import V1ObjectMeta

from rpp.model.crd import build_crd
from tests.cel_k8s import remember_verdicts_under, rule_failures

INT64 = (-(2**63), 2**63 - 1)
# go-openapi/swag (conv.IsFloat64AJSONInteger), which kube-openapi's type check calls.
JSON_INTEGERS = 2**53 - 1
_EPSILON = 1e-9
# Schema errors after which the API server runs no CEL rule (strategy.go hasBlockingErr:
# NotSupported, Required, TooLong, TooMany, TypeInvalid); an unknown field refuses the
# whole request (kubectl's strict field validation) before anything else.
BLOCKING = {"type", "enum", "required", "maxLength", "maxItems", "additionalProperties"}
NOT_CHECKED = (
    "some validation rules were not checked because the object was invalid; correct the "
    "existing errors to complete validation"
)


@functools.cache
def _schema() -> dict[str, Any]:
    version = build_crd()["spec"]["versions"][0]
    frozen: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    remember_verdicts_under(frozen)  # never changed: schema() hands out copies to change
    return frozen


def schema() -> dict[str, Any]:
    """The whole object's openAPIV3Schema from the generated CRD (a copy to change)."""
    return copy.deepcopy(_schema())


def spec_schema() -> dict[str, Any]:
    return schema()["properties"]["spec"]  # type: ignore[no-any-return]


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    """A `pattern` as the API server runs it: RE2 (its `$` only at the very end, its `\\d`
    ASCII), the same library tests/crd_create.py compiles the CRD's patterns with."""
    if isinstance(instance, str) and not re2.compile(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


def _list_type(validator: Any, kind: str, instance: Any, schema: Any) -> Iterator[Any]:
    """A set refuses an entry listed twice, a map list a second item with one key (each
    repeat reported once, at its second place, as listtype/validation.go does)."""
    if kind not in ("set", "map") or not isinstance(instance, list):
        return
    keys = schema.get("x-kubernetes-list-map-keys", [])
    seen: list[Any] = []
    reported: list[Any] = []
    for index, item in enumerate(instance):
        key = item
        if kind == "map" and isinstance(item, dict):
            key = {k: item[k] for k in keys if k in item}  # no key is a key too: {}
        if key in seen and key not in reported:
            reported.append(key)
            yield jsonschema.ValidationError(f"[{index}]: Duplicate value: {key!r}")
        seen.append(key)


def json_integer(value: float) -> bool:
    """go-openapi/swag's IsFloat64AJSONInteger: a float kube-openapi takes as an integer
    (within 2^53, and within a relative 1e-9 of a whole number)."""
    if math.isnan(value) or math.isinf(value) or abs(value) > JSON_INTEGERS:
        return False
    rounded = round(value)
    return value == rounded or (rounded != 0 and abs(value - rounded) < _EPSILON * abs(rounded))


def _is_integer(checker: Any, instance: Any) -> bool:
    if isinstance(instance, float):
        return json_integer(instance)
    return isinstance(instance, int) and not isinstance(instance, bool)


_Validator = validators.extend(
    jsonschema.Draft4Validator,
    {"pattern": _pattern, "x-kubernetes-list-type": _list_type},
    type_checker=jsonschema.Draft4Validator.TYPE_CHECKER.redefine("integer", _is_integer),
)


def as_json_schema(
    node: dict[str, Any], *, open_: bool = False, closed: bool = True
) -> dict[str, Any]:
    """OpenAPI v3.0 -> JSON Schema draft 4, unknown fields refused (kubectl's strict field
    validation; `closed=False` for what kube-openapi alone checks) except under
    `metadata`, which the API server owns; the list-type extensions kept for the
    validator above."""
    out = {
        k: v
        for k, v in node.items()
        if not k.startswith("x-kubernetes") or k.startswith("x-kubernetes-list-")
    }
    if out.pop("nullable", False):
        out["type"] = [out["type"], "null"]
    if "properties" in out:
        out["properties"] = {
            k: as_json_schema(v, open_=k == "metadata", closed=closed)
            for k, v in out["properties"].items()
        }
        if closed and not open_ and not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    if "items" in out:
        out["items"] = as_json_schema(out["items"], closed=closed)
    if isinstance(out.get("additionalProperties"), dict):  # a map: its values' schema
        out["additionalProperties"] = as_json_schema(out["additionalProperties"], closed=closed)
    return out


@functools.cache
def _validator(node: str, closed: bool) -> Any:
    return _Validator(
        as_json_schema(json.loads(node), closed=closed),
        format_checker=jsonschema.FormatChecker(["date-time"]),
    )


def schema_errors(node: dict[str, Any], value: Any, *, closed: bool = True) -> list[Any]:
    """The JSON-schema errors of `value` under the OpenAPI schema `node` (timestamps
    checked as RFC 3339, as the date-time format demands)."""
    return list(_validator(json.dumps(node, sort_keys=True), closed).iter_errors(value))


def _where(error: Any) -> str:
    return ".".join(map(str, error.path))


def status_problems(status: Any) -> list[str]:
    """What the API server would refuse in a status write, per the CRD's status schema
    (a map list's key required on each item and never repeated)."""
    errors = schema_errors(_schema()["properties"]["status"], status)
    return [f"{_where(e)}: {e.message}" for e in errors]


def sent(value: Any) -> Any:
    """A YAML value as kubectl sends it and the API server decodes it: an integral float
    below 1e21 is written as an integer (Go formats float64 2 as `2`; 1e21 and up in
    exponent form), and a JSON integer outside int64 is decoded as a float64; a date or
    time from PyYAML as its ISO text (see the module docstring)."""
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value if INT64[0] <= value <= INT64[1] else float(value)
    if isinstance(value, dict):
        return {sent(k) if isinstance(k, datetime.date) else k: sent(v) for k, v in value.items()}
    if isinstance(value, list):
        return [sent(v) for v in value]
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


def _cel_refusals(node: dict[str, Any], value: Any) -> list[tuple[str, str]]:
    return [(path.lstrip("."), detail) for path, _, detail in rule_failures(node, value, "")]


def cel_failures(node: dict[str, Any], value: Any) -> list[str]:
    """The messages of the CEL rules that refuse `value`, at every node below `node` (an
    evaluation error as the API server words it: "<error> evaluating rule: <message>")."""
    return [detail for _, detail in _cel_refusals(node, value)]


def _checked(
    node: dict[str, Any], value: Any, *, blocked: bool = False
) -> tuple[list[Any], list[tuple[str, str]]]:
    """The schema's errors and the CEL rules' refusals of `value` as the API server gets
    it (none of the rules' when a schema error, or another blocking one, blocks them)."""
    value = apply_defaults(node, prune_nulls(node, sent(value)))
    errors = schema_errors(node, value)
    if blocked or any(e.validator in BLOCKING for e in errors):
        return errors, [("", NOT_CHECKED)]
    return errors, _cel_refusals(node, value)


def _encodable(value: Any) -> bool:
    try:
        json.dumps(sent(value), allow_nan=False)
    except ValueError:
        return False
    return True


OBJECT_META = frozenset(V1ObjectMeta.attribute_map.values())
NAME_REQUIRED = ("metadata.name", "Required value: name or generateName is required")


def pruned(node: dict[str, Any] | None, value: Any, path: str) -> Iterator[str]:
    """The fields pruning drops from `value` under `node` (algorithm.go's prune: a map's
    keys are walked whatever the node's type; no node, no known key)."""
    if isinstance(value, dict):
        node = node or {}
        for key, item in value.items():
            if key in node.get("properties", {}):
                yield from pruned(node["properties"][key], item, f"{path}.{key}")
            elif isinstance(node.get("additionalProperties"), dict):
                yield from pruned(node["additionalProperties"], item, f"{path}.{key}")
            else:
                yield f"{path}.{key}"
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from pruned((node or {}).get("items"), item, f"{path}[{index}]")


def _created(obj: dict[str, Any]) -> tuple[list[str], list[tuple[str, str]], dict[str, Any]]:
    """A create: the strict decoding's unknown fields of metadata and status, the
    blocking errors of ObjectMeta's validation, and the object with its status dropped."""
    meta: dict[str, Any] = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    unknown = [f"metadata.{key}" for key in meta if key not in OBJECT_META]
    unknown += list(pruned(_schema()["properties"]["status"], obj.get("status"), "status"))
    required = [NAME_REQUIRED] if not meta.get("name") and not meta.get("generateName") else []
    return unknown, required, {k: v for k, v in obj.items() if k != "status"}


def _strict(unknown: list[str]) -> str:
    return "strict decoding error: " + ", ".join(f'unknown field "{path}"' for path in unknown)


def refusals(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """What the API server answers to a whole RunPodPool, as (field path, detail)."""
    if not _encodable(obj):
        return [("", "json: unsupported value: NaN or Infinity")]
    unknown, required, created = _created(obj)
    if unknown:
        return [("", _strict(unknown))]
    errors, rules = _checked(_schema(), copy.deepcopy(created), blocked=bool(required))
    return required + [(_where(e), e.message) for e in errors] + rules


def _said(node: dict[str, Any], value: Any) -> list[str]:
    """Schema errors as `path: message`, the CEL rules' refusals by their message."""
    if not _encodable(value):
        return ["json: unsupported value: NaN or Infinity"]
    errors, rules = _checked(node, copy.deepcopy(value))
    return [f"{_where(e)}: {e.message}" for e in errors] + [detail for _, detail in rules]


def admit(spec: Any) -> list[str]:
    """What the API server would say about this spec alone."""
    return _said(_schema()["properties"]["spec"], spec)


def admit_object(obj: dict[str, Any]) -> list[str]:
    """What the API server would say about a whole RunPodPool created from a file
    (metadata.name included; status dropped but for its unknown fields)."""
    if not _encodable(obj):
        return ["json: unsupported value: NaN or Infinity"]
    return [f"{path}: {detail}" if path else detail for path, detail in refusals(obj)]
