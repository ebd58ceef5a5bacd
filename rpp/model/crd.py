"""Generate the RunPodPool CustomResourceDefinition from the spec model.

Where it sits: outside the reconcile loop. `rpp crd` prints what this module builds,
deploy/crd.yaml and the Helm charts' copies are its output, and a test fails when they
drift. pydantic writes the JSON schema of `rpp.model.spec`, CEL rules included, and a
small pass makes it the structural schema the API server demands (references inlined,
a type on every node, OpenAPI 3.0's boolean `exclusiveMinimum`), so a field added to the
model appears in the API server's schema with the same type, default, bounds and
documentation.

The pass also makes the API server judge as `rpp validate` does (tests/model/test_spec_agreement.py
checks a corpus through both): no field is `nullable`, so the API server prunes a null
like an absent field (rpp.model.spec_load does the same); every list of strings is a set
(`x-kubernetes-list-type: set`: an entry listed twice is refused); and `metadata.name`
carries the pool-name rules (a DNS label of at most 50 characters).

Creating the CRD, the API server checks each `default` as written against the rules of its
node and of the nodes below it; rpp/model/crd_guards.py guards the rules that read a field
such a default leaves out (tests/install/test_crd_install.py checks the CRD as the API server
does).

The status gets the same pass over `rpp.model.status.PoolStatus`, minus what only an input
needs: no defaults (the API server would fill them into what it stores, and the controller
reads back exactly what it wrote), but one: `status` itself defaults to
`{observedGeneration: 0}`, so a pool the controller has not written yet reads as
generation 1 observed 0, which kstatus (Flux's `wait`, cli-utils) counts as InProgress
rather than Current; and no sets (a status list may repeat a value, such as two
replacements in one second). So `kubectl explain rpp.status` documents every field, and
tools see a real schema instead of `x-kubernetes-preserve-unknown-fields`. The conditions
are a list keyed by `type` (`x-kubernetes-list-type: map`), as Kubernetes' own are: one
condition of each type, which server-side apply and kstatus expect.
"""

from __future__ import annotations

from typing import Any

import yaml

from rpp.model import spec as model
from rpp.model.crd_guards import guard_rules
from rpp.model.status import PoolStatus

# The key order of a schema node in the CRD (pydantic sorts keys alphabetically); an
# exclusive minimum becomes OpenAPI 3.0's `minimum` plus `exclusiveMinimum: true` there.
_ORDER = (
    "type", "required", "properties", "items", "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys", "maxItems", "minItems",
    "minLength", "maxLength",
    "minimum", "maximum", "pattern", "format", "exclusiveMinimum", "enum",
    "additionalProperties", "x-kubernetes-validations", "default", "nullable", "description",
)  # fmt: skip
# JSON-schema keywords a structural schema has no place for: properties are never
# required (the controller fills derived defaults; the keys of a map list are the one
# exception, see `_MAP_LISTS`), unknown fields are pruned by the API server rather than
# refused, and titles only repeat the field names. (A map's `additionalProperties` schema
# stays; `additionalProperties: false` goes.)
_DROPPED = {"title", "required", "$defs"}
# Status lists keyed by a field of their items. The API server demands that a key be
# required (or defaulted) on the item, and refuses two items with one key.
_MAP_LISTS = {"conditions": ("type",)}


def _structural(
    node: dict[str, Any], defs: dict[str, Any], *, root: bool, status: bool = False
) -> dict[str, Any]:
    """One node of pydantic's JSON schema as a Kubernetes structural schema: references
    inlined, Optional as the plain type (a null is pruned, as an absent field), lists of
    strings as sets, every object under the root defaulting to {} (so the API server
    fills in its fields' defaults), keys in the usual order. For the `status`, neither
    defaults nor sets (see the module docstring)."""
    ref = node.get("$ref")
    node = {**defs[ref.rsplit("/", 1)[-1]], **node} if ref else dict(node)
    node.pop("$ref", None)
    options = node.pop("anyOf", None)
    if options is not None:
        (kept,) = [o for o in options if o != {"type": "null"}]
        node = {**_structural(kept, defs, root=False, status=status), **node}
    if node.get("default", {}) is None or status:
        node.pop("default", None)  # null is what an absent optional field means anyway
    if node.get("type") == "object" and not root and not status:
        node["default"] = {}
    items = node.get("items")
    strings = isinstance(items, dict) and items.get("type") == "string"
    if node.get("type") == "array" and strings and not status:
        node["x-kubernetes-list-type"] = "set"
    if not isinstance(node.get("additionalProperties", {}), dict):
        del node["additionalProperties"]
    unknown = set(node) - set(_ORDER) - _DROPPED
    if unknown or "type" not in node:
        raise ValueError(f"no structural schema for {node!r} (unknown keys {sorted(unknown)})")
    out: dict[str, Any] = {}
    for key in (k for k in _ORDER if k in node and k not in _DROPPED):
        if key == "properties":
            out[key] = {
                k: _structural(v, defs, root=False, status=status) for k, v in node[key].items()
            }
        elif key in ("items", "additionalProperties"):
            out[key] = _structural(node[key], defs, root=False, status=status)
        elif key == "exclusiveMinimum":
            out["minimum"], out[key] = node[key], True
        elif key == "x-kubernetes-validations":  # pydantic sorted them: message, rule
            out[key] = [{"rule": r["rule"], "message": r["message"]} for r in node[key]]
        elif key == "description":
            out[key] = " ".join(node[key].split())  # docstrings wrap; descriptions do not
        else:
            out[key] = node[key]
    return out


