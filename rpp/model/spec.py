"""The RunPodPool spec: every field, its type, default and documentation, in one model.

Where it sits: the model layer, below everything. These frozen pydantic models (the
sections that judge pods and releases, probe to rollout, live in `rpp.model.spec_health`
and are re-exported here) are the single source of truth for the spec:
`rpp.model.spec_load` validates what a user wrote against them (and turns pydantic's
errors into the sentences `rpp validate` prints), and `rpp.model.crd` generates the
CustomResourceDefinition from their JSON schema, so the two cannot disagree. A rule
between fields is written twice, side by side in this module: in Python
(`cross_field_problems`) and as the CEL rule the API server checks
(`x-kubernetes-validations` in the class's config).

Decide code receives a fully resolved `RunPodPoolSpec`: derived defaults (namePrefix,
replicas.max, limits.maxPods, nginx names, prometheus.job) are filled in from the pool
name, which the loader passes as the validation context, so nothing downstream handles a
missing value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from enum import StrEnum
from typing import Any, Literal, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator

from rpp.model.durations import format_duration
from rpp.model.spec_fields import (
    NOT_BLANK,
    Duration,
    Integer,
    Names,
    PodIds,
    Query,
    Section,
    Text,
    cel,
    cel_converts,
    cel_text,
    integral,
    problems,
)
from rpp.model.spec_health import (
    Canary,
    ErrorRateRule,
    Health,
    Probe,
    Prometheus,
    RelativeLatencyRule,
    ReplaceWhen,
    Rollout,
    SlowScrapeRule,
    UnreachableRule,
)

API_GROUP = "runpodpool.ownego.com"
API_VERSION = "v1alpha1"
KIND = "RunPodPool"
PLURAL = "runpodpools"
SHORT_NAME = "rpp"
CATEGORIES = ("runpod",)

# Pool names end up in ConfigMap, Service and pod names: a DNS-1123 label, kept short
# enough that "<pool>-nginx-config" still fits in 63 characters.
POOL_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
POOL_NAME_MAX = 50
# Every pod needs a slot port and nginx has at most 256 (one kept for a replacement), so
# no pool grows past 255 pods: the bound also keeps numbers inside what the API server
# stores (an integer past 2^63 - 1 is refused there).
MOST_REPLICAS = 255


class Mode(StrEnum):
    """What the controller may do with a pool (derived from paused, templateId, dryRun)."""

    OBSERVE = "Observe"
    DRY_RUN = "DryRun"
    MANAGE = "Manage"


class Replicas(Section):
    model_config = cel(
        (
            "!has(self.max) || self.min <= self.max",
            "replicas.min must not be greater than replicas.max",
        )
    )

    min: Integer = Field(default=1, ge=1, le=MOST_REPLICAS)
    """Pods the pool keeps serving."""
    max: Integer = Field(ge=1, le=MOST_REPLICAS)
    """Most pods the autoscaler may ask for. Default: replicas.min."""


class Autoscaling(Section):
    model_config = cel(
        (
            "!self.enabled || (has(self.query) && self.query.matches("
            + cel_text(NOT_BLANK)
            + "))",
            "autoscaling.query is required when autoscaling is enabled",
        )
    )

    enabled: bool = False
    """Scale between replicas.min and .max on `query`."""
    query: Query | None = None
    """PromQL returning one value per loop (e.g. average queue per pod); $job is replaced by
    prometheus.job."""
    target: float = Field(default=1.0, gt=0)
    """The query's value per pod the pool aims for."""
    scale_up_stabilization: Duration = 120.0
    """Grow only when every recommendation over this window is higher."""
    scale_down_stabilization: Duration = 1800.0
    """Shrink to the highest recommendation over this window."""


class Datacenters(Section):
    model_config = cel(
        (
            "self.allow.all(dc, !(dc in self.deny))",
            "a datacenter cannot be both in datacenters.allow and datacenters.deny",
        )
    )

    allow: Names = Field(default=(), max_length=64)
    """Datacenters pods may be created in, in order of preference; required to create."""
    deny: Names = Field(default=(), max_length=64)
    """Datacenters never used."""


class Limits(Section):
    max_pods: Integer = Field(ge=0, le=2 * MOST_REPLICAS)
    """Hard cap on pool pods at any moment, replacements included. Default: 2 x replicas.min."""
    max_hourly_cost_usd: float = Field(default=0.0, ge=0)
    """Hard cap on the pool's cost per hour in USD; 0 means never create."""
    max_creates_per_hour: Integer = Field(default=3, ge=0, le=1000)
    """Creates allowed in any hour."""
    estimated_pod_cost_usd: float = Field(default=1.0, ge=0)
    """Price per hour assumed for a pod not created yet (checked against the cost cap)."""


class Drain(Section):
    period: Duration = 150.0
    """How long a pod stays out of nginx before it goes."""


