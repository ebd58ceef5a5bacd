"""The fake cloud's records: pods, stock entries, machine notices, recorded calls.

Plain data shared by the model (`cloud`), its HTTP face (`cloud_api`, `cloud_render`)
and the proxy, plus the `PodServer` protocol a fake inference pod implements. Import
them from `rpp.sim.cloud`, which re-exports every name.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from rpp.model.observations import PodStatus
from rpp.sim.asgi_io import Reply, Request


class CloudError(Exception):
    """What the fake API answers as problem+json: RunPod's status and wording."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        title: str | None = None,
        errors: list[str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.title = title
        self.errors = errors


@dataclass
class FakePodInfo:
    """A pod as its fake inference server sees it. The cloud keeps it current: a PATCH
    updates `image` and `env` here before calling the server's `restart`."""

    pod_id: str
    name: str
    image: str
    gpu_type: str
    gpu_count: int
    datacenter: str
    cloud: str
    ports: tuple[str, ...]
    created_at: dt.datetime
    started_at: dt.datetime  # when the container starts (the pod turns RUNNING)
    env: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def http_ports(self) -> list[int]:
        """Ports RunPod's proxy forwards: only the ones declared `<port>/http`."""
        return [int(p.split("/")[0]) for p in self.ports if p.endswith("/http")]


@dataclass(frozen=True)
class ImageBehaviour:
    """How a pod behaves on one image (`cloud.images` of a scenario): a release to rehearse.

    `error_ratio` is the share of app requests that answer 500, `latency_s` how long an
    app request takes (None: the service's usual time), `start_fails` a container that
    starts but whose service never answers (the proxy's 502), as a release that crashes
    on start does. The health and metrics paths answer at once either way, so a release
    that only fails or slows real requests passes its probes.
    """

    error_ratio: float = 0.0
    latency_s: float | None = None
    start_fails: bool = False


class PodServer(Protocol):
    """The fake service in a pod (rpp.sim.inference.FakeInferencePod): a responder.

    The proxy answers 502 while `is_serving` is False (the service died), or when
    `respond` raises (e.g. ConnectionRefusedError: nothing listens).
    """

    async def respond(self, request: Request) -> Reply: ...

    @property
    def is_serving(self) -> bool:
        """False once the service died or the pod stopped."""

    def restart(self, now: dt.datetime) -> None:
        """The container restarted (PATCH, restart, start): a new process from `now`."""

    def stop(self) -> None:
        """The pod stopped or was terminated."""

    def run_image(self, behaviour: ImageBehaviour | None) -> None:
        """The container now runs an image that behaves so (None: as the service does)."""


PodServerFactory = Callable[[FakePodInfo], PodServer]


@dataclass
class StockEntry:
    count: int
    cost_per_hr: float


@dataclass
class MachineNotice:
    """RunPod's note and maintenance window on a pod's machine (times as RunPod may
    send them: a datetime renders as ISO text, a number stays an epoch number)."""

    note: str | None = None
    maintenance_start: dt.datetime | float | str | None = None
    maintenance_end: dt.datetime | float | str | None = None
    maintenance_note: str | None = None


@dataclass
class FakePod:
    info: FakePodInfo
    cost_per_hr: float
    disk: int = 20
    args: str = ""
    locked: bool = False
    boot_started_at: dt.datetime | None = None  # None: stopped (EXITED) or ERROR
    error: bool = False
    server: PodServer | None = None
    notice: MachineNotice = field(default_factory=MachineNotice)
    # RunPod's list and GET show the pod from then on (cloud.listingLag); None: at once
    listed_from: dt.datetime | None = None


class Call(NamedTuple):
    """One request the fake API received, for "no write reached RunPod" assertions."""

    operation: str  # a RunPodOperation, or "unknown" for a request no route serves
    method: str
    path: str


# Used when a stock entry is set without a price: RunPod's list prices, roughly.
DEFAULT_PRICE_PER_HR = {
    "NVIDIA GeForce RTX 4090": 0.69,
    "NVIDIA RTX A6000": 0.49,
    "NVIDIA L40S": 0.86,
    "NVIDIA A100 80GB PCIe": 1.64,
    "NVIDIA H100 80GB HBM3": 2.69,
    "NVIDIA H200": 3.59,
}


@dataclass
class MinuteQuota:
    """RunPod's per-minute request quota, on the cloud's clock."""

    limit: int
    start: dt.datetime | None = None
    used: int = 0

    def take(self, now: dt.datetime) -> tuple[bool, int, int]:
        """(allowed, remaining after this request, seconds until the window resets)."""
        if self.start is None or (now - self.start).total_seconds() >= 60:
            self.start, self.used = now, 0
        reset = max(int(60 - (now - self.start).total_seconds()), 1)
        if self.used >= self.limit:
            return False, 0, reset
        self.used += 1
        return True, self.limit - self.used, reset


def actions_for(status: PodStatus) -> tuple[str, ...]:
    """The actions RunPod allows in a status (the Pod's `actions` field)."""
    if status is PodStatus.RUNNING:
        return ("stop", "restart", "terminate")
    if status in (PodStatus.EXITED, PodStatus.ERROR):
        return ("start", "terminate")
    if status in (PodStatus.PROVISIONING, PodStatus.STARTING):
        return ("stop", "terminate")
    return ()


@dataclass
class BilledSpan:
    """One pod's life as RunPod bills it: from its create to its terminate (None: still
    running), at its price per hour. The fake bills a pod for its whole life at that one
    price, stopped or not (RunPod bills a stopped pod's disk only; the pool stops none)."""

    pod_id: str
    start: dt.datetime
    cost_per_hr: float
    end: dt.datetime | None = None


class PodBill(NamedTuple):
    """What one pod cost in one bucket [start, end), in USD (a listPodBilling record)."""

    pod_id: str
    start: dt.datetime
    end: dt.datetime
    amount: float


BUCKETS = {"hour": dt.timedelta(hours=1), "day": dt.timedelta(days=1)}
"""The bucket sizes the fake bills in (RunPod's week, month and year it does not)."""


def bucket_start(when: dt.datetime, size: str) -> dt.datetime:
    """The start of the bucket `when` falls in (UTC): RunPod snaps a window's start so."""
    hour = when.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)
    return hour if size == "hour" else hour.replace(hour=0)


def pod_bills(
    spans: list[BilledSpan],
    *,
    start: dt.datetime,
    end: dt.datetime,
    size: str,
    now: dt.datetime,
    pod_id: str | None = None,
) -> list[PodBill]:
    """Each pod's cost per bucket in [start, end), billed up to `now` (the bucket running
    now holds what was used so far); buckets a pod did not run in have no record."""
    step = BUCKETS[size]
    bills: list[PodBill] = []
    bucket = bucket_start(start, size)
    while bucket < end and bucket < now:
        upper = bucket + step
        for span in spans:
            if pod_id is not None and span.pod_id != pod_id:
                continue
            ran_from = max(span.start, bucket)
            ran_to = min(span.end or now, upper, now)
            if ran_to > ran_from:
                hours = (ran_to - ran_from).total_seconds() / 3600
                amount = round(span.cost_per_hr * hours, 6)
                bills.append(PodBill(span.pod_id, bucket, upper, amount))
        bucket = upper
    return bills
