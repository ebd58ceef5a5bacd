"""Generate the RunPodPool CustomResourceDefinition from the spec model.

Where it sits: outside the reconcile loop. `rpp crd` prints what this module builds,
deploy/crd.yaml and the Helm chart's crds/ are its output, and a test fails when they
drift. Walking `rpp.model.spec`'s dataclasses means a field added to the model appears in the
API server's schema with the same type, default, bounds and documentation, and the
cross-field rules the API server can check are written here as CEL next to the schema.
"""

from __future__ import annotations

import dataclasses
import typing
from types import NoneType, UnionType
from typing import Any

import yaml

from rpp.model import spec as model
from rpp.model.durations import DURATION_PATTERN, format_duration

# CEL cost estimation needs bounds on every list and string a rule iterates over.
_MAX_ITEMS = {"gpuTypes": 32, "adopt": 256, "allow": 64, "deny": 64}
_MAX_ITEM_LENGTH = 128

# Rules the API server checks on write (x-kubernetes-validations), by object path.
# Defaults are applied before validation, so defaulted fields can be read directly.
_CEL_RULES: dict[str, list[dict[str, str]]] = {
    "replicas": [
        {
            "rule": "!has(self.max) || self.min <= self.max",
            "message": "replicas.min must not be greater than replicas.max",
        }
    ],
    "autoscaling": [
        {
            "rule": "!self.enabled || (has(self.query) && size(self.query) > 0)",
            "message": "autoscaling.query is required when autoscaling is enabled",
        }
    ],
    "datacenters": [
        {
            "rule": "self.allow.all(dc, !(dc in self.deny))",
            "message": "a datacenter cannot be both in datacenters.allow and datacenters.deny",
        }
    ],
    "": [
        {
            "rule": "self.nginx.slotPorts >= "
            "(has(self.replicas.max) ? self.replicas.max : self.replicas.min) + 1",
            "message": "nginx.slotPorts must be at least replicas.max + 1",
        },
        {
            "rule": "self.paused || self.dryRun || !has(self.templateId) "
            "|| size(self.datacenters.allow) > 0",
            "message": "datacenters.allow is required to create pods (dryRun: false)",
        },
        {
            "rule": "!has(self.metricsTokenKey) || has(self.envFromSecret)",
            "message": "metricsTokenKey needs envFromSecret: the token is read from that Secret",
        },
        {
            "rule": "!has(self.limits.maxPods) || self.limits.maxPods >= self.replicas.min",
            "message": "limits.maxPods must not be below replicas.min",
        },
    ],
}


def _describe(f: dataclasses.Field[Any]) -> str:
    doc: str = f.metadata["doc"]
    derived = f.metadata.get("derived")
    return f"{doc} Default: {derived}." if derived else doc


def _field_schema(hint: Any, f: dataclasses.Field[Any], rel: str) -> dict[str, Any]:
    meta = f.metadata
    nullable = isinstance(hint, UnionType) and NoneType in typing.get_args(hint)
    if nullable:
        hint = next(a for a in typing.get_args(hint) if a is not NoneType)
    if dataclasses.is_dataclass(hint):
        schema = _object_schema(hint, rel)  # type: ignore[arg-type]
        schema["default"] = {}
    elif typing.get_origin(hint) is tuple:
        items: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": _MAX_ITEM_LENGTH}
        if meta.get("item_pattern"):
            items["pattern"] = meta["item_pattern"]
        schema = {"type": "array", "items": items, "maxItems": _MAX_ITEMS[model.json_name(f)]}
        if meta.get("min_items"):
            schema["minItems"] = meta["min_items"]
    elif meta.get("duration"):
        schema = {"type": "string", "pattern": DURATION_PATTERN}
    else:
        schema = {"type": {bool: "boolean", int: "integer", float: "number", str: "string"}[hint]}
    for key, name in (("minimum", "minimum"), ("maximum", "maximum"), ("pattern", "pattern")):
        if meta.get(key) is not None:
            schema[name] = meta[key]
    if meta.get("exclusive_minimum") is not None:
        schema["minimum"] = meta["exclusive_minimum"]
        schema["exclusiveMinimum"] = True
    if meta.get("enum"):
        schema["enum"] = list(meta["enum"])
    if "default" not in schema and not meta.get("derived"):
        default = _default(f)
        if default is not None:
            schema["default"] = format_duration(default) if meta.get("duration") else default
    if nullable:
        schema["nullable"] = True
    schema["description"] = _describe(f)
    return schema


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        return list(value) if isinstance(value, tuple) else None
    return None if f.default is dataclasses.MISSING else f.default


def _object_schema(cls: type, rel: str) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    properties = {
        model.json_name(f): _field_schema(
            hints[f.name], f, f"{rel}.{model.json_name(f)}" if rel else model.json_name(f)
        )
        for f in dataclasses.fields(cls)
    }
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if rel in _CEL_RULES:
        schema["x-kubernetes-validations"] = _CEL_RULES[rel]
    return schema


def spec_schema() -> dict[str, Any]:
    """The openAPIV3Schema of `.spec`."""
    schema = _object_schema(model.RunPodPoolSpec, "")
    schema["description"] = "The desired pool: see examples/pool.yaml for every field."
    return schema


def _status_schema() -> dict[str, Any]:
    number = {"type": "number"}
    return {
        "type": "object",
        "description": "Written by the controller only: members, conditions, plan, history.",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "mode": {"type": "string", "enum": [m.value for m in model.Mode]},
            "observedGeneration": {"type": "integer"},
            "ready": {"type": "integer"},
            "desired": {"type": "integer"},
            "costPerHour": number,
            "planned": {"type": "integer"},
        },
    }


def build_crd(group: str = model.API_GROUP) -> dict[str, Any]:
    """The whole CustomResourceDefinition object."""
    columns = [
        ("Mode", "string", ".status.mode", "Observe, DryRun or Manage"),
        ("Ready", "integer", ".status.ready", "Pods wired into nginx and passing probes"),
        ("Desired", "integer", ".status.desired", "Pods the pool wants now"),
        ("Cost/h", "number", ".status.costPerHour", "USD per hour of the pool's pods"),
        ("Planned", "integer", ".status.planned", "Actions planned this loop"),
    ]
    printer = [{"name": n, "type": t, "jsonPath": p, "description": d} for n, t, p, d in columns]
    printer.append({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{model.PLURAL}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "kind": model.KIND,
                "listKind": f"{model.KIND}List",
                "plural": model.PLURAL,
                "singular": model.KIND.lower(),
                "shortNames": [model.SHORT_NAME],
            },
            "versions": [
                {
                    "name": model.API_VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": printer,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "A pool of RunPod GPU pods behind an nginx.",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": {**spec_schema(), "default": {}},
                                "status": _status_schema(),
                            },
                        }
                    },
                }
            ],
        },
    }


def render_crd(group: str = model.API_GROUP) -> str:
    header = (
        "# Generated by `rpp crd` from rpp/model/spec.py. "
        "Do not edit: run `rpp crd > deploy/crd.yaml`.\n"
    )
    return header + yaml.safe_dump(build_crd(group), sort_keys=False, width=100)
