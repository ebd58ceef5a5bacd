"""Machine notices (HostNotice) from RunPod's GraphQL API: one query for every pod.

REST v2 pods carry no machine or maintenance fields, but the host a pod runs on can
be flagged ("We have detected a critical error on this machine...") or scheduled for
maintenance. GraphQL still has them, so observe sends this one query per loop and the
pool's HostNotice rule reads the result. Which field carries the critical-error text
is not documented; `machine.note` is the likely one, and any non-empty note or any
maintenance window counts (see `HostNotice.active`).

Maintenance times come back as ISO strings or epoch numbers (seconds, or milliseconds
from some endpoints), so both are read. A value that cannot be read is not dropped:
it is kept in the maintenance note, so the notice stays active and the user sees it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from rpp.adapters.clock import UTC
from rpp.adapters.runpod.wire import WireError
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
            parsed = dt.datetime.fromisoformat(text)  # ValueError when not ISO 8601
            # A time without an offset is read as UTC: RunPod's servers run in UTC.
            return (parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed).astimezone(
                UTC
            )
    if isinstance(value, int | float):
        seconds = value / 1000.0 if abs(value) >= _MILLIS_THRESHOLD else float(value)
        return dt.datetime.fromtimestamp(seconds, UTC)
    raise ValueError(f"{value!r} is not a time")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


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
            unread.append(f"{key} {raw!r}")
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
        errors = obj.get("errors")
        messages = [str(e.get("message")) for e in errors or [] if isinstance(e, Mapping)] or [
            "no data.myself.pods in the answer"
        ]
        raise WireError("GraphQL notice query failed: " + "; ".join(messages))
    notices: dict[str, HostNotice] = {}
    for i, pod in enumerate(pods):
        if not isinstance(pod, Mapping) or not isinstance(pod.get("id"), str):
            raise WireError(f"data.myself.pods[{i}] has no id")
        machine = pod.get("machine")
        notices[pod["id"]] = (
            notice_from_machine(machine) if isinstance(machine, Mapping) else HostNotice()
        )
    return notices
