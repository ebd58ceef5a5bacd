"""Machine notices (HostNotice) from RunPod's GraphQL API: one query for every pod.

REST v2 pods carry no machine or maintenance fields, but the host a pod runs on can
be flagged ("We have detected a critical error on this machine...") or scheduled for
maintenance. GraphQL still has them, so observe sends this one query per loop and the
pool's HostNotice rule reads the result. Which field carries the critical-error text
is not documented; `machine.note` is the likely one, and any non-empty note or any
maintenance window counts (see `HostNotice.active`).

Maintenance times come back as ISO strings or epoch numbers (seconds, or milliseconds
from some endpoints), so both are read. A value that cannot be read ("inf", 1e300, an
object) is not dropped: it is kept, cut short, in the maintenance note, so the notice
stays active and the user sees it. Every other field is read defensively too: a pod
entry without an id is skipped, and an `errors` field of any shape still becomes one
clear failure of the query (issue 15: `errors: 5` once escaped as a TypeError).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from rpp.adapters.clock import UTC
from rpp.adapters.runpod.reading import WireError, show
from rpp.model.documents import clip
from rpp.model.observations import HostNotice

NOTICES_QUERY = (
    "query PoolHostNotices { myself { pods { id machine { "
    "note maintenanceStart maintenanceEnd maintenanceNote } } } }"
)

# Epoch values above this are milliseconds: 1e11 seconds is the year 5138.
_MILLIS_THRESHOLD = 1e11


def parse_notice_time(value: Any) -> dt.datetime | None:
    """An ISO string, epoch seconds or epoch milliseconds -> aware UTC; None if empty.

    Raises ValueError for anything else, so the caller can keep the raw text.
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a time")
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text)
        except ValueError:
            if len(text) > 64:
                raise ValueError("too long for a time") from None
            parsed = dt.datetime.fromisoformat(text)  # ValueError when not ISO 8601
            # A time without an offset is read as UTC: RunPod's servers run in UTC.
            return (parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed).astimezone(
                UTC
            )
    if isinstance(value, int | float):
        seconds = value / 1000.0 if abs(value) >= _MILLIS_THRESHOLD else float(value)
        try:
            return dt.datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):  # inf, nan, 1e300: not a time
            raise ValueError(f"{value!r} is not a time") from None
    raise ValueError(f"{value!r} is not a time")


def _text(value: Any) -> str | None:
    """A note as text, cut short; an odd value is kept as its description."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        return f"unreadable note ({show(value)})"
    return clip(value, 1024) if value.strip() else None


def notice_from_machine(machine: Mapping[str, Any]) -> HostNotice:
    """One pod's `machine` object -> HostNotice (empty when nothing is flagged)."""
    unread: list[str] = []
    times: dict[str, dt.datetime | None] = {}
    for key in ("maintenanceStart", "maintenanceEnd"):
        raw = machine.get(key)
        try:
            times[key] = parse_notice_time(raw)
        except ValueError:
            times[key] = None
            unread.append(f"{key} {show(raw)}")
    note = _text(machine.get("maintenanceNote"))
    if unread:
        extra = "maintenance window with unreadable " + ", ".join(unread)
        note = f"{note} ({extra})" if note else extra
    return HostNotice(
        note=_text(machine.get("note")),
        maintenance_start=times["maintenanceStart"],
        maintenance_end=times["maintenanceEnd"],
        maintenance_note=note,
    )


def notices_from_graphql(obj: Any) -> dict[str, HostNotice]:
    """The GraphQL answer -> HostNotice per pod id, for every pod it lists.

    GraphQL reports failures in `errors` with HTTP 200; an answer without
    `data.myself.pods` is a contract break and raises WireError with their messages.
    """
    if not isinstance(obj, Mapping):
        raise WireError("GraphQL answer is not an object")
    data = obj.get("data")
    myself = data.get("myself") if isinstance(data, Mapping) else None
    pods = myself.get("pods") if isinstance(myself, Mapping) else None
    if not isinstance(pods, list):
        raise WireError("GraphQL notice query failed: " + _error_messages(obj.get("errors")))
    notices: dict[str, HostNotice] = {}
    for pod in pods:
        pod_id = pod.get("id") if isinstance(pod, Mapping) else None
        if not isinstance(pod_id, str) or not pod_id or len(pod_id) > 64 or pod_id in notices:
            continue  # no pool can own a pod without an id; the listing says so already
        machine = pod.get("machine")
        notices[pod_id] = (
            notice_from_machine(machine) if isinstance(machine, Mapping) else HostNotice()
        )
    return notices


def _error_messages(errors: Any) -> str:
    """GraphQL's `errors`, whatever its shape, as one short text."""
    if errors is None:
        return "no data.myself.pods in the answer"
    if not isinstance(errors, list):
        return f"no data.myself.pods, and errors is {show(errors)}"
    messages = [
        clip(str(e.get("message")), 200) if isinstance(e, Mapping) else show(e) for e in errors[:5]
    ]
    return "; ".join(messages) or "no data.myself.pods in the answer"