class Nginx(Section):
    model_config = cel(
        (
            "self.basePort + self.slotPorts - 1 <= 65535",
            "nginx.basePort + nginx.slotPorts runs past port 65535",
        )
    )

    config_map: str
    """The static nginx ConfigMap. Default: <pool>-nginx-config."""
    slots_config_map: str
    """The ConfigMap only the controller writes: the slots nginx includes. Default:
    <pool>-nginx-slots."""
    service: str
    """The Service clients call. Default: <pool>."""
    base_port: Integer = Field(default=8081, ge=1024, le=65535)
    """First slot port."""
    read_timeout: Duration = 120.0
    """nginx proxy_read_timeout for pods."""
    slot_ports: Integer = Field(default=4, ge=1, le=256)
    """Slot ports nginx has, from basePort up; must cover replicas.max + 1."""


_TIMEOUT, _SLOW = "self.probe.timeout", "self.health.replaceWhen.slowScrape.threshold"


class RunPodPoolSpec(Section):
    """The whole spec of one pool, every default resolved."""

    model_config = cel(
        (
            "self.nginx.slotPorts >= "
            "(has(self.replicas.max) ? self.replicas.max : self.replicas.min) + 1",
            "nginx.slotPorts must be at least replicas.max + 1",
        ),
        (
            "self.paused || self.dryRun || !has(self.templateId) "
            "|| size(self.datacenters.allow) > 0",
            "datacenters.allow is required to create pods (dryRun: false)",
        ),
        (
            "!has(self.metricsTokenKey) || has(self.envFromSecret)",
            "metricsTokenKey needs envFromSecret: the token is read from that Secret",
        ),
        (
            "!has(self.limits.maxPods) || self.limits.maxPods >= self.replicas.min",
            "limits.maxPods must not be below replicas.min",
        ),
        (
            "self.rollout.maxParallel <= "
            "(has(self.replicas.max) ? self.replicas.max : self.replicas.min)",
            "rollout.maxParallel must not be above replicas.max",
        ),
        (
            # Only on durations that convert: a bad one is refused by its own rule, once.
            f"!{cel_converts(_TIMEOUT)} || !{cel_converts(_SLOW)} "
            f"|| duration({_TIMEOUT}) > duration({_SLOW})",
            "probe.timeout must be longer than health.replaceWhen.slowScrape.threshold",
        ),
    )

    paused: bool = False
    """Kill switch: no change from the next loop on."""
    dry_run: bool = True
    """Plan only; set false to let the controller act (Manage)."""
    template_id: Text | None = None
    """RunPod template pods are created from; none = Observe."""
    image: str | None = None
    """Container image; changing it rolls pods in place. None = the template's."""
    # minItems for the CRD: _some_gpu_type checks it, with a remedy.
    gpu_types: Names = Field(
        default=("NVIDIA GeForce RTX 4090",), max_length=32, json_schema_extra={"minItems": 1}
    )
    """GPU types, tried in order."""
    cloud: Literal["SECURE", "COMMUNITY"] = "SECURE"
    """RunPod cloud."""
    name_prefix: str = Field(pattern=r"^[a-z0-9][-a-z0-9]*-$")
    """Pods named with this prefix are owned by the pool. Default: rpp-<pool>-."""
    adopt: PodIds = Field(default=(), max_length=256)
    """Existing RunPod pod ids to take over."""
    replicas: Replicas
    """Pool size."""
    autoscaling: Autoscaling = Field(default_factory=Autoscaling)
    """Autoscaling (off)."""
    datacenters: Datacenters = Field(default_factory=Datacenters)
    """Where pods may run."""
    max_per_datacenter: Integer = Field(default=1, ge=1, le=MOST_REPLICAS)
    """Most pool pods in one datacenter."""
    limits: Limits
    """Hard caps that block creates."""
    drain: Drain = Field(default_factory=Drain)
    """Draining."""
    nginx: Nginx
    """The nginx in front of the pods."""
    env_from_secret: Text | None = None
    """Secret whose every key goes to the pods as env."""
    metrics_token_key: Text | None = None
    """Key in envFromSecret holding the metrics token."""
    port: Integer = Field(default=80, ge=1, le=65535)
    """The pods' HTTP port."""
    probe: Probe = Field(default_factory=Probe)
    """How pods are probed."""
    prometheus: Prometheus
    """Per-pod Prometheus queries."""
    health: Health = Field(default_factory=Health)
    """Health rules."""
    deletion_policy: Literal["Delete", "Retain"] = "Delete"
    """What deleting the pool does to its pods in Manage: Delete drains and terminates every
    owned pod before the pool goes (a finalizer holds it until then); Retain leaves them
    running and names them in an Event."""
    rollout: Rollout = Field(default_factory=Rollout)
    """How a new image rolls out: a canary judged against its peers, then the rest."""

    @property
    def mode(self) -> Mode:
        """Observe when paused or without a template; DryRun by default; else Manage."""
        if self.paused or not self.template_id:
            return Mode.OBSERVE
        return Mode.DRY_RUN if self.dry_run else Mode.MANAGE

    @field_validator("gpu_types", mode="before")
    @classmethod
    def _some_gpu_type(cls, raw: Any) -> Any:
        if raw == []:
            raise problems(
                ("", "is empty; list at least one RunPod GPU type, e.g. NVIDIA GeForce RTX 4090")
            )
        return raw

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, raw: Any, info: ValidationInfo) -> Any:
        """Fill what the user left out (or wrote as null) of the fields whose default
        follows from the pool name (the context) and replicas.min."""
        pool = (info.context or {}).get("pool")
        raw = {} if raw is None else raw
        if pool is None or not isinstance(raw, Mapping):
            return raw
        replicas = raw.get("replicas")
        size = integral(replicas.get("min")) if isinstance(replicas, Mapping) else None
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            size = 1  # invalid (and reported): derive from the default instead
        derived: dict[str, Any] = {
            "namePrefix": f"rpp-{pool}-",
            "replicas": {"max": size},
            "limits": {"maxPods": 2 * size},
            "nginx": {
                "configMap": f"{pool}-nginx-config",
                "slotsConfigMap": f"{pool}-nginx-slots",
                "service": pool,
            },
            "prometheus": {"job": f"{pool}-pods"},
        }
        out = dict(raw)
        for key, value in derived.items():
            given = out.get(key)
            if not isinstance(value, dict):
                out[key] = value if given is None else given
            elif given is None or isinstance(given, Mapping):
                given = given or {}
                out[key] = {**given, **{k: v for k, v in value.items() if given.get(k) is None}}
        return out

    @model_validator(mode="after")
    def _fields_agree(self) -> Self:
        found = tuple(cross_field_problems(self))
        if found:
            raise problems(*found)
        return self


