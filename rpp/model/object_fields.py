"""What the API server refuses of a RunPodPool file outside its spec, when it is created.

Where it sits: beside rpp/model/spec_load.py, which calls it for a file (`load_pool(...,
from_file=True)`, all `rpp validate` does). kubectl sends a file for strict decoding, so
an unknown field under `metadata` or `status` refuses the whole object: `strict decoding
error: unknown field "metadata.foo"` (measured on kube-apiserver 1.36.2), and so does a
metadata field ObjectMeta cannot hold (`generation: abc`, a label that is not text:
customresource_handler.go drops malformed metadata only of stored objects). Status in a
file is otherwise dropped on create, as only the controller writes it (the status
subresource): a wrong type there is not refused, so it is not checked here.

The controller never runs these checks on the objects it reads: they come from the API
server, and a newer Kubernetes may add a field to ObjectMeta, or a newer CRD one to the
status, that this release does not know.

Unknown status fields are found as the API server's pruning finds them
(apiextensions-apiserver pkg/apiserver/schema/pruning/algorithm.go) over the CRD's status
schema (rpp/model/crd.py): a key is known where its node lists it or takes any key, and a
value of the wrong type is walked all the same (the keys of a mapping where a number
belongs are all unknown).
"""

from __future__ import annotations

import difflib
import functools
import math
from collections.abc import Iterator, Mapping
from typing import Any

# The JSON names of ObjectMeta's fields (k8s.io/apimachinery meta/v1 types.go, 1.36;
# clusterName is gone since 1.25), as the kubernetes client's V1ObjectMeta.attribute_map.
OBJECT_META_FIELDS = (
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields",
)  # fmt: skip
# What JSON each of them takes (null is taken by all: Go leaves the zero value); the rest
# (name, ownerReferences, managedFields) are checked elsewhere or only for being a list.
_TEXT = (
    "generateName", "namespace", "selfLink", "uid", "resourceVersion", "creationTimestamp",
    "deletionTimestamp",
)  # fmt: skip
_WHOLE = ("generation", "deletionGracePeriodSeconds")
STATUS_IN_A_FILE = "the controller writes status: leave it out of the file"


def unknown_field(key: str, known: list[str]) -> str:
    """The sentence for an unknown key: the known one it is closest to, or all of them."""
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f'did you mean "{close[0]}"?' if close else f"known fields: {', '.join(known)}"
    return f"unknown field; {hint}"


@functools.cache
def _status_schema() -> dict[str, Any]:
    from rpp.model.crd import status_schema  # builds pydantic's schema: only when needed

    return status_schema()


def pruned(
    node: Mapping[str, Any] | None, value: Any, path: str, *, keep: bool = False
) -> Iterator[str]:
    """The path of each field the API server's pruning drops from `value` under the
    schema `node` (None: no schema, so every key is unknown). `keep` is skipPrune, below
    `x-kubernetes-preserve-unknown-fields`: unknown keys stay, known ones are pruned."""
    if node is not None and node.get("x-kubernetes-preserve-unknown-fields"):
        keep = True
    if keep and node is None:
        return
    if isinstance(value, Mapping):
        properties = node.get("properties", {}) if node is not None else {}
        extra = node.get("additionalProperties") if node is not None else None
        for key, item in value.items():
            if key in properties:
                yield from pruned(properties[key], item, f"{path}.{key}")
            elif isinstance(extra, Mapping):
                yield from pruned(extra, item, f"{path}.{key}")
            elif not keep:
                yield f"{path}.{key}"
    elif isinstance(value, list):
        items = node.get("items") if node is not None else None
        for index, item in enumerate(value):
            yield from pruned(items, item, f"{path}[{index}]", keep=keep)


def _not_finite(value: Any, path: str) -> Iterator[tuple[str, float]]:
    """Each NaN or infinity in `value`: kubectl cannot write it as JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _not_finite(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _not_finite(item, f"{path}[{index}]")


def _finite(value: Any, path: str, *, advice: str) -> list[tuple[str, str]]:
    return [
        (where, f"{number} is not a finite number (JSON cannot carry it); {advice}")
        for where, number in _not_finite(value, path)
    ]


def _wrong_type(key: str, value: Any) -> list[tuple[str, str]]:
    """What ObjectMeta's JSON decoding refuses in field `key` (a string where a number
    belongs, a label that is not text)."""
    path = f"metadata.{key}"
    if value is None:
        return []
    if key in _TEXT and not isinstance(value, str):
        return [(path, f"expected a string, got {value!r}")]
    if key in _WHOLE and (isinstance(value, bool) or not isinstance(value, int)):
        return [(path, f"expected a whole number, got {value!r}")]
    if key in ("labels", "annotations"):
        if not isinstance(value, Mapping):
            return [(path, f"expected a mapping of names to strings, got {value!r}")]
        return [
            (f"{path}.{name}", f"expected a string, got {item!r}")
            for name, item in value.items()
            if item is not None and not isinstance(item, str)
        ]
    if key in ("finalizers", "ownerReferences", "managedFields") and not isinstance(value, list):
        return [(path, f"expected a list, got {value!r}")]
    if key == "finalizers":
        return [
            (f"{path}[{index}]", f"expected a string, got {item!r}")
            for index, item in enumerate(value)
            if not isinstance(item, str)
        ]
    return []


def metadata_problems(meta: Mapping[Any, Any]) -> list[tuple[str, str]]:
    """(path, sentence) for each field of `metadata` the API server refuses on create."""
    known = list(OBJECT_META_FIELDS)
    problems = [
        (f"metadata.{key}", unknown_field(str(key), known)) for key in meta if key not in known
    ]
    for key, value in meta.items():
        if key in known:
            problems += _wrong_type(key, value)
    reported = {path for path, _ in problems}
    finite = _finite(meta, "metadata", advice="use a number")
    return problems + [(path, sentence) for path, sentence in finite if path not in reported]


def status_problems(status: Any) -> list[tuple[str, str]]:
    """(path, sentence) for each unknown field or NaN in a file's `status`; nothing else
    of it matters, as the API server drops it."""
    if not status:
        return []
    unknown = [
        (path, f"unknown field; {STATUS_IN_A_FILE}")
        for path in pruned(_status_schema(), status, "status")
    ]
    return unknown + _finite(status, "status", advice=STATUS_IN_A_FILE)
