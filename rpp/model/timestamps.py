"""How timestamps are written and read in status, Events and the fake cloud.

Pure formatting, no clock: decision code uses it freely. Reading the time is
rpp/adapters/clock.py's job, and only adapters and the loop do that.
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache

UTC = dt.UTC


@lru_cache(maxsize=4096)
def to_rfc3339(when: dt.datetime) -> str:
    """How every timestamp is written to status: UTC, second precision, `Z` suffix."""
    # Cached: a status is written every loop, and most of its timestamps (history,
    # member since, create log) are the ones the last loop wrote.
    return when.astimezone(UTC).replace(microsecond=0).isoformat()[:-6] + "Z"


def from_rfc3339(text: str) -> dt.datetime:
    """Parse a timestamp written by `to_rfc3339` (or any ISO 8601 with an offset)."""
    parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no timezone")
    return parsed.astimezone(UTC)
