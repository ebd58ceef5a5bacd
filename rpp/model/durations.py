"""Kubernetes-style durations ("150s", "2m", "1h30m", "500ms") used throughout the spec.

The spec stores durations as seconds (float) once parsed; users write them the way
Kubernetes and Go do. `format_duration` writes the shortest exact form back, so
`--show-defaults`, status and the CRD's defaults read the way a user would write them.
"""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
# The same grammar as a regular expression, for the CRD's `pattern`.
DURATION_PATTERN = r"^(\d+(\.\d+)?(ms|s|m|h))+$"


class DurationError(ValueError):
    """A duration string that does not parse; the message says how to write one."""


def parse_duration(text: str) -> float:
    """Seconds in a duration such as "150s", "2m", "1h30m" or "500ms"."""
    if not isinstance(text, str):
        raise DurationError(f'expected a duration string such as "150s", got {text!r}')
    stripped = text.strip()
    pos = 0
    total = 0.0
    for match in _PART.finditer(stripped):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not stripped or pos != len(stripped):
        raise DurationError(
            f"{text!r} is not a duration; write a number with a unit, "
            'such as "500ms", "150s", "2m", "24h" or "1h30m"'
        )
    return total


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
