"""Reading RunPod's JSON without trusting it: one field at a time, problems noted, not raised.

Where it sits: under the RunPod adapter's parsers (rpp/adapters/runpod/wire.py for pods,
notices.py for machine notices, catalog.py for stock). RunPod's answers drift: a field
turns null, a count arrives as "two", a time as "inf", a status value appears that did
not exist last month. One such value in one pod of the account must not stop every pool
(issue 15), so a parser reads each field through a `FieldReader`: a field that does not
fit takes a safe default, and the reader keeps one short line saying which field held
what. The parser then decides what the record is worth: a pod with odd fields is kept,
marked, and judged by the pool that owns it; only an answer that is not RunPod's shape
at all (no `pods` array, not JSON) fails the call.

Values are shown cut short, never whole: an answer can be megabytes, and a pod's env
carries secrets, so env values are never shown at all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeGuard

from rpp.model.documents import clip

SHOWN = 40  # characters of a value quoted in a problem line
PROBLEMS_SHOWN = 300  # characters of one record's problem lines together


class WireError(ValueError):
    """RunPod's JSON does not have the shape the contract promises."""


def show(value: Any) -> str:
    """A short description of a JSON value for a problem line: never the whole of it."""
    if isinstance(value, Mapping):
        return f"an object of {len(value)} fields"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, str):
        if len(value) <= SHOWN:
            return repr(value)
        return f"{value[:SHOWN]!r}... ({len(value):,} characters)"
    text = repr(value)
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}... ({len(text):,} characters)"


def is_number(value: Any) -> TypeGuard[int | float]:
    """A JSON number Python can use: not a bool, not NaN, not infinite."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)


class FieldReader:
    """Reads the fields of one JSON object, noting each one that does not fit."""

    def __init__(self, obj: Mapping[str, Any], where: str) -> None:
        self.obj = obj
        self.where = where
        self.problems: list[str] = []

    def odd(self, key: str, why: str) -> None:
        self.problems.append(f"{key} {why}")

    def text(self, key: str, *, limit: int = 1024) -> str | None:
        """A string field, None when absent or null; anything else is noted."""
        value = self.obj.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self.odd(key, f"is {show(value)}, not a string")
            return None
        if len(value) > limit:
            self.odd(key, f"is {len(value):,} characters long")
            return None
        return value

    def number(self, key: str, *, least: float, most: float) -> float | None:
        """A finite number in [least, most], None when absent or null."""
        value = self.obj.get(key)
        if value is None:
            return None
        if not is_number(value) or not least <= value <= most:
            self.odd(key, f"is {show(value)}, not a number from {least:g} to {most:g}")
            return None
        return float(value)

    def whole(self, key: str, *, least: int, most: int) -> int | None:
        """A whole number in [least, most], None when absent or null."""
        value = self.obj.get(key)
        if value is None:
            return None
        fits = is_number(value) and least <= value <= most and float(value).is_integer()
        if not fits:
            self.odd(key, f"is {show(value)}, not a whole number from {least} to {most}")
            return None
        return int(value)

    def mapping(self, key: str) -> Mapping[str, Any] | None:
        """An object field, None when absent or null."""
        value = self.obj.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.odd(key, f"is {show(value)}, not an object")
            return None
        return value

    def summary(self) -> str | None:
        """The problem lines of this record, cut short; None when every field read."""
        if not self.problems:
            return None
        return clip("; ".join(self.problems), PROBLEMS_SHOWN)
