"""Who wrote an object, recorded as the API server records it: managedFields.

Where it sits: the Kubernetes stand-ins of the simulator (kube_memory.py, kube_standin.py)
and the tests' emulator (tests/kmock_strict.py) record every write here, so a test can ask
who wrote what, as `kubectl get -o yaml --show-managed-fields` shows it on a cluster.

The API server keeps one entry per manager, operation and subresource, and names the
manager after the request's `fieldManager` query parameter, or else after its User-Agent
up to the first "/" (which makes every write of the kubernetes Python client's default
User-Agent `OpenAPI-Generator`'s; apiserver's pkg/endpoints/handlers/create.go,
managerOrUserAgent). What it also records, the fields each manager owns (fieldsV1), is left
out: nothing here reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_LENGTH = 128
"""The longest fieldManager the API server accepts."""


def manager_of(field_manager: str | None, user_agent: str) -> str:
    """The manager the API server names a write after."""
    return field_manager or user_agent.split("/")[0][:MAX_LENGTH]


def record(
    obj: dict[str, Any], *, manager: str, api_version: str, time: str, subresource: str = ""
) -> None:
    """Note an Update by `manager` in `obj`'s managedFields (in place)."""
    entry = {
        "manager": manager,
        "operation": "Update",
        "apiVersion": api_version,
        "time": time,
        "fieldsType": "FieldsV1",
    }
    if subresource:
        entry["subresource"] = subresource
    meta = obj["metadata"]
    kept = [
        e
        for e in meta.get("managedFields") or []
        if (e.get("manager"), e.get("subresource", "")) != (manager, subresource)
    ]
    meta["managedFields"] = [*kept, entry]


def managers(obj: Mapping[str, Any]) -> set[str]:
    """Every manager that wrote `obj`."""
    fields = (obj.get("metadata") or {}).get("managedFields") or []
    return {str(entry.get("manager")) for entry in fields}
