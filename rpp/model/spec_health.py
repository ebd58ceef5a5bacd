"""The spec sections that judge: how pods are read, when one is replaced, when a release
goes on.

Where it sits: the model layer, beside `rpp.model.spec`, which composes these sections
into the RunPodPool spec (and re-exports them). `probe` and `prometheus` say how each
pod is read (rpp/observe/); `health` holds the rules that flag a pod for replacement
(each judged in its own file under rpp/decide/health/rules/, which reads its section of
`replaceWhen`); `rollout` holds how a new image is released: a canary judged against the
pods still on the old image (rpp/decide/release/canary.py), then the rest, `maxParallel`
at a time (rpp/decide/release/steps.py). Same conventions as every
section: frozen, camelCase keys, attribute docstrings that become the CRD's
descriptions.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rpp.model.spec_fields import Duration, Integer, Section


class Probe(Section):
    health_path: str = Field(default="/health", pattern=r"^/")
    """Path that answers 200 when healthy."""
    metrics_path: str = Field(default="/metrics", pattern=r"^/")
    """Prometheus metrics path."""
    token_param: str = "token"
    """Query parameter that carries the metrics token."""
    require_metric: str | None = None
    """A metric name the metrics page must contain."""
    timeout: Duration = 10.0
    """Per-request probe timeout; above the SlowScrape threshold."""


class Prometheus(Section):
    job: str
    """Scrape job name; replaces $job. Default: <pool>-pods."""
    latency_query: str | None = None
    """PromQL: average request time per pod, one series per runpod_pod label."""
    error_ratio_query: str | None = None
    """PromQL: 5xx share of requests per pod, one series per runpod_pod label."""
    request_rate_query: str | None = None
    """PromQL: requests per second per pod, one series per runpod_pod label; counts a
    canary's requests for rollout.canary.minRequests."""


class UnreachableRule(Section):
    duration: Duration = 120.0
    """Flag after the health or metrics probe fails this long."""


class SlowScrapeRule(Section):
    threshold: Duration = 2.0
    """A metrics probe slower than this is a breach."""
    duration: Duration = 600.0
    """Flag after breaching this long."""


class RelativeLatencyRule(Section):
    threshold: float = Field(default=4.0, gt=1)
    """Breach when a pod's average request time is above this many times the median of the
    other pods."""
    duration: Duration = 600.0
    """Flag after breaching this long."""


class ErrorRateRule(Section):
    threshold: float = Field(default=0.05, gt=0, le=1)
    """Breach when the 5xx share of requests is above this ratio."""
    duration: Duration = 300.0
    """Flag after breaching this long."""


class ReplaceWhen(Section):
    unreachable: UnreachableRule = Field(default_factory=UnreachableRule)
    """Unreachable rule."""
    slow_scrape: SlowScrapeRule = Field(default_factory=SlowScrapeRule)
    """SlowScrape rule."""
    relative_latency: RelativeLatencyRule = Field(default_factory=RelativeLatencyRule)
    """RelativeLatency rule; needs prometheus.latencyQuery."""
    error_rate: ErrorRateRule = Field(default_factory=ErrorRateRule)
    """ErrorRate rule; needs errorRatioQuery."""
    host_notice: bool = False
    """Replace pods whose machine has a RunPod note or maintenance window (otherwise only the
    HostNotice condition)."""


class Health(Section):
    warmup_timeout: Duration = 900.0
    """A new pod not passing 3 probes in a row by then is terminated."""
    create_listing_grace: Duration = 300.0
    """How long a pod RunPod answered 201 for may be missing from RunPod's pod list: until
    it is listed or this passes, it counts against limits.maxPods, the cost cap and the
    hour's creates, covers its need, and no other create goes out."""
    replace_when: ReplaceWhen = Field(default_factory=ReplaceWhen)
    """When a pod is flagged for replacement."""
    when_replacement_blocked: Literal["Keep", "TerminateFirst"] = "Keep"
    """What becomes of a flagged pod that still serves when its replacement cannot be
    created first (limits.maxPods, the cost cap, maxCreatesPerHour, the create backoff or
    no stock): Keep serves on with it, and the ReplacementBlocked condition names the pod,
    its rule and the cap; TerminateFirst drains and terminates it, and its replacement is
    created once the cap allows. A pod that serves nothing (dead, hung) is terminated
    first either way."""
    pool_wide_hold: Duration = 1800.0
    """How long PoolWideDegradation (every Ready pod degraded alike and together) keeps
    every pod from being replaced. Then the worst pod is replaced; once its replacement
    passes its probes the cause was not shared and the others are replaced as they are
    due. 30m outlasts most RunPod, network and dependency incidents (replacing pods for
    those only churns), while a truly dead pool bills at most this long for nothing."""


class Canary(Section):
    enabled: bool = True
    """Update one pod first (the canary) and judge it against the pods still on the old
    image before the others follow; false rolls without one (a baking canary passes)."""
    bake: Duration = 600.0
    """How long the canary serves, Ready and in nginx, before it can pass."""
    max_error_ratio_increase: float = Field(default=0.02, ge=0, le=1)
    """Fail the canary when its error ratio (prometheus.errorRatioQuery) is above the old
    pods' over the same window by more than this (0.02: two percentage points)."""
    max_latency_ratio: float = Field(default=1.5, gt=1)
    """Fail the canary when its latency (prometheus.latencyQuery) is above this many times
    the median of the old pods' over the same window."""
    min_requests: Integer = Field(default=100, ge=0, le=1_000_000_000)
    """Pass the canary only once it served this many requests during the bake (counted with
    prometheus.requestRateQuery); the bake goes on until then."""


class Rollout(Section):
    canary: Canary = Field(default_factory=Canary)
    """The first pod on a new image, judged against its peers before the rest follow."""
    max_parallel: Integer = Field(default=1, ge=1, le=256)
    """Pods drained and updated at once after the canary passed; more than one only while
    Ready stays at or above replicas.min and the pods the load needs."""
