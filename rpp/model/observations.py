"""Observations: the facts one loop gathered, as plain immutable data.

This is the boundary between observe and decide. Adapters (the RunPod client, the
prober, the Prometheus client, the Kubernetes adapter) produce these records; decide
code and the member machines consume them and never see an HTTP response, a client
object or the clock. Nothing in here is secret except `RunPodPod.env`, which exists so
an in-place update can send the pod's complete env back; its `repr` hides the values
so a logged observation never leaks it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from rpp.model.timestamps import from_rfc3339


class PodStatus(StrEnum):
    """RunPod's desiredStatus/status values for a pod (REST v2 `PodStatus`)."""

    PROVISIONING = "PROVISIONING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    EXITED = "EXITED"
    ERROR = "ERROR"
    TERMINATED = "TERMINATED"
    UNKNOWN = "UNKNOWN"
    """Not RunPod's: a status value this controller does not know (or none at all);
    `RunPodPod.unreadable` says what RunPod sent."""


@dataclass(frozen=True)
class RunPodPod:
    """One pod as RunPod lists it (`GET /v2/pods`), reduced to what the pool uses."""

    id: str
    name: str
    status: PodStatus
    image: str
    gpu_type: str | None
    gpu_count: int
    cloud: str | None
    datacenter: str | None
    cost_per_hr: float
    created_at: dt.datetime | None
    template_id: str | None = None
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    unreadable: str | None = None
    """What in RunPod's answer for this pod did not fit (field and value, cut short);
    None when every field read. The odd fields hold safe defaults, so the pool that
    owns such a pod keeps its record's facts and acts on nothing RunPod said of it."""


@dataclass(frozen=True)
class HostNotice:
    """RunPod's note or maintenance window on the machine that runs a pod (GraphQL)."""

    note: str | None = None
    maintenance_start: dt.datetime | None = None
    maintenance_end: dt.datetime | None = None
    maintenance_note: str | None = None

    @property
    def active(self) -> bool:
        """Any non-empty note or any maintenance window counts as a notice."""
        return bool(
            (self.note and self.note.strip())
            or (self.maintenance_note and self.maintenance_note.strip())
            or self.maintenance_start
            or self.maintenance_end
        )

    def describe(self) -> str:
        parts = []
        if self.note and self.note.strip():
            parts.append(f"machine note: {self.note.strip()}")
        if self.maintenance_start or self.maintenance_end or self.maintenance_note:
            start, end = self.maintenance_start or "?", self.maintenance_end or "?"
            window = f"maintenance {start} to {end}"
            if self.maintenance_note:
                window += f" ({self.maintenance_note.strip()})"
            parts.append(window)
        return "; ".join(parts)


@dataclass(frozen=True)
class ProbeResult:
    """One probe of one pod through its proxy URL: the health path, then the metrics path.

    `passed` is the verdict the warm-up streak and the Unreachable rule use: the health
    path answered 200 and the metrics path answered 200 (and carried the required
    metric, when the pool names one). `error` is a short human text and never contains
    the metrics token. Latencies are seconds; None when that request did not complete.
    `hard_failures` counts the probes in a row of this loop that failed the way a dead,
    hung or deleted pod does: no connection, no answer within the probe timeout, or
    RunPod's proxy answering 404, 502 or 503 (a slow or wrong answer is no hard
    failure). It is 2 when a wired pod's hard failure was probed again at once and
    failed hard again (rpp/observe/prober.py); two in a row quarantine a wired pod.
    """

    passed: bool
    health_ok: bool
    metrics_ok: bool
    health_latency_s: float | None
    metrics_latency_s: float | None
    error: str | None = None
    process_start: float | None = None  # epoch seconds, read from the pod's own metrics
    hard_failures: int = 0

    @property
    def hard_failure(self) -> bool:
        return self.hard_failures > 0


@dataclass(frozen=True)
class PodMetrics:
    """Per-pod values from Prometheus for this loop; None means no data for that pod.
    Every value is finite: observe turns NaN and infinities into no data."""

    latency_s: float | None = None
    error_ratio: float | None = None
    request_rate: float | None = None  # requests per second (prometheus.requestRateQuery)


@dataclass(frozen=True)
class PrometheusReading:
    """The pool's Prometheus queries for one loop.

    `problems` says, one line per query (`latencyQuery: ...`), why a query gave nothing
    usable (no PROMETHEUS_URL, Prometheus unreachable, a query error, an answer of the
    wrong shape, or an answer without a usable value), so the pool can raise a condition
    naming the rule that is off this loop. `no_data` names the queries (by spec field)
    that Prometheus did answer, but without a usable value (no series, NaN, no
    `runpod_pod` label): that is expected while no pod serves, and a misconfiguration
    once pods do, so decide tells the two apart. A problem line whose field is not in
    `no_data` is a query that could not be asked.
    """

    per_pod: Mapping[str, PodMetrics] = field(default_factory=dict)
    autoscaling_value: float | None = None
    problems: tuple[str, ...] = ()
    no_data: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SecretState:
    """What the loop learned about the pool's env Secret, without its values.

    `configured` is False when the pool names no envFromSecret. `problem` says why the
    pool cannot act (Secret missing, metrics token key absent, forbidden to read it).
    The token itself travels to the prober separately and never lands in decide.
    """

    configured: bool = False
    problem: str | None = None