def spec_schema() -> dict[str, Any]:
    """The openAPIV3Schema of `.spec`, from the model's JSON schema (serialization mode,
    so durations and their defaults read "150s" as users write them), its rules guarded
    for the API server's check of the raw defaults."""
    schema = model.RunPodPoolSpec.model_json_schema(by_alias=True, mode="serialization")
    out = _structural(schema, schema.get("$defs", {}), root=True)
    out["description"] = "The desired pool: see examples/pool.yaml for every field."
    out["default"] = {}  # a pool without a spec gets every default
    return guard_rules(out)


def _keyed(node: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """A list schema as a map list keyed by `keys`, each required on its items."""
    items = {**node["items"], "required": list(keys)}
    keyed = {
        **node,
        "items": {k: items[k] for k in _ORDER if k in items},
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": list(keys),
    }
    return {k: keyed[k] for k in _ORDER if k in keyed}


def status_schema() -> dict[str, Any]:
    """The openAPIV3Schema of `.status`, from the status models (see the module docstring)."""
    schema = PoolStatus.model_json_schema(by_alias=True, mode="serialization")
    out = _structural(schema, schema.get("$defs", {}), root=True, status=True)
    for name, keys in _MAP_LISTS.items():
        out["properties"][name] = _keyed(out["properties"][name], keys)
    out["default"] = {"observedGeneration": 0}  # see the module docstring
    out["description"] = (
        "Written by the controller only: members, conditions (Ready among them), plan, "
        "history, and the memory of its time-based rules."
    )
    return out


def build_crd(group: str = model.API_GROUP) -> dict[str, Any]:
    """The whole CustomResourceDefinition object."""
    # Ready first, read from the condition as cert-manager and Karpenter print theirs; its
    # reason only in `-o wide` (priority 1), where the line may be long.
    ready = '.status.conditions[?(@.type=="Ready")]'
    columns = [
        ("Ready", "string", f"{ready}.status", "The Ready condition: True, False or Unknown", 0),
        ("Reason", "string", f"{ready}.reason", "Why the pool is or is not Ready", 1),
        ("Mode", "string", ".status.mode", "Observe, DryRun or Manage", 0),
        ("Serving", "integer", ".status.ready", "Pods wired into nginx and passing probes", 0),
        ("Desired", "integer", ".status.desired", "Pods the pool wants now", 0),
        ("Cost/h", "number", ".status.costPerHour", "USD per hour of the pool's pods", 0),
        ("Planned", "integer", ".status.planned", "Actions planned this loop", 0),
        (
            "Rollout",
            "string",
            ".status.rollout.phase",
            "Where the release of spec.image is: Canary, Baking, Rolling, RolledBack or Done",
            0,
        ),
    ]
    printer: list[dict[str, Any]] = [
        {"name": n, "type": t, "jsonPath": p, "description": d, **({"priority": w} if w else {})}
        for n, t, p, d, w in columns
    ]
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
                # `kubectl get runpod` lists every pool; not in "all", which is for
                # workloads a namespace runs.
                "categories": list(model.CATEGORIES),
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
                                "metadata": {
                                    "type": "object",
                                    "properties": {
                                        "name": {
                                            "type": "string",
                                            "maxLength": model.POOL_NAME_MAX,
                                            "pattern": model.POOL_NAME_PATTERN,
                                        }
                                    },
                                },
                                "spec": spec_schema(),
                                "status": status_schema(),
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
