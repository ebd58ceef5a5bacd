"""What the API server checks on a CustomResourceDefinition when it is created.

Shared by tests/install/test_crd_install.py. Issue 24: a real API server refused deploy/crd.yaml
with 7 errors while every test passed, because the tests admitted pools and never
checked the CRD itself. `crd_problems` does what apiextensions-apiserver does on create
(pkg/apis/apiextensions/validation/validation.go, ValidateCustomResourceDefinition), for
what rpp/model/crd.py can generate, and words each error as the server does, the path as
it prints it for a CRD of one version (`spec.validation.openAPIV3Schema...`):

- the structural schema (pkg/apiserver/schema/validation.go): a known type on every node,
  items on every array, none of the keywords a structural schema forbids, properties and
  additionalProperties never together, metadata at the root with at most name and
  generateName; at the root, with the status subresource, only the fields allowed there;
- list types: a set's items scalar; a map list keyed by scalar properties of its items,
  each key required or defaulted; neither with nullable items;
- defaults: none in metadata, apiVersion or kind at the root, nor in additionalProperties
  inside them; every other `default` checked as pkg/apiserver/schema/defaulting/
  validation.go does: as written (no nested defaulting), already pruned (no unknown
  field), against its node's OpenAPI schema, and, when that passes, the CEL rules of the
  node and of every node below it over it, an evaluation error ("no such key") being a
  refusal (tests/cel_k8s.py evaluates as cel-go);
- CEL rules: a rule; a message, when given, not blank and on one line; one when the rule
  spans lines; the rule compiles (cel-python's parser); every `self.<field>` names a
  property (cel-go's type check refuses an undefined field);
- standing for the server's cost estimate, which cel-python cannot make: every string or
  list a rule reads is bounded (maxLength or enum, maxItems), and so is every list above a
  node with rules (the estimate multiplies by its length);
- printer columns: a known type, a JSONPath starting with `.`.

Two checks are ours, stricter than the server: a default under additionalProperties is
refused anywhere (the server never validates one there), and a default list repeating an
entry of a set (the server would refuse every object given that default).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import re2  # type: ignore[import-untyped]  # RE2, which the API server's patterns are
from celpy.celparser import CELParseError

from tests.cel_k8s import field_reads, parse, rule_failures
from tests.crd_admission import schema_errors

BASE = "spec.validation.openAPIV3Schema"
TYPES = {"array", "boolean", "integer", "number", "object", "string"}
COLUMN_TYPES = {"integer", "number", "string", "boolean", "date"}
ROOT_ALLOWED = {
    "description", "type", "format", "title", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
    "uniqueItems", "multipleOf", "required", "items", "properties", "externalDocs", "example",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations",
}  # fmt: skip
FORBIDDEN = {
    "$ref", "definitions", "dependencies", "patternProperties", "additionalItems", "id",
}  # fmt: skip
# Keywords this model does not follow (the generator emits none): it says so.
UNMODELLED = {"anyOf", "allOf", "oneOf", "not", "x-kubernetes-embedded-resource"}
META = {"metadata", "apiVersion", "kind"}
_META = "metadata, apiVersion or kind"
_TYPE, _KEYS = "x-kubernetes-list-type", "x-kubernetes-list-map-keys"
_ATOMIC = "must be atomic as item of a list with x-kubernetes-list-type=set"
_COST = "its cost cannot be bounded"


def _child(path: str, key: str) -> str:
    return f"{path}.properties[{key}]"


def _walk(
    node: dict[str, Any],
    path: str,
    *,
    level: str = "root",
    meta: bool = False,
    under_map: bool = False,
) -> Iterator[tuple[str, dict[str, Any], str, bool, bool]]:
    """Every schema node: (path, node, level, inside root metadata, under
    additionalProperties)."""
    yield path, node, level, meta, under_map
    for key, sub in node.get("properties", {}).items():
        inside = meta or (level == "root" and key in META)
        yield from _walk(sub, _child(path, key), level="field", meta=inside, under_map=under_map)
    if isinstance(node.get("items"), dict):
        yield from _walk(
            node["items"], f"{path}.items", level="item", meta=meta, under_map=under_map
        )
    if isinstance(node.get("additionalProperties"), dict):
        more = node["additionalProperties"]
        yield from _walk(
            more, f"{path}.additionalProperties", level="field", meta=meta, under_map=True
        )


def _node_problems(path: str, node: dict[str, Any], level: str) -> Iterator[str]:
    for key in sorted(set(node) & FORBIDDEN):
        yield f"{path}.{key}: Forbidden: {key} is not supported"
    for key in sorted(set(node) & UNMODELLED):
        yield f"{path}.{key}: not modelled by tests/crd_create.py; teach it first"
    kind = node.get("type")
    if kind is None and not node.get("x-kubernetes-preserve-unknown-fields"):
        where = {"root": "at the root", "item": "for specified array items"}.get(
            level, "for specified object fields"
        )
        yield f"{path}.type: Required value: must not be empty {where}"
    elif kind is not None and kind not in TYPES:
        yield f"{path}.type: Unsupported value: {kind!r}"
    if kind == "array" and "items" not in node:
        yield f"{path}.items: Required value: must be specified"
    if isinstance(node.get("items"), list):
        yield f"{path}.items: Forbidden: items must be a schema object and not an array"
    if "properties" in node and node.get("additionalProperties", True) is not True:
        yield (
            f"{path}.additionalProperties: Forbidden: additionalProperties and properties "
            "are mutual exclusive"
        )
    if node.get("uniqueItems"):
        yield f"{path}.uniqueItems: Forbidden: uniqueItems cannot be set to true"
    if node.get("x-kubernetes-preserve-unknown-fields") is False:
        yield f"{path}.x-kubernetes-preserve-unknown-fields: must be true or undefined"
    if "pattern" in node:
        try:
            re2.compile(node["pattern"])
        except re2.error as err:
            yield f"{path}.pattern: Invalid value: must be a valid regular expression: {err}"
    yield from _list_problems(path, node)
    mapped = node.get("x-kubernetes-map-type")
    if mapped is not None and (kind != "object" or mapped not in ("atomic", "granular")):
        yield f"{path}.x-kubernetes-map-type: Invalid value: {mapped!r} on type {kind}"


def _list_problems(path: str, node: dict[str, Any]) -> Iterator[str]:
    listed, keys = node.get("x-kubernetes-list-type"), node.get("x-kubernetes-list-map-keys")
    items: dict[str, Any] = node["items"] if isinstance(node.get("items"), dict) else {}
    if keys and listed != "map":
        yield f"{path}.x-kubernetes-list-type: must be map if {_KEYS} is non-empty"
    if listed is None:
        return
    if node.get("type") != "array":
        yield f"{path}.type: must be array if x-kubernetes-list-type is specified"
    if listed not in ("atomic", "set", "map"):
        yield f"{path}.x-kubernetes-list-type: Unsupported value: {listed!r}"
    if listed in ("set", "map") and items.get("nullable"):
        yield f"{path}.items.nullable: Forbidden: cannot be nullable when {_TYPE} is {listed}"
    if (
        listed == "set"
        and items.get("type") == "object"
        and items.get("x-kubernetes-map-type") != "atomic"
    ):
        yield f"{path}.items.x-kubernetes-map-type: {_ATOMIC}"
    if (
        listed == "set"
        and items.get("type") == "array"
        and items.get("x-kubernetes-list-type", "atomic") != "atomic"
    ):
        yield f"{path}.items.{_TYPE}: {_ATOMIC}"
    if listed != "map":
        return
    if not keys:
        yield f"{path}.{_KEYS}: Required value: must not be empty if {_TYPE} is map"
    if items.get("type") != "object":
        yield f"{path}.items.type: must be object if parent array's {_TYPE} is map"
    props = items.get("properties", {})
    for key in keys or []:
        at = f"{path}.items.properties[{key}]"
        if key not in props:
            yield f"{path}.{_KEYS}: entries must all be names of item properties"
            continue
        if props[key].get("type") in ("array", "object"):
            yield f"{at}.type: must be a scalar type if parent array's {_TYPE} is map"
        if key not in items.get("required", []) and "default" not in props[key]:
            yield (
                f"{at}.default: Required value: this property is in {_KEYS}, so it must "
                "have a default or be a required property"
            )
        if props[key].get("nullable"):
            yield f"{at}.nullable: Forbidden: in {_KEYS}, so it cannot be nullable"
    if len(set(keys or [])) != len(keys or []):
        yield f"{path}.{_KEYS}: must not contain duplicate entries"


def _metadata_problems(path: str, node: dict[str, Any]) -> Iterator[str]:
    """Metadata at the root may name `name` and `generateName`, and nothing else."""
    extra = set(node) - {"type", "properties"}
    names = set(node.get("properties", {}))
    if extra or names - {"name", "generateName"} or node.get("type", "object") != "object":
        yield (
            f"{path}: Forbidden: must not specify anything other than name and generateName, "
            "but metadata is implicitly specified"
        )


def _resolve(node: dict[str, Any], field: tuple[str, ...]) -> dict[str, Any] | None:
    for key in field:
        if key in node.get("properties", {}):
            node = node["properties"][key]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None
    return node


def _unbounded(node: dict[str, Any]) -> str | None:
    if node.get("type") == "string" and "maxLength" not in node and "enum" not in node:
        return "maxLength"
    if node.get("type") == "array":
        if "maxItems" not in node:
            return "maxItems"
        return _unbounded(node["items"]) if isinstance(node.get("items"), dict) else None
    return None


def _rule_problems(path: str, node: dict[str, Any], unbounded_lists: list[str]) -> Iterator[str]:
    for index, rule in enumerate(node.get("x-kubernetes-validations", [])):
        at = f"{path}.x-kubernetes-validations[{index}]"
        text, message = rule.get("rule", "").strip(), rule.get("message")
        if not text:
            yield f"{at}.rule: Required value: rule is not specified"
            continue
        if message is not None and not message.strip():
            yield f"{at}.message: Invalid value: must be non-empty if specified"
        elif message is not None and ("\n" in message.strip() or "\r" in message.strip()):
            yield f"{at}.message: Invalid value: must not contain line breaks"
        elif "\n" in text and not message:
            yield f"{at}.message: Required value: must be specified if rule contains line breaks"
        try:
            parse(text)
        except CELParseError as err:  # a compile error to cel-go
            yield f"{at}.rule: Invalid value: compilation failed: {err}"
            continue
        if "oldSelf" in text:
            yield f"{at}.rule: transition rules (oldSelf) are not modelled here; teach this"
        for field, presence_only in field_reads(text):
            target, name = _resolve(node, field), ".".join(field)
            if target is None:
                yield f"{at}.rule: Invalid value: compilation failed: undefined field '{name}'"
            elif not presence_only and (bound := _unbounded(target)):
                yield f"{at}.rule: reads self.{name}, which has no {bound}: {_COST}"
        if "self" in text and (bound := _unbounded(node)):
            yield f"{at}.rule: on a node without {bound}: {_COST}"
        for above in unbounded_lists:
            yield f"{at}.rule: under {above}, a list without maxItems: {_COST}"


def prune(node: dict[str, Any], value: Any) -> Any:
    """`value` without the fields `node` does not know (pkg/apiserver/schema/pruning)."""
    if isinstance(value, dict):
        if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            return {
                k: prune(node["properties"][k], v)
                for k, v in value.items()
                if k in node["properties"]
            }
        if isinstance(node.get("additionalProperties"), dict):
            return {k: prune(node["additionalProperties"], v) for k, v in value.items()}
        return value if node.get("x-kubernetes-preserve-unknown-fields") else {}
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        return [prune(node["items"], v) for v in value]
    return value


def _default_problems(path: str, node: dict[str, Any]) -> Iterator[str]:
    """A default as pkg/apiserver/schema/defaulting/validation.go checks it."""
    default, at = node["default"], f"{path}.default"
    if prune(node, copy.deepcopy(default)) != default:
        yield f"{at}: Invalid value: must not have unknown fields"
    errors = schema_errors(node, default, closed=False)
    for error in errors:
        where = "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in error.path)
        yield f"{at}{where}: Invalid value: {error.message}"
    if errors:
        return  # the server runs the rules only on a default its schema accepts
    for where, kind, detail in rule_failures(node, copy.deepcopy(default), at):
        yield f'{where}: Invalid value: "{kind}": {detail}'


def schema_problems(root: dict[str, Any]) -> list[str]:
    """Every refusal of the openAPIV3Schema of a CRD with the status subresource."""
    found: list[str] = []
    for key in sorted(set(root) - ROOT_ALLOWED):
        found.append(
            f"{BASE}: Invalid value: {key} is not allowed at the root with the status subresource"
        )
    if root.get("type") != "object":
        found.append(f"{BASE}.type: Invalid value: must be object at the root")
    if root.get("nullable"):
        found.append(f"{BASE}.nullable: Forbidden: nullable cannot be true at the root")
    if "metadata" in root.get("properties", {}):
        found += _metadata_problems(_child(BASE, "metadata"), root["properties"]["metadata"])
    lists: dict[str, list[str]] = {BASE: []}
    for path, node, level, meta, under_map in _walk(root, BASE):
        found += _node_problems(path, node, level)
        above = lists.get(path, [])
        for child in [*(_child(path, k) for k in node.get("properties", {})), f"{path}.items"]:
            lists[child] = above + (
                [path] if child.endswith(".items") and "maxItems" not in node else []
            )
        lists[f"{path}.additionalProperties"] = above
        found += _rule_problems(path, node, above)
        if "default" not in node:
            continue
        if meta:
            found.append(f"{path}.default: Forbidden: must not be set in top-level {_META}")
        elif under_map:
            found.append(f"{path}.default: under additionalProperties, never validated there")
        else:
            found += _default_problems(path, node)
    return found


def crd_problems(crd: dict[str, Any]) -> list[str]:
    """Every refusal of `crd` (one version, status subresource) that this model makes."""
    spec = crd["spec"]
    found = []
    if crd["metadata"]["name"] != f"{spec['names']['plural']}.{spec['group']}":
        found.append('metadata.name: Invalid value: must be spec.names.plural+"."+spec.group')
    if "." not in spec["group"]:
        found.append("spec.group: Invalid value: should be a domain with at least one dot")
    if spec["names"]["kind"] == spec["names"]["listKind"]:
        found.append("spec.names.listKind: Invalid value: kind and listKind may not be the same")
    [version] = spec["versions"]
    for index, column in enumerate(version.get("additionalPrinterColumns", [])):
        at = f"spec.versions[0].additionalPrinterColumns[{index}]"
        if not column.get("name"):
            found.append(f"{at}.name: Required value")
        if column.get("type") not in COLUMN_TYPES:
            found.append(f"{at}.type: Unsupported value: {column.get('type')!r}")
        if not str(column.get("jsonPath", "")).startswith("."):
            found.append(
                f"{at}.JSONPath: Invalid value: must be a simple json path starting with ."
            )
    return found + schema_problems(version["schema"]["openAPIV3Schema"])