@dataclass(frozen=True)
class PoolObject:
    """What the pool object's own metadata says.

    `deleting_since` is its deletionTimestamp (someone deleted it and a finalizer holds
    it); `finalizer` says whether it carries the controller's finalizer.
    """

    deleting_since: dt.datetime | None = None
    finalizer: bool = False

    @classmethod
    def from_object(cls, obj: Mapping[str, Any], *, finalizer: str) -> PoolObject:
        """From the pool as the API server returns it; `finalizer` is the controller's."""
        meta = obj.get("metadata") or {}
        deleting = meta.get("deletionTimestamp")
        since = None
        if deleting:
            try:
                since = from_rfc3339(str(deleting))
            except ValueError:  # the API server writes RFC 3339; set at all means deleted
                since = dt.datetime.fromtimestamp(0, dt.UTC)
        held = finalizer in (meta.get("finalizers") or [])
        return cls(deleting_since=since, finalizer=held)


@dataclass(frozen=True)
class StatusWrites:
    """How this controller process's writes of the pool's status have gone lately.

    Kept in memory by the reconciler (rpp/controller/status_carry.py), never stored:
    `failed` writes (each attempt the API server refused, a 409 or any error) since
    `since` and the last `error`, none while writes land. `ahead_failed`: this loop's
    write-ahead (rpp/decide/ledger/intents.py) did not land, so the loop is decided again with
    only what is safe to repeat (rpp/decide/ledger/write_failures.py); `keep_still` names the
    members whose next step needs its write-ahead and must wait for one.
    """

    since: dt.datetime | None = None
    failed: int = 0
    error: str | None = None
    ahead_failed: bool = False
    keep_still: frozenset[str] = frozenset()

    @property
    def failing(self) -> bool:
        return self.failed > 0


@dataclass(frozen=True)
class RunPodKeySource:
    """Where a RunPod key comes from, to name the key without its value.

    `variable` is the setting that gives it (RUNPOD_API_KEY, or RUNPOD_API_KEY_FILE with
    its `path`, read again every loop). `unreadable` says why that file cannot be used
    right now (gone, unreadable, not a key); the key last read from it is still the one
    sent.
    """

    variable: str
    path: str | None = None
    unreadable: str | None = None

    @property
    def rereads(self) -> bool:
        """The key is read again every loop: a fixed key is used without a restart."""
        return self.path is not None

    def describe(self) -> str:
        """`the controller's key, from RUNPOD_API_KEY_FILE=/path`: which key, not what."""
        where = self.variable if self.path is None else f"{self.variable}={self.path}"
        return f"the controller's key, from {where}"


@dataclass(frozen=True)
class RefusedKey:
    """RunPod refused the key this loop's pod listing was asked with (401 or 403).

    Carried beside `runpod_error` so decide names which key was refused and what to do
    (NotActing RunPodKeyRefused) instead of calling RunPod unavailable.
    """

    source: RunPodKeySource
    status: int


@dataclass(frozen=True)
class BillingRecord:
    """What RunPod billed one pod in one bucket (`GET /v2/billing/pods`), in USD.
    The bucket is [start, end): an hour, as the controller asks for them."""

    pod_id: str
    start: dt.datetime
    end: dt.datetime
    amount: float


@dataclass(frozen=True)
class BillingReading:
    """The account's pod billing as read this loop (rpp/observe/billing.py): hourly
    records from the start of the month to `read_at`. It is read at most once per 10
    minutes; other loops carry none. A read that failed has no records and no `read_at`,
    and `error` says why: each pool keeps its last figures and shows the error."""

    records: tuple[BillingRecord, ...] = ()
    read_at: dt.datetime | None = None
    error: str | None = None


@dataclass(frozen=True)
class PoolObservation:
    """Everything observe gathered for one pool in one loop.

    `pods` is the whole RunPod listing of this loop (one call serves every pool); decide
    keeps the pool's own pods. None means the listing failed, and `runpod_error` says
    why: without it the pool judges nothing and does not act (NotActing).
    `slots` is the slots ConfigMap's data, None when it does not exist; `slots_error`
    is set when it could not be read at all.
    """

    pods: tuple[RunPodPod, ...] | None
    runpod_error: str | None = None
    refused_key: RefusedKey | None = None
    """Set when the listing failed because RunPod refused the key (401 or 403)."""
    notices: Mapping[str, HostNotice] | None = None
    notices_error: str | None = None
    probes: Mapping[str, ProbeResult] = field(default_factory=dict)
    prometheus: PrometheusReading = field(
        default_factory=lambda: PrometheusReading(problems=("not queried",))
    )
    slots: Mapping[str, str] | None = None
    slots_error: str | None = None
    secret: SecretState = field(default_factory=SecretState)
    pool: PoolObject = field(default_factory=PoolObject)
    billing: BillingReading | None = None
    """The account's pod billing, when this loop read it (every 10 minutes); None in the
    other loops. Decide sums the pool's own pods' records into status.spend."""
    other_controller: str | None = None
    """What this loop saw of another controller writing the pool, in one sentence (its
    status write, or creates this controller did not make); None when nothing."""
    status_writes: StatusWrites = field(default_factory=StatusWrites)
    writer: str | None = None
    """Who decides: this controller process's identity (its leader Lease holder identity,
    written as status.writer). The pods it creates carry a tag of it in their names, so
    two controllers acting at once never ask for one name (rpp/decide/ownership.py);
    None where the process has no identity (a reconciler built without one, in tests)."""
