"""The building blocks of the spec model: its field types and the base of every section.

Where it sits: the model layer, under `rpp.model.spec`, which composes these into the
RunPodPool spec. Each type carries its whole contract in one place: how a document spells
it (and the sentence `rpp validate` prints when it does not), how Python holds it, and
the JSON schema the CRD is generated from. A duration is "150s" in YAML and in the CRD
and a float of seconds in Python; a list of names is a YAML list and a tuple.

A validator here raises `problems(...)`: a pydantic error whose context carries finished
sentences, each at a sub-path of the field (an item of a list, a field of a section),
which `rpp.model.spec_load` reports as they are.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    PlainSerializer,
    StringConstraints,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from rpp.model.durations import (
    DURATION_MAX_LENGTH,
    DURATION_PATTERN,
    MAX_DURATION,
    MIN_DURATION,
    DurationError,
    format_duration,
    parse_duration,
)

# RunPod pod ids are lowercase alphanumerics (14 today); a little slack for the future.
POD_ID_PATTERN = r"^[a-z0-9]{8,32}$"
# The pydantic error type whose context carries sentences `rpp validate` prints as they
# are: ("[2]", "'a' is listed twice") is a problem at the erroring field's path + "[2]".
SPEC_PROBLEMS = "rpp_spec_problems"
# "Not blank", spelled the same for Python, the API server's Go and pydantic's Rust: a
# character that is not ASCII white space (their `\s` and `strip()` disagree on others).
NOT_BLANK = r"[^ \t\n\r\f\v]"


def problems(*found: tuple[str, str]) -> PydanticCustomError:
    """A validation error made of (sub-path, sentence) pairs, reported as written."""
    text = "; ".join(message for _, message in found)
    return PydanticCustomError(SPEC_PROBLEMS, "{text}", {"text": text, "problems": found})


def _seconds(raw: Any, info: ValidationInfo) -> Any:
    # Python code (tests, defaults) builds specs in seconds; a document (validated with
    # the pool name as context) must spell a duration out, as the CRD's pattern demands.
    if info.context is None and isinstance(raw, int | float) and not isinstance(raw, bool):
        return float(raw)
    if not isinstance(raw, str):
        raise problems(("", f'expected a duration such as "150s" or "2m", got {raw!r}'))
    try:
        seconds = parse_duration(raw)
    except DurationError as err:
        raise problems(("", str(err))) from None
    if seconds <= 0:
        raise problems(("", f"{raw!r} must be longer than zero ({MIN_DURATION} or more)"))
    if seconds < _LEAST:
        raise problems(("", f"{raw!r} is shorter than {MIN_DURATION}; use {MIN_DURATION} or more"))
    if seconds > _MOST:
        raise problems(("", f"{raw!r} is longer than {MAX_DURATION}; use {MAX_DURATION} or less"))
    return seconds


_LEAST, _MOST = parse_duration(MIN_DURATION), parse_duration(MAX_DURATION)

# Seconds in Python, "150s" in YAML, in `--show-defaults` and in the CRD, where the same
# bounds are CEL rules (the API server parses durations as Go does; a value past Go's
# range fails the rule's evaluation, so it is refused too).
Duration = Annotated[
    float,
    BeforeValidator(_seconds),
    PlainSerializer(format_duration, when_used="json"),
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": DURATION_MAX_LENGTH,
            "pattern": DURATION_PATTERN,
            "x-kubernetes-validations": [
                {
                    "rule": f"duration(self) >= duration('{MIN_DURATION}')",
                    "message": f"must be {MIN_DURATION} or more",
                },
                {
                    "rule": f"duration(self) <= duration('{MAX_DURATION}')",
                    "message": f"must be {MAX_DURATION} or less",
                },
            ],
        }
    ),
]


def _string_list(raw: Any, *, check: Callable[[str], str | None] | None = None) -> Any:
    """A YAML list of non-blank strings, each listed once, as a tuple; every bad item is
    reported, each at its index."""
    if not isinstance(raw, list):
        raise problems(("", f"expected a list of strings, got {raw!r}"))
    found: list[tuple[str, str]] = []
    for i, item in enumerate(raw):
        if not isinstance(item, str) or not re.search(NOT_BLANK, item):
            found.append((f"[{i}]", f"expected a non-empty string, got {item!r}"))
        elif check is not None and (why := check(item)) is not None:
            found.append((f"[{i}]", why))
        elif item in raw[:i]:
            found.append((f"[{i}]", f"{item!r} is listed twice"))
    if found:
        raise problems(*found)
    return tuple(raw)


def _not_a_pod_id(item: str) -> str | None:
    if re.fullmatch(POD_ID_PATTERN, item):
        return None
    return (
        f"{item!r} is not a RunPod pod id (lowercase letters and digits, "
        "like 5pd0l3pw8xqhzt); copy the id from the RunPod console"
    )


# The length bounds let the API server estimate the cost of CEL rules over these lists.
# Every list is a set in the CRD (`x-kubernetes-list-type: set`, rpp/model/crd.py): the
# API server refuses an entry listed twice, as `_string_list` does.
_Name = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=NOT_BLANK)]
_PodId = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=POD_ID_PATTERN)]
Names = Annotated[tuple[_Name, ...], BeforeValidator(_string_list)]
PodIds = Annotated[
    tuple[_PodId, ...],
    BeforeValidator(partial(_string_list, check=_not_a_pod_id)),
]
# An optional text that means something only when given: "" is refused (the CRD's rules
# test `has(...)`, for which "" is given), as is text past `max_length`.
Text = Annotated[str, StringConstraints(min_length=1, max_length=253)]
# A PromQL query: CEL tests it for blanks, so it is bounded for the rule's cost.
Query = Annotated[str, StringConstraints(min_length=1, max_length=4096)]


class Section(BaseModel):
    """A part of the spec: frozen, camelCase keys, exact types (a quoted "2" is not a
    number, 150 is not a duration), finite numbers, unknown keys refused."""

    model_config = ConfigDict(
        frozen=True,
        strict=True,
        extra="forbid",
        alias_generator=to_camel,
        # Python code may build a section by attribute name (dry_run=...); a document
        # is validated by its camelCase keys only (the loader passes by_name=False).
        validate_by_alias=True,
        validate_by_name=True,
        use_attribute_docstrings=True,
        # NaN and Infinity cannot travel in JSON: the API server never sees them.
        allow_inf_nan=False,
    )

    @model_validator(mode="before")
    @classmethod
    def _empty_means_defaults(cls, raw: Any) -> Any:
        # `health:` with nothing under it is YAML null: the user asks for every default.
        return {} if raw is None else raw


def cel_text(text: str) -> str:
    """`text` as a CEL string literal (single-quoted, backslashes and quotes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def cel(*rules: tuple[str, str]) -> ConfigDict:
    """Rules the API server checks on write; defaults are applied first, so defaulted
    fields can be read directly."""
    return ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]
        }
    )
