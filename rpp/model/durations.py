"""Kubernetes-style durations ("150s", "2m", "1h30m", "500ms") used throughout the spec.

The spec stores durations as seconds (float) once parsed; users write them the way
Kubernetes and Go do. `durationpy` (installed with the Kubernetes client) does the
arithmetic; this module only holds the grammar we accept (the same regular expression the
CRD's `pattern` carries, so the API server and `rpp validate` agree: no days or weeks,
no sign) and a friendly error. `format_duration` writes the shortest exact form back
("150s", not durationpy's "2m30s"), so `--show-defaults`, nginx's config and the CRD's
defaults read the way a user would write them.
"""

from __future__ import annotations

import re

import durationpy

# ASCII digits only (Python's \d takes any script's digits, Go's does not), at most three
# after the point, so every duration is a whole number of microseconds: Python and the
# API server's Go then compute the same value, to the bounds below.
DURATION_PATTERN = r"^([0-9]+(\.[0-9]{1,3})?(ms|s|m|h))+$"
DURATION_MAX_LENGTH = 32
MIN_DURATION = "1ms"
MAX_DURATION = "720h"
_DURATION = re.compile(DURATION_PATTERN)


class DurationError(ValueError):
    """A duration string that does not parse; the message says how to write one."""


def parse_duration(text: object) -> float:
    """Seconds in a duration such as "150s", "2m", "1h30m" or "500ms".

    The whole text must be the duration: no spaces around it, no newline after it, as
    the CRD's pattern demands (Python's `$` would let a final newline through).
    """
    if not isinstance(text, str):
        raise DurationError(f'expected a duration string such as "150s", got {text!r}')
    try:
        if len(text) <= DURATION_MAX_LENGTH and _DURATION.fullmatch(text):
            return float(durationpy.from_str(text).total_seconds())
    except (ValueError, OverflowError):
        pass  # out of range (durationpy.DurationError is a ValueError): the same advice
    raise DurationError(
        f"{text!r} is not a duration; write a number with a unit (at most 3 decimals), "
        'such as "500ms", "150s", "2m", "24h" or "1h30m"'
    )


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