def cross_field_problems(spec: RunPodPoolSpec) -> Iterator[tuple[str, str]]:
    """Rules between fields, as (".field.path", sentence); each also stands as a CEL rule
    above where the API server can check it."""
    r, lim, ngx = spec.replicas, spec.limits, spec.nginx
    if r.min > r.max:
        yield ".replicas", f"min ({r.min}) is greater than max ({r.max}); raise max or lower min"
    if ngx.slot_ports < r.max + 1:
        yield (
            ".nginx.slotPorts",
            f"{ngx.slot_ports} slot ports cannot hold replicas.max ({r.max}) plus one "
            f"replacement; set slotPorts to at least {r.max + 1}",
        )
    if ngx.base_port + ngx.slot_ports - 1 > 65535:
        yield ".nginx.slotPorts", "basePort + slotPorts runs past port 65535"
    for dc in [dc for dc in spec.datacenters.allow if dc in spec.datacenters.deny]:
        yield ".datacenters.deny", f"{dc!r} is both allowed and denied; remove it from one list"
    if spec.mode is Mode.MANAGE and not spec.datacenters.allow:
        yield (
            ".datacenters.allow",
            "required to create pods (dryRun: false); list the datacenters pods may use, "
            "in order of preference",
        )
    if lim.max_pods < r.min:
        yield (
            ".limits.maxPods",
            f"{lim.max_pods} is below replicas.min ({r.min}); the pool could never reach its size",
        )
    if spec.autoscaling.enabled and not re.search(NOT_BLANK, spec.autoscaling.query or ""):
        yield (
            ".autoscaling.query",
            "required when autoscaling is enabled; give a PromQL query returning one value",
        )
    if spec.metrics_token_key and not spec.env_from_secret:
        yield ".metricsTokenKey", "needs envFromSecret: the token is read from that Secret"
    if spec.rollout.max_parallel > r.max:
        yield (
            ".rollout.maxParallel",
            f"{spec.rollout.max_parallel} is above replicas.max ({r.max}): no more than "
            f"{r.max} pods can update at once; lower it",
        )
    slow = spec.health.replace_when.slow_scrape.threshold
    if spec.probe.timeout <= slow:
        yield (
            ".probe.timeout",
            f"{format_duration(spec.probe.timeout)} must be longer than "
            f"health.replaceWhen.slowScrape.threshold ({format_duration(slow)}), "
            "or slow scrapes would count as failures",
        )


__all__ = [
    "Autoscaling",
    "Canary",
    "Datacenters",
    "Drain",
    "ErrorRateRule",
    "Health",
    "Limits",
    "Mode",
    "Nginx",
    "Probe",
    "Prometheus",
    "RelativeLatencyRule",
    "ReplaceWhen",
    "Replicas",
    "Rollout",
    "RunPodPoolSpec",
    "SlowScrapeRule",
    "UnreachableRule",
    "cross_field_problems",
]
