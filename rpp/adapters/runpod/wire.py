"""RunPod's pod JSON in and out: REST v2 `Pod` -> `RunPodPod`, `PodRequest` -> create body.

The client calls these after a 2xx answer; anything that does not fit the contract
raises `WireError` with the field that broke it, which the client reports as a
`BadResponse` (or, for a create, as an `Unknown`: RunPod answered 201, so a pod
probably exists). Only the fields the pool uses are read, so RunPod adding a field
never breaks the controller; a missing or mistyped field the pool relies on does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rpp.adapters.clock import from_rfc3339
from rpp.model.observations import PodStatus, RunPodPod


class WireError(ValueError):
    """RunPod's JSON does not have the shape the contract promises."""


def _require_str(obj: Mapping[str, Any], key: str, where: str) -> str:
    if key not in obj:
        raise WireError(f"{where}.{key} is missing")
    value = obj[key]
    if not isinstance(value, str):
        raise WireError(f"{where}.{key} is a {type(value).__name__}, expected a string")
    return value


def pod_from_json(obj: Any, *, where: str = "pod") -> RunPodPod:
    """Map one v2 `Pod` object into the observation record the pool uses."""
    if not isinstance(obj, Mapping):
        raise WireError(f"{where} is not an object")
    pod_id = _require_str(obj, "id", where)
    where = f"{where}[{pod_id}]"
    status_text = _require_str(obj, "status", where)
    try:
        status = PodStatus(status_text)
    except ValueError:
        raise WireError(f"{where}.status {status_text!r} is not a known pod status") from None
    gpu = obj.get("gpu")
    if gpu is not None and not (isinstance(gpu, Mapping) and isinstance(gpu.get("id"), str)):
        raise WireError(f"{where}.gpu is not a GPU object with an id")
    env = obj.get("env") or {}
    if not isinstance(env, Mapping) or not all(isinstance(v, str) for v in env.values()):
        raise WireError(f"{where}.env is not a map of strings")
    cost = obj.get("cost", 0.0)
    if not isinstance(cost, int | float) or isinstance(cost, bool):
        raise WireError(f"{where}.cost is not a number")
    created_text = obj.get("createdAt")
    try:
        created = from_rfc3339(created_text) if isinstance(created_text, str) else None
    except ValueError:
        raise WireError(f"{where}.createdAt {created_text!r} is not a timestamp") from None
    template = obj.get("template")
    return RunPodPod(
        id=pod_id,
        name=_require_str(obj, "name", where),
        status=status,
        image=str(obj.get("image") or ""),
        gpu_type=gpu["id"] if gpu else None,
        gpu_count=int(gpu.get("count", 1)) if gpu else 0,
        cloud=obj.get("cloud") if isinstance(obj.get("cloud"), str) else None,
        datacenter=obj.get("dataCenterId") if isinstance(obj.get("dataCenterId"), str) else None,
        cost_per_hr=float(cost),
        created_at=created,
        template_id=template if isinstance(template, str) else None,
        env={str(k): v for k, v in env.items()},
    )


def pods_from_list(obj: Any) -> list[RunPodPod]:
    """`ListPodsResponse` -> pods, in RunPod's order."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("pods"), list):
        raise WireError("list response has no 'pods' array")
    return [pod_from_json(item, where=f"pods[{i}]") for i, item in enumerate(obj["pods"])]


@dataclass(frozen=True)
class PodRequest:
    """What to create, apart from where: the pool's pod template, name and env.

    Placement (GPU type, datacenter, cloud) is added per candidate by `create_body`.
    `env` holds secrets from the pool's envFromSecret, so it is hidden from `repr`.
    """

    name: str
    image: str | None = None
    template_id: str | None = None
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    ports: tuple[str, ...] = ("80/http",)
    gpu_count: int = 1
    container_disk_gb: int | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a pod needs a non-empty name (the pool's namePrefix + suffix)")
        if not self.image and not self.template_id:
            raise ValueError(f"pod {self.name!r} needs an image or a templateId")
        if self.gpu_count < 1:
            raise ValueError(f"pod {self.name!r}: gpu_count must be at least 1")

    def create_body(self, *, gpu_type: str, datacenter: str, cloud: str) -> dict[str, Any]:
        """The `CreatePodRequest` for one candidate: one GPU type in one datacenter."""
        body: dict[str, Any] = {
            "name": self.name,
            "gpu": {"id": gpu_type, "count": self.gpu_count},
            "cloud": cloud,
            "dataCenterIds": [datacenter],
            "ports": list(self.ports),
        }
        if self.image:
            body["image"] = self.image
        if self.template_id:
            body["templateId"] = self.template_id
        if self.env:
            body["env"] = dict(self.env)
        if self.container_disk_gb is not None:
            body["disk"] = self.container_disk_gb
        return body


def update_body(*, image: str, env: Mapping[str, str]) -> dict[str, Any]:
    """The `UpdatePodRequest` for an in-place image roll.

    A sent `env` REPLACES the pod's whole env, so the caller passes the complete env
    (the pod's current env merged with envFromSecret), never a delta.
    """
    return {"image": image, "env": dict(env)}
