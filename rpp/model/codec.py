"""The JSON shape of RunPodPool status: the base model, its field types, path-naming errors.

Status is the controller's only memory, and it is read back every loop: it may have
been written by an older version of the controller or edited by hand with `kubectl
edit --subresource=status`. The status records (rpp/model/status.py, members.py,
records.py) are frozen pydantic models on `StatusModel`; `from_stored` reads them and
turns any mismatch into one `StatusFormatError` naming the exact path
("status.members[2].since: not a timestamp"), never a bare KeyError or a pydantic
report. Keys are the camelCase ones Kubernetes status uses; `stored()` writes them,
leaving out the fields that are None.

Reading is strict where a lax parser would guess: a slot of "8081" or a flag of "yes"
is an error, not a number or a boolean. Two leniencies are kept because the JSON may
come back that way: a whole number written as 3.0, and an explicit null meaning "not
set". Numbers keep the JSON form they were given (0 stays 0, 0.5 stays 0.5), so the
round trip is exact.

Timestamps are aware UTC datetimes in memory and RFC 3339 strings with second
precision in storage; they are truncated to the second whenever a record is built
(`replace` validates too), so a record always survives the JSON round trip unchanged.
This module sits under the status models and does no I/O.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Annotated, Any, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    GetPydanticSchema,
    ValidationError,
    WithJsonSchema,
)
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails, PydanticCustomError
from pydantic_core import core_schema as cs

from rpp.model.timestamps import UTC, from_rfc3339, to_rfc3339


class StatusFormatError(ValueError):
    """Persisted status that cannot be read; the message names the field and the fix."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(
            f"{path}: {problem} (fix or remove this field in the RunPodPool status; "
            "the controller rewrites status every loop)"
        )
        self.path = path
        self.problem = problem


def stamp(when: dt.datetime) -> dt.datetime:
    """`when` as stored: aware UTC, whole seconds (so the JSON round trip is exact)."""
    if when.tzinfo is UTC and not when.microsecond:
        return when
    if when.tzinfo is None:
        raise ValueError(f"timestamp {when.isoformat()} has no timezone; use aware UTC times")
    return when.astimezone(UTC).replace(microsecond=0)


@lru_cache(maxsize=4096)
def _time_from_text(text: str) -> dt.datetime:
    # Cached: most timestamps of a status are the ones the last loop wrote.
    try:
        return stamp(from_rfc3339(text))
    except ValueError:
        raise PydanticCustomError(
            "status",
            "not a timestamp: {text}; write RFC 3339 such as 2026-01-01T00:00:00Z",
            {"text": repr(text)},
        ) from None


def _read_time(value: object) -> dt.datetime:
    if isinstance(value, str):
        return _time_from_text(value)
    if isinstance(value, dt.datetime):
        return stamp(value)
    raise PydanticCustomError(
        "status", "not a timestamp: expected a string, got {kind}", {"kind": _kind_of(value)}
    )


Timestamp = Annotated[
    dt.datetime,
    # Written with the cached `to_rfc3339`: most timestamps are the last loop's, and a
    # cache hit is cheaper than formatting again.
    GetPydanticSchema(
        lambda _type, _handler: cs.no_info_plain_validator_function(
            _read_time,
            serialization=cs.plain_serializer_function_ser_schema(to_rfc3339, when_used="json"),
        )
    ),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""An aware UTC datetime, whole seconds; RFC 3339 with `Z` in storage."""


def _json_number(error: str) -> cs.CoreSchema:
    return cs.union_schema(
        [cs.int_schema(strict=True), cs.float_schema(strict=True, allow_inf_nan=False)],
        custom_error_type=error,
        custom_error_message=error,
    )


Number = Annotated[
    float,
    GetPydanticSchema(lambda _type, _handler: _json_number("number")),
    WithJsonSchema({"type": "number"}),
]
"""A finite JSON number, kept as the int or float it was given."""


def _whole(minimum: int | None) -> GetPydanticSchema:
    return GetPydanticSchema(
        lambda _type, _handler: cs.chain_schema([_json_number("whole"), cs.int_schema(ge=minimum)])
    )


Whole = Annotated[int, _whole(None), WithJsonSchema({"type": "integer"})]
"""A whole number; 3.0 reads as 3, 3.5, "3" and true are errors."""

NonNegative = Annotated[int, _whole(0), WithJsonSchema({"type": "integer", "minimum": 0})]
"""A whole number, 0 or more."""

SORTED_KEYS = AfterValidator(lambda value: dict(sorted(value.items())))
"""Mark a map field to be kept (and so written) in key order: equal maps, equal bytes."""


class StatusModel(BaseModel):
    """A frozen status record whose storage form is camelCase JSON without nulls."""

    model_config = ConfigDict(
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes`, validated like a read (timestamps truncated, enums set)."""
        return self.model_validate({**self.__dict__, **changes})

    def stored(self) -> dict[str, Any]:
        """The JSON form written to the status subresource."""
        return self.model_dump(mode="json", exclude_none=True)

    @classmethod
    def from_stored(cls, data: object, path: str) -> Self:
        """Read the JSON form at `path`; anything malformed is a `StatusFormatError`."""
        try:
            return cls.model_validate(data)
        except ValidationError:
            pass
        try:  # the rare slow path: nulls read as "not set"
            return cls.model_validate(_without_nulls(data))
        except ValidationError as err:
            first = err.errors(include_url=False)[0]
            raise StatusFormatError(_path(path, first["loc"]), _problem(first)) from None


# Maps whose keys are names, not fields: a null there is a bad value, not "not set".
_MAPS = frozenset({"breaches", "datacenterReplacements"})


def _without_nulls(data: object, *, keep_nulls: bool = False) -> object:
    if isinstance(data, Mapping):
        return {
            key: _without_nulls(value, keep_nulls=key in _MAPS)
            for key, value in data.items()
            if keep_nulls or value is not None
        }
    if isinstance(data, list):
        return [_without_nulls(item) for item in data]
    return data


def _path(base: str, loc: tuple[int | str, ...]) -> str:
    return base + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)


_EXPECTED = {
    "missing": "required, and missing",
    "bool_type": "expected true or false",
    "string_type": "expected a string",
    "list_type": "expected a list",
    "tuple_type": "expected a list",
    "dict_type": "expected an object",
    "model_type": "expected an object",
    "model_attributes_type": "expected an object",
    "whole": "expected a whole number",
    "int_from_float": "expected a whole number",
    "number": "expected a number",
}


def _problem(error: ErrorDetails) -> str:
    kind, value = error["type"], error["input"]
    if kind == "missing":
        return _EXPECTED[kind]
    if kind == "number" and isinstance(value, float) and not math.isfinite(value):
        return f"expected a finite number, got {value}"
    if kind in _EXPECTED:
        return f"{_EXPECTED[kind]}, got {_kind_of(value)}"
    if kind == "greater_than_equal":
        return f"must be {error.get('ctx', {}).get('ge')} or more, got {value}"
    if kind in ("enum", "literal_error"):
        # pydantic lists the choices as "'A', 'B' or 'C'".
        allowed = re.findall(r"'([^']*)'", str(error.get("ctx", {}).get("expected", "")))
        return f"unknown value {value!r}; expected one of {', '.join(allowed)}"
    return error["msg"]


def _kind_of(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__
