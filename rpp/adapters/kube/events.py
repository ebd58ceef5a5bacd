"""Kubernetes Events for a RunPodPool: how they are built and how repeats are recognised.

Act emits an Event for every action and condition change, and a pool that stays short of GPUs
says the same thing every loop. `kubectl describe rpp` should show that once with a count, as
Kubernetes' own event correlator does, not as a wall of copies. So an Event's name is derived
from what makes it "the same" (the pool's uid, type, reason and message): a repeat finds the
existing Event by name and bumps its count and lastTimestamp. Both adapters use this module,
so the in-memory cluster deduplicates exactly as the real one does.

The Events are core/v1 Events with `involvedObject` set to the pool (or, for the nginx
reloader, its slots ConfigMap): that is the API `kubectl describe` and `kubectl get
events` read.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Mapping
from typing import Any

from rpp.adapters.clock import to_rfc3339
from rpp.adapters.kube.api import EventType, KubeSettings

MAX_MESSAGE = 1024
"""Longer messages are cut: the API server refuses Events with an oversized message."""

_REASON = re.compile(r"^[A-Z][A-Za-z0-9]{0,127}$")
# Names are DNS subdomains (253 characters); leave room for the suffix.
_MAX_POOL_PART = 253 - 1 - 16


def clean_message(message: str) -> str:
    """One line (Events are read in a table), at most MAX_MESSAGE characters."""
    flat = " ".join(message.split())
    if len(flat) <= MAX_MESSAGE:
        return flat
    return flat[: MAX_MESSAGE - 3] + "..."


def event_name(pool: Mapping[str, Any], *, type_: EventType, reason: str, message: str) -> str:
    """The Event's name: the same for the same (pool uid, type, reason, message), so repeats
    land on one Event."""
    meta = pool.get("metadata", {})
    identity = meta.get("uid") or meta.get("name", "")
    key = "\0".join((identity, type_, reason, clean_message(message)))
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return f"{str(meta.get('name', 'pool'))[:_MAX_POOL_PART]}.{digest}"


def new_event(
    pool: Mapping[str, Any],
    *,
    settings: KubeSettings,
    type_: EventType,
    reason: str,
    message: str,
    now: dt.datetime,
) -> dict[str, Any]:
    """A core/v1 Event about `pool`, seen once at `now`."""
    if not _REASON.match(reason):
        # Reasons come from code, never from users: a bad one is a programming error.
        raise ValueError(f"event reason {reason!r} must be CamelCase, at most 128 characters")
    if type_ not in ("Normal", "Warning"):
        raise ValueError(f"event type {type_!r} must be Normal or Warning")
    meta = pool.get("metadata", {})
    stamp = to_rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": event_name(pool, type_=type_, reason=reason, message=message),
            "namespace": settings.namespace,
        },
        "involvedObject": {
            "apiVersion": pool.get("apiVersion", settings.pool_api_version),
            "kind": pool.get("kind", "RunPodPool"),
            "name": meta.get("name"),
            "namespace": settings.namespace,
            "uid": meta.get("uid"),
        },
        "type": type_,
        "reason": reason,
        "message": clean_message(message),
        "count": 1,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "source": {"component": settings.component},
        "reportingComponent": settings.component,
        "reportingInstance": settings.component,
    }


def repeat_patch(count: int, now: dt.datetime) -> dict[str, Any]:
    """The merge patch that records one more occurrence of an existing Event."""
    return {"count": count, "lastTimestamp": to_rfc3339(now)}
