"""Validate a RunPodPool as a user wrote it, reporting every problem at once.

Where it sits: the first thing observe does with a pool object (and all `rpp validate`
does). pydantic validates the spec against `rpp.model.spec`, the model the CRD is
generated from; this module turns each of pydantic's errors into one sentence a person
can act on, at the field's path as the user wrote it (`spec.limits.maxPods`), with a
"did you mean" for a misspelt key.

A rule between fields runs only once every field is valid, so when some are not, they
are set aside (their defaults take their place) and the spec is validated again: the
cross-field problems that do not repeat an already reported path are added, and the
user sees everything at once, as the API server would report it.

Nothing here raises on bad input: the result is a resolved `RunPodPoolSpec` or `None`,
plus the full list of `Problem`s, each with its field path and a sentence to act on.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from rpp.model import spec as model
from rpp.model.object_fields import metadata_problems, status_problems, unknown_field
from rpp.model.spec_fields import SPEC_PROBLEMS


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


_WANTED = {
    "int_type": "a whole number",
    "float_type": "a number",
    "bool_type": "true or false",
    "string_type": "a string",
}
_NOT_A_MAPPING = ("model_type", "model_attributes_type", "dict_type")


def _walk(loc: tuple[str | int, ...]) -> Iterator[tuple[int, list[str], FieldInfo | None]]:
    """Along an error's location: each step's position among its section's keys (-1 for
    an unknown key, so those sort first, as they were reported before), the section's
    keys, and the field reached."""
    section: type[BaseModel] | None = model.RunPodPoolSpec
    for part in loc:
        if isinstance(part, int) or section is None:
            yield (part if isinstance(part, int) else -1), [], None
            section = None
            continue
        fields = {f.alias or name: f for name, f in section.model_fields.items()}
        known = list(fields)
        field = fields.get(part)
        yield (known.index(part) if field else -1), known, field
        hint = field.annotation if field else None
        section = hint if isinstance(hint, type) and issubclass(hint, BaseModel) else None


def _bound(value: float) -> float:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _sentences(error: ErrorDetails) -> list[tuple[str, str]]:
    """One pydantic error as (sub-path, sentence) pairs."""
    kind, raw, ctx = error["type"], error["input"], error.get("ctx", {})
    steps = list(_walk(error["loc"]))
    if kind == SPEC_PROBLEMS:
        return list(ctx["problems"])
    if kind == "extra_forbidden":
        return [("", unknown_field(str(error["loc"][-1]), steps[-1][1]))]
    if kind in _NOT_A_MAPPING:
        return [("", f"expected a mapping of fields, got {_shown(raw)}")]
    if kind in _WANTED or (kind == "literal_error" and not isinstance(raw, str)):
        return [("", f"expected {_WANTED.get(kind, 'a string')}, got {_shown(raw)}")]
    if kind == "literal_error":
        choices = ctx["expected"].replace("'", "")  # "'SECURE' or 'COMMUNITY'"
        return [("", f"{raw!r} is not valid; use {choices}")]
    field = steps[-1][2] if steps else None
    shown = float(raw) if field is not None and field.annotation is float else raw
    if kind == "finite_number":
        return [("", f"{raw} is not a finite number (JSON cannot carry it); use a number")]
    if kind == "greater_than_equal":
        least = _bound(ctx["ge"])
        word = "negative" if least == 0 else f"below {least}"
        return [("", f"{shown} is {word}; use {least} or more")]
    if kind == "greater_than":
        return [("", f"{shown} must be greater than {_bound(ctx['gt'])}")]
    if kind == "less_than_equal":
        return [("", f"{shown} is above the maximum {_bound(ctx['le'])}")]
    if kind == "string_pattern_mismatch":
        return [("", f"{raw!r} does not match the pattern {ctx['pattern']}")]
    if kind == "too_long":
        return [("", f"lists {ctx['actual_length']} entries; keep it to {ctx['max_length']}")]
    if kind == "string_too_short":
        return [("", f"{raw!r} is empty; give a value or leave the field out")]
    if kind == "string_too_long":
        return [("", f"{raw!r} is longer than {ctx['max_length']} characters")]
    return [("", str(error["msg"]))]


def _path(root: str, loc: tuple[str | int, ...]) -> str:
    return root + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


def _set_aside(raw: Any, errors: list[ErrorDetails]) -> Any:
    """A copy of `raw` without the values pydantic refused (a list goes as a whole)."""
    if not isinstance(raw, Mapping):
        return {}
    out = copy.deepcopy(dict(raw))
    for error in errors:
        loc = list(error["loc"])
        while loc and isinstance(loc[-1], int):
            loc.pop()
        if not loc:
            return {}
        parent: Any = out
        for key in loc[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict):
            parent.pop(loc[-1], None)
    return out


def _validate(pool: str, raw: Any) -> tuple[model.RunPodPoolSpec | None, list[ErrorDetails]]:
    try:
        spec = model.RunPodPoolSpec.model_validate(raw, context={"pool": pool}, by_name=False)
    except ValidationError as err:
        return None, err.errors()
    return spec, []


def without_nulls(raw: Any) -> Any:
    """`raw` with every field whose value is null left out, at any depth (list items kept).

    The API server prunes a null field before defaulting (no field of the CRD is
    nullable), so `templateId: null` means what leaving it out means, here too.
    """
    if isinstance(raw, Mapping):
        return {k: without_nulls(v) for k, v in raw.items() if v is not None}
    if isinstance(raw, list):
        return [without_nulls(v) for v in raw]
    return raw


def load_spec(
    pool: str, raw: Any, *, path: str = "spec"
) -> tuple[model.RunPodPoolSpec | None, list[Problem]]:
    """The resolved spec of pool `pool`, or None, and every problem found."""
    raw = without_nulls(raw)
    spec, errors = _validate(pool, raw)
    if spec is not None:
        return spec, []
    fields = [e for e in errors if e["loc"] or e["type"] != SPEC_PROBLEMS]
    fields.sort(key=lambda e: [rank for rank, _, _ in _walk(e["loc"])])
    problems = [
        Problem(_path(path, e["loc"]) + sub, message)
        for e in fields
        for sub, message in _sentences(e)
    ]
    if fields:
        # The rules between fields, over the defaults of the fields refused above.
        errors = _validate(pool, _set_aside(raw, fields))[1]
    reported = {p.path for p in problems}
    for error in errors:
        if not error["loc"] and error["type"] == SPEC_PROBLEMS:
            found = [Problem(path + sub, message) for sub, message in _sentences(error)]
            problems += [p for p in found if p.path not in reported]
    return None, problems


def _name_problem(meta: Mapping[Any, Any]) -> Problem | None:
    """What is wrong with `metadata.name`, if anything."""
    name = meta.get("name")
    if name is None or name == "":
        if meta.get("generateName") is not None:
            return Problem(
                "metadata.name",
                'required; kubectl apply refuses metadata.generateName ("cannot use generate '
                'name with apply"): give the pool its name in metadata.name',
            )
        return Problem(
            "metadata.name",
            "required; name the pool with lowercase letters, digits and '-' "
            f"(at most {model.POOL_NAME_MAX} characters)",
        )
    if not isinstance(name, str) or not re.fullmatch(model.POOL_NAME_PATTERN, name):
        return Problem(
            "metadata.name",
            f"{name!r} is not a valid pool name; use lowercase letters, digits and '-'",
        )
    if len(name) > model.POOL_NAME_MAX:
        return Problem(
            "metadata.name", f"is {len(name)} characters; keep it to {model.POOL_NAME_MAX}"
        )
    return None


def load_pool(
    obj: Any, *, group: str = model.API_GROUP, from_file: bool = False
) -> tuple[Pool | None, list[Problem]]:
    """Validate a whole RunPodPool object (apiVersion, kind, metadata, spec). `from_file`:
    a file to be created or applied, whose metadata and status the API server decodes
    strictly (rpp/model/object_fields.py); never for an object read from the API server."""
    if not isinstance(obj, Mapping):
        return None, [Problem("(document)", f"expected a RunPodPool object, got {_shown(obj)}")]
    problems: list[Problem] = []
    for key in obj:
        if key not in ("apiVersion", "kind", "metadata", "spec", "status"):
            known = ["apiVersion", "kind", "metadata", "spec"]
            problems.append(Problem(str(key), unknown_field(str(key), known)))
    want_api = f"{group}/{model.API_VERSION}"
    if obj.get("apiVersion") != want_api:
        problems.append(
            Problem("apiVersion", f"expected {want_api}, got {_shown(obj.get('apiVersion'))}")
        )
    if obj.get("kind") != model.KIND:
        problems.append(Problem("kind", f"expected {model.KIND}, got {_shown(obj.get('kind'))}"))
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name_problem = _name_problem(meta)
    name = "pool" if name_problem is not None else meta["name"]
    problems += [name_problem] if name_problem is not None else []
    if from_file:
        problems += [Problem(path, message) for path, message in metadata_problems(meta)]
    generation = meta.get("generation")
    generation = generation if isinstance(generation, int) else 0  # the server's is one
    spec, spec_problems = load_spec(name, obj.get("spec"))
    problems += spec_problems
    if from_file:
        problems += [Problem(p, message) for p, message in status_problems(obj.get("status"))]
    if problems or spec is None:
        return None, problems
    namespace = meta.get("namespace")
    return Pool(name, namespace if isinstance(namespace, str) else None, int(generation), spec), []


def _shown(value: Any) -> str:
    """A value as the problem line shows it: absent or null is "nothing", never Python's
    None; anything else as written, quoted when it is text."""
    return "nothing" if value is None else repr(value)
