"""How timestamps are written and read in status, Events and the fake cloud.

Pure formatting, no clock: decision code uses it freely. Reading the time is
rpp/clock.py's job, and only adapters and the loop do that.
"""

from __future__ import annotations

import datetime as dt

UTC = dt.UTC


def to_rfc3339(when: dt.datetime) -> str:
    """How every timestamp is written to status: UTC, second precision, `Z` suffix."""
    # isoformat of a UTC time ends in +00:00; it is twice as fast as strftime, and
    # every member's timestamps are written on every loop.
    return when.astimezone(UTC).replace(microsecond=0).isoformat()[:-6] + "Z"


def from_rfc3339(text: str) -> dt.datetime:
    """Parse a timestamp written by `to_rfc3339` (or any ISO 8601 with an offset)."""
    parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no timezone")
    return parsed.astimezone(UTC)
