"""RunPod's pod JSON in and out: REST v2 `Pod` -> `RunPodPod`, `PodRequest` -> create body.

The client calls these after a 2xx answer. Every field is read on its own
(rpp/adapters/runpod/reading.py): a field that does not fit the contract takes a safe
default and the pod is kept, marked `unreadable` with what was odd, so the pool that
owns it can judge it unknown and say so, and every other pool ignores it. Only a pod
without a usable id cannot be kept (no pool could tell it is theirs): a listing skips
it and says how many it skipped; a single-pod answer without one is a contract break
(`WireError`, reported by the client as `BadResponse`, or for a create as `Unknown`).
Only the fields the pool uses are read, so RunPod adding a field never matters.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rpp.adapters.clock import from_rfc3339
from rpp.adapters.runpod.reading import FieldReader, WireError, show
from rpp.model.documents import clip
from rpp.model.observations import PodStatus, RunPodPod

__all__ = ["PodListing", "PodRequest", "WireError", "pod_from_json", "pods_from_list"]

# RunPod pod ids are 14 lowercase alphanumerics today; anything id-like up to 64 is
# kept, so a longer id in the future still reads, and a megabyte "id" does not.
_POD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_MOST_GPUS = 64
_MOST_COST = 1e6  # USD per hour; more is not a price, and NaN would pass every cap


def _pod_id(obj: Any, where: str) -> str:
    if not isinstance(obj, Mapping):
        raise WireError(f"{where} is {show(obj)}, not a pod object")
    pod_id = obj.get("id")
    if not isinstance(pod_id, str) or not _POD_ID.fullmatch(pod_id):
        raise WireError(f"{where}.id is {show(pod_id)}, not a pod id")
    return pod_id


def _status(fields: FieldReader) -> PodStatus:
    text = fields.text("status", limit=64)
    if text is None:
        if fields.obj.get("status") is None:
            fields.odd("status", "is missing")
        return PodStatus.UNKNOWN
    try:
        status = PodStatus(text)
    except ValueError:
        status = PodStatus.UNKNOWN
    if status is PodStatus.UNKNOWN:
        fields.odd("status", f"{show(text)} is not a status this controller knows")
    return status


def _gpu(fields: FieldReader) -> tuple[str | None, int]:
    gpu = fields.mapping("gpu")
    if gpu is None:
        return None, 0
    inner = FieldReader(gpu, fields.where)
    gpu_type = inner.text("id", limit=256)
    count = inner.whole("count", least=0, most=_MOST_GPUS)
    for key in ("id", "count"):
        if gpu.get(key) is None:
            inner.odd(key, "is missing")
    fields.problems += [f"gpu.{line}" for line in inner.problems]
    return gpu_type, 1 if count is None else count


def _env(fields: FieldReader) -> dict[str, str]:
    env = fields.obj.get("env")
    if env is None:
        return {}
    if not isinstance(env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        # Never show env: its values are secrets.
        fields.odd("env", "is not a map of strings")
        return {}
    return dict(env)


def _created(fields: FieldReader) -> dt.datetime | None:
    text = fields.text("createdAt", limit=64)
    if text is None:
        return None
    try:
        return from_rfc3339(text)
    except (ValueError, OverflowError):
        fields.odd("createdAt", f"{show(text)} is not a timestamp")
        return None


def pod_from_json(obj: Any, *, where: str = "pod") -> RunPodPod:
    """One v2 `Pod` object as the record the pool uses; `unreadable` says what was odd.

    Raises WireError only when the object has no usable pod id.
    """
    pod_id = _pod_id(obj, where)
    fields = FieldReader(obj, f"{where}[{pod_id}]")
    name = fields.text("name", limit=256)
    if fields.obj.get("name") is None:
        fields.odd("name", "is missing")
    status = _status(fields)
    gpu_type, gpu_count = _gpu(fields)
    cost = fields.number("cost", least=0.0, most=_MOST_COST)
    return RunPodPod(
        id=pod_id,
        name=name or "",
        status=status,
        image=fields.text("image", limit=1024) or "",
        gpu_type=gpu_type,
        gpu_count=gpu_count,
        cloud=fields.text("cloud", limit=64),
        datacenter=fields.text("dataCenterId", limit=64),
        cost_per_hr=0.0 if cost is None else cost,
        created_at=_created(fields),
        template_id=fields.text("template", limit=256),
        env=_env(fields),
        unreadable=fields.summary(),
    )


@dataclass(frozen=True)
class PodListing:
    """A `ListPodsResponse`: the pods read (some marked unreadable) and those skipped.

    `skipped` has one line per entry that had no usable pod id (or repeated one), so no
    pool could own it; `unreadable` counts both kinds of odd pod, for the metric.
    """

    pods: tuple[RunPodPod, ...]
    skipped: tuple[str, ...] = ()

    @property
    def unreadable(self) -> int:
        return len(self.skipped) + sum(1 for p in self.pods if p.unreadable is not None)

    def describe_odd(self, shown: int = 3) -> str:
        """The first odd pods in words, for one log line."""
        lines = [
            *self.skipped,
            *(f"pod {p.id}: {p.unreadable}" for p in self.pods if p.unreadable),
        ]
        more = f" (and {len(lines) - shown} more)" if len(lines) > shown else ""
        return clip("; ".join(lines[:shown]), 600) + more


def pods_from_list(obj: Any) -> PodListing:
    """`ListPodsResponse` -> pods, in RunPod's order; WireError only without a `pods` array."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("pods"), list):
        raise WireError("list response has no 'pods' array")
    pods: list[RunPodPod] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for i, item in enumerate(obj["pods"]):
        where = f"pods[{i}]"
        try:
            pod = pod_from_json(item, where=where)
        except WireError as err:
            skipped.append(str(err))
            continue
        if pod.id in seen:
            skipped.append(f"{where} repeats pod id {pod.id}")
            continue
        seen.add(pod.id)
        pods.append(pod)
    return PodListing(tuple(pods), tuple(skipped))


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
