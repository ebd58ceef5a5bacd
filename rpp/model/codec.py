"""Reading and writing the JSON shape of RunPodPool status, with errors that name the path.

Status is the controller's only memory, and it is read back every loop: it may have
been written by an older version of the controller or edited by hand with `kubectl
edit --subresource=status`. So every field is read through `Fields`, which checks the
JSON type and, on a mismatch, raises `StatusFormatError` naming the exact path
("status.members[2].since: not a timestamp"), never a bare KeyError or TypeError.

Timestamps are aware UTC datetimes in memory and RFC 3339 strings with second
precision in storage; `stamp` truncates to the second at construction, so a record
always survives the JSON round trip unchanged. This module sits under rpp/model/status.py and
rpp/model/members.py and does no I/O.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from rpp.model.timestamps import UTC, from_rfc3339, to_rfc3339

T = TypeVar("T")


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
    if when.tzinfo is None:
        raise ValueError(f"timestamp {when.isoformat()} has no timezone; use aware UTC times")
    return when.astimezone(UTC).replace(microsecond=0)


def opt_stamp(when: dt.datetime | None) -> dt.datetime | None:
    return None if when is None else stamp(when)


def write_time(when: dt.datetime | None) -> str | None:
    return None if when is None else to_rfc3339(when)


def drop_none(data: Mapping[str, Any]) -> dict[str, Any]:
    """A storage dict without the keys whose value is None (absent reads back as None)."""
    return {key: value for key, value in data.items() if value is not None}


def kind_of(value: object) -> str:
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


class Fields:
    """One JSON object of stored status, read field by field with path-naming errors.

    A missing key or an explicit null reads as the field's default; everything else
    must have the right JSON type.
    """

    def __init__(self, data: object, path: str) -> None:
        if not isinstance(data, Mapping):
            raise StatusFormatError(path, f"expected an object, got {kind_of(data)}")
        self._data: Mapping[str, Any] = data
        self.path = path

    def at(self, key: str) -> str:
        return f"{self.path}.{key}"

    def _get(self, key: str) -> Any:
        return self._data.get(key)

    def text(self, key: str) -> str:
        value = self.opt_text(key)
        if value is None:
            raise StatusFormatError(self.at(key), "required, and missing")
        return value

    def opt_text(self, key: str) -> str | None:
        value = self._get(key)
        if value is None or isinstance(value, str):
            return value
        raise StatusFormatError(self.at(key), f"expected a string, got {kind_of(value)}")

    def choice(self, key: str, allowed: tuple[str, ...], default: str | None = None) -> str:
        value = self.opt_text(key)
        if value is None:
            if default is None:
                raise StatusFormatError(self.at(key), "required, and missing")
            return default
        if value not in allowed:
            raise StatusFormatError(
                self.at(key), f"unknown value {value!r}; expected one of {', '.join(allowed)}"
            )
        return value

    def opt_integer(self, key: str) -> int | None:
        value = self._get(key)
        if value is None:
            return None
        # JSON has one number type; the API server may hand back 3.0 for 3.
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise StatusFormatError(self.at(key), f"expected a whole number, got {kind_of(value)}")

    def integer(self, key: str, default: int = 0) -> int:
        value = self.opt_integer(key)
        return default if value is None else value

    def opt_number(self, key: str) -> float | None:
        value = self._get(key)
        if value is None:
            return None
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not math.isfinite(value):
                raise StatusFormatError(self.at(key), f"expected a finite number, got {value}")
            return float(value)
        raise StatusFormatError(self.at(key), f"expected a number, got {kind_of(value)}")

    def number(self, key: str, default: float = 0.0) -> float:
        value = self.opt_number(key)
        return default if value is None else value

    def flag(self, key: str, default: bool = False) -> bool:
        value = self._get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        raise StatusFormatError(self.at(key), f"expected true or false, got {kind_of(value)}")

    def opt_time(self, key: str) -> dt.datetime | None:
        value = self._get(key)
        return None if value is None else parse_time(value, self.at(key))

    def time(self, key: str) -> dt.datetime:
        value = self.opt_time(key)
        if value is None:
            raise StatusFormatError(self.at(key), "required, and missing")
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        items = []
        for value, path in self.items(key):
            if not isinstance(value, str):
                raise StatusFormatError(path, f"expected a string, got {kind_of(value)}")
            items.append(value)
        return tuple(items)

    def items(self, key: str) -> Iterator[tuple[Any, str]]:
        """Each element of a list field with its own path (`key[i]`); absent is empty."""
        value = self._get(key)
        if value is None:
            return
        if not isinstance(value, list):
            raise StatusFormatError(self.at(key), f"expected a list, got {kind_of(value)}")
        for index, item in enumerate(value):
            yield item, f"{self.at(key)}[{index}]"

    def each(self, key: str, parse: Callable[[object, str], T]) -> tuple[T, ...]:
        """A list of records, each parsed by `parse(value, path)`; absent is empty."""
        return tuple(parse(item, path) for item, path in self.items(key))

    def nested(self, key: str, parse: Callable[[object, str], T]) -> T | None:
        """An optional record parsed by `parse(value, path)`; absent or null is None."""
        value = self._get(key)
        return None if value is None else parse(value, self.at(key))

    def entries(self, key: str) -> Iterator[tuple[str, Any, str]]:
        """Each (name, value, path) of an object field used as a map; absent is empty."""
        value = self._get(key)
        if value is None:
            return
        if not isinstance(value, Mapping):
            raise StatusFormatError(self.at(key), f"expected an object, got {kind_of(value)}")
        for name, item in value.items():
            yield str(name), item, f"{self.at(key)}.{name}"


def parse_time(value: object, path: str) -> dt.datetime:
    """An RFC 3339 timestamp with a timezone, as `to_rfc3339` writes it."""
    if not isinstance(value, str):
        raise StatusFormatError(path, f"not a timestamp: expected a string, got {kind_of(value)}")
    try:
        return stamp(from_rfc3339(value))
    except ValueError:
        raise StatusFormatError(
            path, f"not a timestamp: {value!r}; write RFC 3339 such as 2026-01-01T00:00:00Z"
        ) from None
