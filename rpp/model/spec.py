"""The RunPodPool spec: every field, its type, default and documentation, in one model.

This module is the single source of truth for the spec. The loader
(`rpp.model.spec_load`) walks these dataclasses to parse and validate what a user wrote, and
`rpp.model.crd` walks the same dataclasses to generate the CustomResourceDefinition, so the
two cannot disagree. Each field's metadata (built by `spec_field`) carries its JSON
name, documentation, and the constraints both consumers enforce.

Decide code receives a fully resolved `RunPodPoolSpec`: derived defaults (namePrefix,
replicas.max, limits.maxPods, nginx names, prometheus.job) are filled in from the pool
name by the loader, so nothing downstream handles a missing value.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

API_GROUP = "runpodpool.ownego.com"
API_VERSION = "v1alpha1"
KIND = "RunPodPool"
PLURAL = "runpodpools"
SHORT_NAME = "rpp"

# RunPod pod ids are lowercase alphanumerics (14 today); a little slack for the future.
POD_ID_PATTERN = r"^[a-z0-9]{8,32}$"
# Pool names end up in ConfigMap, Service and pod names: a DNS-1123 label, kept short
# enough that "<pool>-nginx-config" still fits in 63 characters.
POOL_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
POOL_NAME_MAX = 50


class Mode(StrEnum):
    """What the controller may do with a pool (derived from paused, templateId, dryRun)."""

    OBSERVE = "Observe"
    DRY_RUN = "DryRun"
    MANAGE = "Manage"


class Cloud(StrEnum):
    SECURE = "SECURE"
    COMMUNITY = "COMMUNITY"


def spec_field(
    default: Any = dataclasses.MISSING,
    *,
    doc: str,
    factory: Any = dataclasses.MISSING,
    json: str | None = None,
    duration: bool = False,
    minimum: float | None = None,
    exclusive_minimum: float | None = None,
    maximum: float | None = None,
    enum: tuple[str, ...] | None = None,
    pattern: str | None = None,
    item_pattern: str | None = None,
    min_items: int | None = None,
    min_items_hint: str | None = None,
    derived: str | None = None,
    example: str | None = None,
) -> Any:
    """A dataclass field plus the metadata the loader and the CRD generator read.

    `derived` names the rule that fills the field when the user leaves it out (the
    value is then computed from the pool name or another field, not a constant);
    `duration` marks a float of seconds that users write as "150s"; `json` is the
    camelCase key when it differs from the attribute name.
    """
    meta = {
        "doc": doc,
        "json": json,
        "duration": duration,
        "minimum": minimum,
        "exclusive_minimum": exclusive_minimum,
        "maximum": maximum,
        "enum": enum,
        "pattern": pattern,
        "item_pattern": item_pattern,
        "min_items": min_items,
        "min_items_hint": min_items_hint,
        "derived": derived,
        "example": example,
    }
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True, kw_only=True)
class Replicas:
    min: int = spec_field(1, doc="Pods the pool keeps serving.", minimum=1)
    max: int = spec_field(
        doc="Most pods the autoscaler may ask for.", minimum=1, derived="replicas.min"
    )


@dataclass(frozen=True, kw_only=True)
class Autoscaling:
    enabled: bool = spec_field(False, doc="Scale between replicas.min and .max on `query`.")
    query: str | None = spec_field(
        None,
        doc="PromQL returning one value per loop (e.g. average queue per pod); "
        "$job is replaced by prometheus.job.",
    )
    target: float = spec_field(
        1.0, doc="The query's value per pod the pool aims for.", exclusive_minimum=0
    )
    scale_up_stabilization: float = spec_field(
        120.0,
        json="scaleUpStabilization",
        duration=True,
        doc="Grow only when every recommendation over this window is higher.",
    )
    scale_down_stabilization: float = spec_field(
        1800.0,
        json="scaleDownStabilization",
        duration=True,
        doc="Shrink to the highest recommendation over this window.",
    )


@dataclass(frozen=True, kw_only=True)
class Datacenters:
    allow: tuple[str, ...] = spec_field(
        factory=tuple,
        doc="Datacenters pods may be created in, in order of preference; required to create.",
        example="EU-RO-1",
    )
    deny: tuple[str, ...] = spec_field(factory=tuple, doc="Datacenters never used.")


@dataclass(frozen=True, kw_only=True)
class Limits:
    max_pods: int = spec_field(
        json="maxPods",
        minimum=0,
        derived="2 x replicas.min",
        doc="Hard cap on pool pods at any moment, replacements included.",
    )
    max_hourly_cost_usd: float = spec_field(
        0.0,
        json="maxHourlyCostUsd",
        minimum=0,
        doc="Hard cap on the pool's cost per hour in USD; 0 means never create.",
    )
    max_creates_per_hour: int = spec_field(
        3, json="maxCreatesPerHour", minimum=0, doc="Creates allowed in any hour."
    )
    estimated_pod_cost_usd: float = spec_field(
        1.0,
        json="estimatedPodCostUsd",
        minimum=0,
        doc="Price per hour assumed for a pod not created yet (checked against the cost cap).",
    )


@dataclass(frozen=True, kw_only=True)
class Drain:
    period: float = spec_field(
        150.0, duration=True, doc="How long a pod stays out of nginx before it goes."
    )


@dataclass(frozen=True, kw_only=True)
class Nginx:
    config_map: str = spec_field(
        json="configMap", derived="<pool>-nginx-config", doc="The static nginx ConfigMap."
    )
    slots_config_map: str = spec_field(
        json="slotsConfigMap",
        derived="<pool>-nginx-slots",
        doc="The ConfigMap only the controller writes: the slots nginx includes.",
    )
    service: str = spec_field(derived="<pool>", doc="The Service clients call.")
    base_port: int = spec_field(
        8081, json="basePort", minimum=1024, maximum=65535, doc="First slot port."
    )
    read_timeout: float = spec_field(
        120.0, json="readTimeout", duration=True, doc="nginx proxy_read_timeout for pods."
    )
    slot_ports: int = spec_field(
        4,
        json="slotPorts",
        minimum=1,
        maximum=256,
        doc="Slot ports nginx has, from basePort up; must cover replicas.max + 1.",
    )


@dataclass(frozen=True, kw_only=True)
class Probe:
    health_path: str = spec_field(
        "/health", json="healthPath", pattern=r"^/", doc="Path that answers 200 when healthy."
    )
    metrics_path: str = spec_field(
        "/metrics", json="metricsPath", pattern=r"^/", doc="Prometheus metrics path."
    )
    token_param: str = spec_field(
        "token", json="tokenParam", doc="Query parameter that carries the metrics token."
    )
    require_metric: str | None = spec_field(
        None, json="requireMetric", doc="A metric name the metrics page must contain."
    )
    timeout: float = spec_field(
        10.0, duration=True, doc="Per-request probe timeout; above the SlowScrape threshold."
    )


@dataclass(frozen=True, kw_only=True)
class Prometheus:
    job: str = spec_field(derived="<pool>-pods", doc="Scrape job name; replaces $job.")
    latency_query: str | None = spec_field(
        None,
        json="latencyQuery",
        doc="PromQL: average request time per pod, one series per runpod_pod label.",
    )
    error_ratio_query: str | None = spec_field(
        None,
        json="errorRatioQuery",
        doc="PromQL: 5xx share of requests per pod, one series per runpod_pod label.",
    )


@dataclass(frozen=True, kw_only=True)
class UnreachableRule:
    duration: float = spec_field(
        120.0, duration=True, doc="Flag after the health or metrics probe fails this long."
    )


@dataclass(frozen=True, kw_only=True)
class SlowScrapeRule:
    threshold: float = spec_field(
        2.0, duration=True, doc="A metrics probe slower than this is a breach."
    )
    duration: float = spec_field(600.0, duration=True, doc="Flag after breaching this long.")


@dataclass(frozen=True, kw_only=True)
class RelativeLatencyRule:
    threshold: float = spec_field(
        4.0,
        exclusive_minimum=1,
        doc="Breach when a pod's average request time is above this many times the "
        "median of the other pods.",
    )
    duration: float = spec_field(600.0, duration=True, doc="Flag after breaching this long.")


@dataclass(frozen=True, kw_only=True)
class ErrorRateRule:
    threshold: float = spec_field(
        0.05,
        exclusive_minimum=0,
        maximum=1,
        doc="Breach when the 5xx share of requests is above this ratio.",
    )
    duration: float = spec_field(300.0, duration=True, doc="Flag after breaching this long.")


@dataclass(frozen=True, kw_only=True)
class ReplaceWhen:
    unreachable: UnreachableRule = spec_field(factory=UnreachableRule, doc="Unreachable rule.")
    slow_scrape: SlowScrapeRule = spec_field(
        factory=SlowScrapeRule, json="slowScrape", doc="SlowScrape rule."
    )
    relative_latency: RelativeLatencyRule = spec_field(
        factory=RelativeLatencyRule,
        json="relativeLatency",
        doc="RelativeLatency rule; needs prometheus.latencyQuery.",
    )
    error_rate: ErrorRateRule = spec_field(
        factory=ErrorRateRule, json="errorRate", doc="ErrorRate rule; needs errorRatioQuery."
    )
    host_notice: bool = spec_field(
        False,
        json="hostNotice",
        doc="Replace pods whose machine has a RunPod note or maintenance window "
        "(otherwise only the HostNotice condition).",
    )


@dataclass(frozen=True, kw_only=True)
class Health:
    warmup_timeout: float = spec_field(
        900.0,
        json="warmupTimeout",
        duration=True,
        doc="A new pod not passing 3 probes in a row by then is terminated.",
    )
    replace_when: ReplaceWhen = spec_field(
        factory=ReplaceWhen, json="replaceWhen", doc="When a pod is flagged for replacement."
    )


@dataclass(frozen=True, kw_only=True)
class RunPodPoolSpec:
    """The whole spec of one pool, every default resolved."""

    paused: bool = spec_field(False, doc="Kill switch: no change from the next loop on.")
    dry_run: bool = spec_field(
        True, json="dryRun", doc="Plan only; set false to let the controller act (Manage)."
    )
    template_id: str | None = spec_field(
        None, json="templateId", doc="RunPod template pods are created from; none = Observe."
    )
    image: str | None = spec_field(
        None, doc="Container image; changing it rolls pods in place. None = the template's."
    )
    gpu_types: tuple[str, ...] = spec_field(
        factory=lambda: ("NVIDIA GeForce RTX 4090",),
        json="gpuTypes",
        min_items=1,
        min_items_hint="list at least one RunPod GPU type, e.g. NVIDIA GeForce RTX 4090",
        doc="GPU types, tried in order.",
    )
    cloud: str = spec_field("SECURE", enum=("SECURE", "COMMUNITY"), doc="RunPod cloud.")
    name_prefix: str = spec_field(
        json="namePrefix",
        derived="rpp-<pool>-",
        pattern=r"^[a-z0-9][-a-z0-9]*-$",
        doc="Pods named with this prefix are owned by the pool.",
    )
    adopt: tuple[str, ...] = spec_field(
        factory=tuple, item_pattern=POD_ID_PATTERN, doc="Existing RunPod pod ids to take over."
    )
    replicas: Replicas = spec_field(doc="Pool size.")
    autoscaling: Autoscaling = spec_field(factory=Autoscaling, doc="Autoscaling (off).")
    datacenters: Datacenters = spec_field(factory=Datacenters, doc="Where pods may run.")
    max_per_datacenter: int = spec_field(
        1, json="maxPerDatacenter", minimum=1, doc="Most pool pods in one datacenter."
    )
    limits: Limits = spec_field(doc="Hard caps that block creates.")
    drain: Drain = spec_field(factory=Drain, doc="Draining.")
    nginx: Nginx = spec_field(doc="The nginx in front of the pods.")
    env_from_secret: str | None = spec_field(
        None, json="envFromSecret", doc="Secret whose every key goes to the pods as env."
    )
    metrics_token_key: str | None = spec_field(
        None, json="metricsTokenKey", doc="Key in envFromSecret holding the metrics token."
    )
    port: int = spec_field(80, minimum=1, maximum=65535, doc="The pods' HTTP port.")
    probe: Probe = spec_field(factory=Probe, doc="How pods are probed.")
    prometheus: Prometheus = spec_field(doc="Per-pod Prometheus queries.")
    health: Health = spec_field(factory=Health, doc="Health rules.")

    @property
    def mode(self) -> Mode:
        """Observe when paused or without a template; DryRun by default; else Manage."""
        if self.paused or not self.template_id:
            return Mode.OBSERVE
        return Mode.DRY_RUN if self.dry_run else Mode.MANAGE


def json_name(f: dataclasses.Field[Any]) -> str:
    """The key users write for a dataclass field (camelCase)."""
    return f.metadata.get("json") or f.name


def derived_defaults(pool: str, *, replicas_min: int) -> dict[str, Any]:
    """Values of the derived fields, by dotted JSON path, for a pool of that name."""
    return {
        "namePrefix": f"rpp-{pool}-",
        "replicas.max": replicas_min,
        "limits.maxPods": 2 * replicas_min,
        "nginx.configMap": f"{pool}-nginx-config",
        "nginx.slotsConfigMap": f"{pool}-nginx-slots",
        "nginx.service": pool,
        "prometheus.job": f"{pool}-pods",
    }
