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
    DURATION_FITS_PATTERN,
    DURATION_MAX_LENGTH,
    DURATION_PATTERN,
    MAX_DURATION,
    MIN_DURATION,
    NOT_A_DURATION,
    TOO_LONG,
    TOO_SHORT,
    DurationError,
    format_duration,
    read_duration,
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


def cel_text(text: str) -> str:
    """`text` as a CEL string literal (single-quoted, backslashes and quotes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _seconds(raw: Any, info: ValidationInfo) -> Any:
    # Python code (tests, defaults) builds specs in seconds; a document (validated with
    # the pool name as context) must spell a duration out, as the CRD's rules demand.
    if info.context is None and isinstance(raw, int | float) and not isinstance(raw, bool):
        return float(raw)
    if not isinstance(raw, str):
        raise problems(("", f'expected a duration such as "150s" or "2m", got {raw!r}'))
    try:
        seconds = read_duration(raw)
    except DurationError as err:
        raise problems(("", str(err))) from None
    if seconds < _LEAST:
        raise problems(("", f"{raw!r} is {TOO_SHORT}"))
    if seconds > _MOST:
        raise problems(("", f"{raw!r} is {TOO_LONG}"))
    return seconds


_LEAST, _MOST = read_duration(MIN_DURATION), read_duration(MAX_DURATION)


def cel_converts(duration: str) -> str:
    """A CEL test that `duration()` surely converts the text `duration` (a CEL
    expression); a rule guards each `duration()` it calls with it (see `_duration_rules`)."""
    return f"{duration}.matches({cel_text(DURATION_FITS_PATTERN)})"


def _duration_rules() -> list[dict[str, str]]:
    """The CRD's rules for a duration, each bad value refused by exactly one of them, with
    the sentence `_seconds` prints after the value. The grammar comes first; the bounds
    call `duration()` only on text that Go surely converts (DURATION_FITS_PATTERN): a
    failed conversion would refuse with a type conversion error instead of a sentence.
    Text the grammar allows beyond that pattern is longer than MAX_DURATION."""
    grammar = f"self.matches({cel_text(DURATION_PATTERN)})"
    fits = cel_converts("self")
    return [
        {"rule": grammar, "message": NOT_A_DURATION},
        {
            "rule": f"!{fits} || duration(self) >= duration('{MIN_DURATION}')",
            "message": TOO_SHORT,
        },
        {
            "rule": f"!{grammar} || ({fits} && duration(self) <= duration('{MAX_DURATION}'))",
            "message": TOO_LONG,
        },
    ]


# Seconds in Python, "150s" in YAML, in `--show-defaults` and in the CRD, where the
# grammar and the bounds are CEL rules (not a `pattern`: the API server would print the
# regular expression, and then run the rules anyway, a pattern being no blocking error).
Duration = Annotated[
    float,
    BeforeValidator(_seconds),
    PlainSerializer(format_duration, when_used="json"),
    WithJsonSchema(
        {
            "type": "string",
            "maxLength": DURATION_MAX_LENGTH,
            "x-kubernetes-validations": _duration_rules(),
        }
    ),
]


# kube-openapi takes a JSON float for an integer up to 2^53 (Go's swag
# IsFloat64AJSONInteger); past that a float no longer holds every integer.
_JSON_INTEGERS = 2**53 - 1


def integral(raw: Any) -> Any:
    """An integral float as the integer it is (2.0 -> 2), anything else as it is.

    YAML's `2.0` reaches the API server as the integer 2 (kubectl writes the float as
    JSON `2`; a JSON `2.0` passes its integer check too) and is stored as 2: read it so.
    """
    if isinstance(raw, float) and raw.is_integer() and abs(raw) <= _JSON_INTEGERS:
        return int(raw)
    return raw


# A whole number; 2.0 is 2 (see `integral`), 2.5 and "2" are refused.
Integer = Annotated[int, BeforeValidator(integral)]


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


def cel(*rules: tuple[str, str]) -> ConfigDict:
    """Rules the API server checks on write; defaults are applied first, so defaulted
    fields can be read directly (rpp/model/crd_guards.py guards them for the check of
    the CRD's own defaults, which are not filled in). A field without a default is tested
    with `has()` first."""
    return ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]
        }
    )
