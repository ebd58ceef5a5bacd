"""Kubernetes-style durations ("150s", "2m", "1h30m", "500ms") used throughout the spec.

The spec stores durations as seconds (float) once parsed; users write them the way
Kubernetes and Go do. This module holds the grammar we accept (no days or weeks, no
sign, at most three decimals), reads a duration exactly (whole microseconds, so Python
and the API server's Go compute the same value) and says, in sentences shared with the
CRD's CEL rules, what is wrong with one: `rpp validate` and the API server print the same
words. `format_duration` writes the shortest exact form back ("150s", not "2m30s"), so
`--show-defaults`, nginx's config and the CRD's defaults read the way a user would write
them.

The API server's CEL `duration()` is Go's `time.ParseDuration`, which fails on a value
past int64 nanoseconds (about 2,562,047 hours). `DURATION_FITS_PATTERN` is the part of the
grammar no longer than any spec bound allows digits for: whatever it matches converts
in Go, and whatever the grammar allows beyond it is longer than `MAX_DURATION`, so the
CRD's bound rules call `duration()` only on text that matches it (rpp/model/spec_fields.py).
"""

from __future__ import annotations

import re

# ASCII digits only (Python's \d takes any script's digits, Go's does not), at most three
# after the point, so every duration is a whole number of microseconds.
DURATION_PATTERN = r"^([0-9]+(\.[0-9]{1,3})?(ms|s|m|h))+$"
DURATION_MAX_LENGTH = 32
MIN_DURATION = "1ms"
MAX_DURATION = "720h"
# What is wrong with a duration, said once for `rpp validate` (after the value) and for
# the API server (which prints the value before the CRD rule's message).
NOT_A_DURATION = (
    "not a duration; write a number with a unit (at most 3 decimals), "
    'such as "500ms", "150s", "2m", "24h" or "1h30m"'
)
TOO_SHORT = f"shorter than {MIN_DURATION}; use {MIN_DURATION} or more"
TOO_LONG = f"longer than {MAX_DURATION}; use {MAX_DURATION} or less"

_MICROS = {"ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000}
_PART = re.compile(r"([0-9]+)(?:\.([0-9]{1,3}))?(ms|s|m|h)")
_DURATION = re.compile(DURATION_PATTERN)
_GO_MOST_MICROS = (2**63 - 1) // 1000  # int64 nanoseconds


def _micros(text: str) -> int:
    """Whole microseconds of `text`, which matches the grammar (three decimals of a
    millisecond are a microsecond, so the sum is exact however long)."""
    total = 0
    for whole, fraction, unit in _PART.findall(text):
        total += int(whole) * _MICROS[unit] + int(fraction.ljust(3, "0")) * _MICROS[unit] // 1000
    return total


def _fits_pattern() -> str:
    # Per unit, as many significant digits as MAX_DURATION needs in that unit: a number
    # with more is at least 10^digits units, longer than MAX_DURATION on its own. Within
    # DURATION_MAX_LENGTH characters the sum stays far below Go's int64 nanoseconds.
    most = _micros(MAX_DURATION)
    parts = [
        rf"0*[0-9]{{1,{len(str(most // micros))}}}(\.[0-9]{{1,3}})?{unit}"
        for unit, micros in _MICROS.items()
    ]
    return "^(" + "|".join(parts) + ")+$"


DURATION_FITS_PATTERN = _fits_pattern()


class DurationError(ValueError):
    """A duration string that does not parse; the message says how to write one."""


def read_duration(text: object) -> float:
    """Seconds in a duration such as "150s", "2m", "1h30m" or "500ms", however long (the
    spec bounds it after, with its own sentence).

    The whole text must be the duration: no spaces around it, no newline after it, as
    the CRD's rule demands (Python's `$` would let a final newline through).
    """
    if not isinstance(text, str):
        raise DurationError(f'expected a duration string such as "150s", got {text!r}')
    if len(text) > DURATION_MAX_LENGTH or not _DURATION.fullmatch(text):
        raise DurationError(f"{text!r} is {NOT_A_DURATION}")
    return _micros(text) / 1_000_000


def parse_duration(text: object) -> float:
    """Seconds in a duration, as `read_duration`, within what Go can hold (a value past
    int64 nanoseconds is refused with the same advice)."""
    seconds = read_duration(text)
    if _micros(str(text)) > _GO_MOST_MICROS:
        raise DurationError(f"{text!r} is {NOT_A_DURATION}")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest exact spelling: 150 -> "150s", 120 -> "2m", 5400 -> "1h30m"."""
    if seconds < 0:
        raise ValueError(f"negative duration {seconds}")
    millis = round(seconds * 1000)
    if millis == 0:
        return "0s"
    if millis % 1000:
        return f"{millis}ms"
    whole = millis // 1000
    if whole % 60:
        return f"{whole}s"
    hours, minutes = divmod(whole // 60, 60)
    if hours and minutes:
        return f"{hours}h{minutes}m"
    return f"{hours}h" if hours else f"{minutes}m"
