"""The fake API's contract checks on request bodies: what makes RunPod answer 422.

RunPod answers 422 with an `errors` list when a body breaks the OpenAPI contract
(unknown field, wrong type, a missing `name`...), and 400 when a body fits the
contract but breaks a handler rule (both `gpu` and `cpu`, neither). The fake must
draw that line where RunPod does, or the client's classification would be tested
against a fiction. The OpenAPI validator is a dev-only dependency, so the fake carries
these few rules itself, and tests/test_contract_*.py check on generated bodies that
it rejects exactly what the published spec rejects.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from rpp.sim.cloud import CloudError

_VERSION = re.compile(r"^\d+\.\d+$")
Check = Callable[[Any, str], list[str]]


def _string(min_length: int = 0) -> Check:
    def check(value: Any, where: str) -> list[str]:
        if not isinstance(value, str):
            return [f"{where}: expected a string"]
        if len(value) < min_length:
            return [f"{where}: must not be empty"]
        return []

    return check


def _nullable_string(value: Any, where: str) -> list[str]:
    return (
        [] if value is None or isinstance(value, str) else [f"{where}: expected a string or null"]
    )


def _boolean(value: Any, where: str) -> list[str]:
    return [] if isinstance(value, bool) else [f"{where}: expected a boolean"]


def _integer(minimum: int) -> Check:
    def check(value: Any, where: str) -> list[str]:
        if isinstance(value, bool) or not isinstance(value, int):
            return [f"{where}: expected an integer"]
        return [] if value >= minimum else [f"{where}: must be at least {minimum}"]

    return check


def _string_array(value: Any, where: str) -> list[str]:
    if not isinstance(value, list):
        return [f"{where}: expected an array of strings"]
    return [
        f"{where}[{i}]: expected a string" for i, v in enumerate(value) if not isinstance(v, str)
    ]


def _string_map(value: Any, where: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: expected an object of strings"]
    return [f"{where}.{k}: expected a string" for k, v in value.items() if not isinstance(v, str)]


def _enum(*allowed: str) -> Check:
    def check(value: Any, where: str) -> list[str]:
        return [] if value in allowed else [f"{where}: must be one of {', '.join(allowed)}"]

    return check


def _version(value: Any, where: str) -> list[str]:
    if not isinstance(value, str) or not _VERSION.match(value):
        return [f"{where}: expected a version as major.minor"]
    return []


def _object(fields: Mapping[str, Check], required: tuple[str, ...] = ()) -> Check:
    def check(value: Any, where: str) -> list[str]:
        if not isinstance(value, dict):
            return [f"{where}: expected an object"]
        return _check_fields(value, fields, required, where)

    return check


def _version_array(value: Any, where: str) -> list[str]:
    if not isinstance(value, list):
        return [f"{where}: expected an array of versions"]
    return [e for i, v in enumerate(value) for e in _version(v, f"{where}[{i}]")]


def _any_object(value: Any, where: str) -> list[str]:
    return [] if isinstance(value, dict) else [f"{where}: expected an object"]


_GPU = _object(
    {
        "id": _string(),
        "count": _integer(1),
        "allowedCudaVersions": _version_array,
        "minCudaVersion": _version,
    },
    required=("id",),
)
_PERSISTENT = _object({"size": _integer(10), "path": _string()}, required=("size", "path"))
_NETWORK_MOUNT = _object({"volumeId": _string(), "path": _string()}, required=("volumeId", "path"))


def _network_mounts(value: Any, where: str) -> list[str]:
    if not isinstance(value, list):
        return [f"{where}: expected an array"]
    errors = [e for i, v in enumerate(value) for e in _NETWORK_MOUNT(v, f"{where}[{i}]")]
    return errors + ([f"{where}: at most 1 network mount"] if len(value) > 1 else [])


_MOUNTS = _object({"persistent": _PERSISTENT, "network": _network_mounts})

_CONTAINER: dict[str, Check] = {
    "args": _string(),
    "disk": _integer(1),
    "env": _string_map,
    "image": _string(),
    "ports": _string_array,
    "registry": _nullable_string,
}
CREATE_FIELDS: dict[str, Check] = {
    **_CONTAINER,
    "name": _string(1),
    "cloud": _enum("SECURE", "COMMUNITY"),
    "cpu": _any_object,
    "dataCenterIds": _string_array,
    "globalNetworking": _boolean,
    "gpu": _GPU,
    "mounts": _MOUNTS,
    "startJupyter": _boolean,
    "startSsh": _boolean,
    "templateId": _string(1),
}
UPDATE_FIELDS: dict[str, Check] = {
    **_CONTAINER,
    "globalNetworking": _boolean,
    "locked": _boolean,
    "mounts": _MOUNTS,
    "name": _string(1),
    "templateId": _string(),
}


def _check_fields(
    body: Mapping[str, Any], fields: Mapping[str, Check], required: tuple[str, ...], where: str
) -> list[str]:
    errors = [f"{where}.{name}: is required" for name in required if name not in body]
    for key, value in body.items():
        check = fields.get(key)
        if check is None:
            errors.append(f"{where}.{key}: unknown field")
        else:
            errors.extend(check(value, f"{where}.{key}"))
    return errors


def _unprocessable(errors: list[str]) -> CloudError:
    return CloudError(
        422, "The request body failed validation.", title="Unprocessable Entity", errors=errors
    )


def check_create(body: Any) -> Mapping[str, Any]:
    """A create body RunPod would accept for processing; else 422 (contract) or 400."""
    if not isinstance(body, dict):
        raise _unprocessable(["body: expected a JSON object"])
    errors = _check_fields(body, CREATE_FIELDS, ("name",), "body")
    if "templateId" not in body and "image" not in body:
        errors.append("body.image: is required unless templateId is set")
    if errors:
        raise _unprocessable(errors)
    if ("gpu" in body) == ("cpu" in body):
        raise CloudError(400, "Exactly one of gpu or cpu must be set.", title="Bad Request")
    if "cpu" in body:
        raise CloudError(400, "CPU pods are not offered by this fake cloud.", title="Bad Request")
    return body


def check_update(body: Any) -> Mapping[str, Any]:
    if not isinstance(body, dict):
        raise _unprocessable(["body: expected a JSON object"])
    errors = _check_fields(body, UPDATE_FIELDS, (), "body")
    if errors:
        raise _unprocessable(errors)
    if "templateId" in body:
        raise CloudError(
            400, "Templates on update are not offered by this fake.", title="Bad Request"
        )
    return body


def check_action(body: Any) -> str:
    if not isinstance(body, dict):
        raise _unprocessable(["body: expected a JSON object"])
    fields = {"action": _enum("start", "stop", "restart", "terminate")}
    errors = _check_fields(body, fields, ("action",), "body")
    if errors:
        raise _unprocessable(errors)
    return str(body["action"])
