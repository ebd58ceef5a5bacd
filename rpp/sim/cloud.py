"""The fake RunPod cloud: one in-memory model of stock, pods and machines.

The simulator, the fast tests and `rpp fake-runpod` all run the real RunPod client
against this model, through `cloud_api` (REST v2 + GraphQL) and `proxy` (the
`{podId}-{port}.proxy.runpod.net` routing). It is the "world" side of
observe -> decide -> act: never imported by controller code.

What it models, and what it leaves out on purpose:
- Stock and price per (datacenter, GPU type, cloud). A create takes `gpu.count` GPUs
  from the first preferred datacenter with enough, a delete gives them back, and the
  catalog's NONE/LOW/MEDIUM/HIGH levels are derived from the counts. Stock can be
  changed now (`set_stock`) or at a time on the clock (`schedule_stock`).
- Pod lifecycle PROVISIONING -> STARTING -> RUNNING, computed from the injected clock
  (never from sleeps), so the simulator moves hours of pod life in milliseconds.
- PATCH keeps the pod on its machine and GPU, replaces env wholesale when env is
  sent, and restarts the container; `startedAt` does not move, as on RunPod.
- Stop keeps the pod's GPU reserved (RunPod may lose it; the pool never stops pods).
- Machine notices per pod, for the GraphQL notice query.
- Billing (listPodBilling): every pod's life from create to terminate at its price,
  split into hour or day buckets (`billed`, rpp/sim/cloud_model.py `pod_bills`).
- Per-image behaviour (`images`): every container started on an image listed there
  errors, slows down or fails to start as that entry says, so a scenario can describe
  a bad release and watch the pool release it.
- Pod ids like RunPod's (14 lowercase alphanumerics), from a seeded generator, so a
  simulator run is reproducible.
- A listing lag (`listing_lag`, a scenario's `cloud.listingLag`, or a `ListingLag`
  fault on one create): a created pod answers 201 with its id at once, but the pod
  list, GET /pods/{id} and the notice query show it only that many seconds later. It
  bills, boots and serves through the proxy meanwhile.

Each pod may get a `PodServer` (the fake inference service) from a factory; the proxy
sends that pod's traffic to it while the pod is RUNNING.
"""

from __future__ import annotations

import datetime as dt
import random
import string
from collections.abc import Iterable, Mapping
from typing import Any

from rpp.adapters.clock import Clock
from rpp.model.observations import PodStatus
from rpp.model.runpod_operations import WRITES
from rpp.sim.cloud_model import (
    DEFAULT_PRICE_PER_HR,
    BilledSpan,
    Call,
    CloudError,
    FakePod,
    FakePodInfo,
    ImageBehaviour,
    MachineNotice,
    MinuteQuota,
    PodServer,
    PodServerFactory,
    StockEntry,
    actions_for,
)
from rpp.sim.faults import NO_CAPACITY_DETAIL, FaultQueue

POD_ID_LENGTH = 14
_ID_ALPHABET = string.ascii_lowercase + string.digits

__all__ = [
    "DEFAULT_PRICE_PER_HR",
    "BilledSpan",
    "Call",
    "CloudError",
    "FakeCloud",
    "FakePod",
    "FakePodInfo",
    "ImageBehaviour",
    "MachineNotice",
    "MinuteQuota",
    "PodServer",
    "PodServerFactory",
    "StockEntry",
    "actions_for",
]


class FakeCloud:
    """RunPod's pods, stock and machines, on a clock the caller controls."""

    def __init__(
        self,
        *,
        clock: Clock,
        boot_time: float = 60.0,
        provisioning_time: float | None = None,
        seed: int = 0,
        pod_server_factory: PodServerFactory | None = None,
        accepted_key: str | None = None,
        accepted_keys: Iterable[str] | None = None,
        rate_limit_per_minute: int | None = None,
    ) -> None:
        if boot_time < 0 or (provisioning_time is not None and provisioning_time < 0):
            raise ValueError("boot and provisioning times must not be negative")
        self.clock = clock
        self.boot_time = boot_time
        self.provisioning_time = min(
            boot_time / 4 if provisioning_time is None else provisioning_time, boot_time
        )
        self.pod_server_factory = pod_server_factory
        # None: any non-empty bearer key works, as in the simulator's worlds.
        self.accepted_keys: frozenset[str] | None = None
        if accepted_key is not None or accepted_keys is not None:
            self.accepted_keys = frozenset(
                (*(accepted_keys or ()), *(() if accepted_key is None else (accepted_key,)))
            )
        self.balance: float | None = None  # None: unlimited; <= 0: creates get 402
        self.rate_limit_per_minute = rate_limit_per_minute
        self.quota = MinuteQuota(rate_limit_per_minute) if rate_limit_per_minute else None
        self.listing_lag = 0.0  # seconds between a create's 201 and its pod being listed
        self.next_listing_lag: float | None = None  # for the next create only (a fault)
        self.faults = FaultQueue()
        self.calls: list[Call] = []
        self.stock: dict[tuple[str, str, str], StockEntry] = {}
        self.templates: dict[str, dict[str, Any]] = {}
        self.pods: dict[str, FakePod] = {}
        # Every pod's life as billed, terminated ones included (listPodBilling).
        self.billed: list[BilledSpan] = []
        self.images: dict[str, ImageBehaviour] = {}
        self._schedule: list[tuple[dt.datetime, tuple[str, str, str], int]] = []
        self._rng = random.Random(seed)

    # ---- keys -------------------------------------------------------------------------

    def accepts(self, key: str) -> bool:
        """RunPod's check of a bearer key: a key outside `accepted_keys` (revoked,
        mistyped) gets 401. Several pass at once, as while a rotated key's old one is
        not revoked yet; with no set, any non-empty key passes."""
        return bool(key) and (self.accepted_keys is None or key in self.accepted_keys)

    # ---- stock ------------------------------------------------------------------------

    def set_stock(
        self,
        datacenter: str,
        gpu_type: str,
        cloud: str,
        count: int,
        cost_per_hr: float | None = None,
    ) -> None:
        """Free GPUs of one type in one datacenter and cloud, from now on."""
        if count < 0:
            raise ValueError(f"stock count for {gpu_type} in {datacenter} must be >= 0")
        key = (datacenter, gpu_type, cloud)
        old = self.stock.get(key)
        price = cost_per_hr if cost_per_hr is not None else old.cost_per_hr if old else None
        if price is None:
            price = DEFAULT_PRICE_PER_HR.get(gpu_type, 0.5)
        self.stock[key] = StockEntry(count=count, cost_per_hr=price)

    def schedule_stock(
        self, at: dt.datetime, datacenter: str, gpu_type: str, cloud: str, count: int
    ) -> None:
        """Set the stock at a time on the clock (a stock-out, a restock)."""
        self._schedule.append((at, (datacenter, gpu_type, cloud), count))
        self._schedule.sort(key=lambda item: item[0])

    def stock_count(self, datacenter: str, gpu_type: str, cloud: str) -> int:
        self.tick()
        entry = self.stock.get((datacenter, gpu_type, cloud))
        return entry.count if entry else 0

    def tick(self) -> None:
        """Apply the stock changes whose time has come; every request calls this."""
        now = self.clock.now()
        while self._schedule and self._schedule[0][0] <= now:
            _, (dc, gpu, cloud), count = self._schedule.pop(0)
            self.set_stock(dc, gpu, cloud, count)

    def add_template(
        self,
        template_id: str,
        *,
        image: str,
        env: Mapping[str, str] | None = None,
        ports: Iterable[str] = ("80/http",),
    ) -> None:
        self.templates[template_id] = {"image": image, "env": dict(env or {}), "ports": [*ports]}

    # ---- lifecycle --------------------------------------------------------------------

    def status(self, pod: FakePod) -> PodStatus:
        if pod.error:
            return PodStatus.ERROR
        if pod.boot_started_at is None:
            return PodStatus.EXITED
        elapsed = (self.clock.now() - pod.boot_started_at).total_seconds()
        if elapsed < self.provisioning_time:
            return PodStatus.PROVISIONING
        if elapsed < self.boot_time:
            return PodStatus.STARTING
        return PodStatus.RUNNING

    def _new_id(self) -> str:
        while True:
            pod_id = "".join(self._rng.choice(_ID_ALPHABET) for _ in range(POD_ID_LENGTH))
            if pod_id not in self.pods:
                return pod_id

    def get(self, pod_id: str) -> FakePod:
        pod = self.pods.get(pod_id)
        if pod is None:
            raise CloudError(404, f"Pod {pod_id} not found.", title="Not Found")
        return pod

    def listed(self, pod: FakePod) -> bool:
        """RunPod's reads show the pod now (its listing lag, if any, is over)."""
        return pod.listed_from is None or self.clock.now() >= pod.listed_from

    def listed_pods(self) -> list[FakePod]:
        """The pods RunPod's list shows now: every pod but those still in their lag."""
        return [p for p in self.pods.values() if self.listed(p)]

    def get_listed(self, pod_id: str) -> FakePod:
        """GET /pods/{id}: 404 for a pod in its listing lag, as for one that is gone."""
        pod = self.get(pod_id)
        if not self.listed(pod):
            raise CloudError(404, f"Pod {pod_id} not found.", title="Not Found")
        return pod

    def create_pod(self, body: Mapping[str, Any]) -> FakePod:
        """Place a pod for a create body that passed contract checks (see cloud_requests)."""
        self.tick()
        if self.balance is not None and self.balance <= 0:
            raise CloudError(
                402,
                "Insufficient balance. Add credits to your account to deploy pods.",
                title="Payment Required",
            )
        template: Mapping[str, Any] = {}
        if "templateId" in body:
            template = self.templates.get(body["templateId"]) or {}
            if not template:
                raise CloudError(
                    404, f"Template {body['templateId']} not found.", title="Not Found"
                )
        gpu = body["gpu"]
        gpu_type, count = gpu["id"], int(gpu.get("count", 1))
        cloud = body.get("cloud", "SECURE")
        if not any(key[1] == gpu_type for key in self.stock):
            raise CloudError(400, f"Invalid GPU type id: {gpu_type}.", title="Bad Request")
        wanted = body.get("dataCenterIds") or []
        offered = [key for key in self.stock if key[1] == gpu_type and key[2] == cloud]
        ordered = [k for dc in wanted for k in offered if k[0] == dc] if wanted else offered
        key = next((k for k in ordered if self.stock[k].count >= count), None)
        if key is None:
            raise CloudError(400, NO_CAPACITY_DETAIL, title="Bad Request")
        entry = self.stock[key]
        entry.count -= count
        env = {**template.get("env", {}), **body.get("env", {})}
        lag = self.listing_lag if self.next_listing_lag is None else self.next_listing_lag
        self.next_listing_lag = None
        pod = self._place(
            name=body["name"],
            image=body.get("image") or template.get("image", ""),
            env=env,
            ports=tuple(body.get("ports", template.get("ports", []))),
            gpu_type=gpu_type,
            gpu_count=count,
            datacenter=key[0],
            cloud=cloud,
            cost_per_hr=round(entry.cost_per_hr * count, 4),
            disk=int(body.get("disk", 20)),
        )
        if lag > 0:
            pod.listed_from = self.clock.now() + dt.timedelta(seconds=lag)
        return pod

    def add_pod(
        self,
        *,
        name: str,
        image: str,
        gpu_type: str,
        datacenter: str,
        cloud: str = "SECURE",
        env: Mapping[str, str] | None = None,
        ports: Iterable[str] = ("80/http",),
        gpu_count: int = 1,
        cost_per_hr: float | None = None,
        booted: bool = True,
        pod_id: str | None = None,
    ) -> FakePod:
        """A pod that exists already (a scenario's `existing:`); takes no stock."""
        price = cost_per_hr
        if price is None:
            entry = self.stock.get((datacenter, gpu_type, cloud))
            unit = entry.cost_per_hr if entry else DEFAULT_PRICE_PER_HR.get(gpu_type, 0.5)
            price = unit * gpu_count
        return self._place(
            name=name,
            image=image,
            env=dict(env or {}),
            ports=tuple(ports),
            gpu_type=gpu_type,
            gpu_count=gpu_count,
            datacenter=datacenter,
            cloud=cloud,
            cost_per_hr=price,
            booted_ago=self.boot_time if booted else 0.0,
            pod_id=pod_id,
        )

    def _place(
        self,
        *,
        name: str,
        image: str,
        env: dict[str, str],
        ports: tuple[str, ...],
        gpu_type: str,
        gpu_count: int,
        datacenter: str,
        cloud: str,
        cost_per_hr: float,
        disk: int = 20,
        booted_ago: float = 0.0,
        pod_id: str | None = None,
    ) -> FakePod:
        if pod_id is not None and pod_id in self.pods:
            raise ValueError(f"pod id {pod_id} exists already")
        now = self.clock.now()
        boot_start = now - dt.timedelta(seconds=booted_ago)
        info = FakePodInfo(
            pod_id=pod_id or self._new_id(),
            name=name,
            image=image,
            env=env,
            gpu_type=gpu_type,
            gpu_count=gpu_count,
            datacenter=datacenter,
            cloud=cloud,
            ports=ports,
            created_at=boot_start,
            started_at=boot_start + dt.timedelta(seconds=self.boot_time),
        )
        pod = FakePod(info=info, cost_per_hr=cost_per_hr, disk=disk, boot_started_at=boot_start)
        if self.pod_server_factory is not None:
            pod.server = self.pod_server_factory(info)
            self._run_image(pod)
        self.pods[info.pod_id] = pod
        self.billed.append(BilledSpan(info.pod_id, start=boot_start, cost_per_hr=cost_per_hr))
        return pod

    def _run_image(self, pod: FakePod) -> None:
        """The container (re)started: it behaves as its image does."""
        if pod.server is not None:
            pod.server.run_image(self.images.get(pod.info.image))

    def update_pod(self, pod_id: str, body: Mapping[str, Any]) -> FakePod:
        """PATCH: same machine and GPU; env replaced wholesale; container restarted."""
        pod = self.get(pod_id)
        info = pod.info
        info.name = body.get("name", info.name)
        info.image = body.get("image", info.image)
        if "env" in body:
            info.env = dict(body["env"])  # RunPod: a sent env REPLACES the whole map
        info.ports = tuple(body.get("ports", info.ports))
        pod.args = body.get("args", pod.args)
        pod.disk = int(body.get("disk", pod.disk))
        pod.locked = bool(body.get("locked", pod.locked))
        container_fields = {"image", "env", "ports", "args", "disk"}
        if container_fields & body.keys() and pod.boot_started_at is not None and pod.server:
            pod.server.restart(self.clock.now())
            self._run_image(pod)
        return pod

    def delete_pod(self, pod_id: str) -> None:
        """Terminate: the GPUs go back to stock and the pod is gone (then 404)."""
        pod = self.get(pod_id)
        del self.pods[pod_id]
        now = self.clock.now()
        for span in self.billed:
            if span.pod_id == pod_id and span.end is None:
                span.end = now
        key = (pod.info.datacenter, pod.info.gpu_type, pod.info.cloud)
        if key in self.stock:
            self.stock[key].count += pod.info.gpu_count
        if pod.server is not None:
            pod.server.stop()

    def pod_action(self, pod_id: str, action: str) -> FakePod | None:
        """start/stop/restart/terminate with RunPod's per-status rules (else 409)."""
        pod = self.get(pod_id)
        status = self.status(pod)
        allowed = actions_for(status)
        if action not in allowed:
            raise CloudError(
                409,
                f"Action '{action}' is not valid for a pod in status {status.value}.",
                title="Conflict",
            )
        now = self.clock.now()
        if action == "terminate":
            self.delete_pod(pod_id)
            return None
        if action == "stop":
            pod.boot_started_at, pod.error = None, False
            if pod.server is not None:
                pod.server.stop()
        elif action == "start":
            # The machine is kept, so the pod skips provisioning and starts its container.
            pod.boot_started_at = now - dt.timedelta(seconds=self.provisioning_time)
            pod.error = False
            if pod.server is not None:
                pod.server.restart(now + dt.timedelta(seconds=self.boot_time))
                self._run_image(pod)
        elif action == "restart" and pod.server is not None:
            pod.server.restart(now)
            self._run_image(pod)
        return pod

    # ---- what tests and the simulator do to the world ------------------------------------

    def crash_pod(self, pod_id: str, *, status: PodStatus = PodStatus.ERROR) -> None:
        """The pod's container dies (ERROR) or exits (EXITED) on its own."""
        pod = self.get(pod_id)
        if status is PodStatus.ERROR:
            pod.error = True
        elif status is PodStatus.EXITED:
            pod.boot_started_at = None
        else:
            raise ValueError("a pod can crash into ERROR or EXITED only")
        if pod.server is not None:
            pod.server.stop()

    def remove_pod(self, pod_id: str) -> None:
        """The pod is terminated outside the API (the console, RunPod reclaiming it)."""
        self.delete_pod(pod_id)

    def set_machine_note(self, pod_id: str, note: str | None) -> None:
        """Flag the pod's machine, e.g. with RunPod's critical-error text."""
        self.get(pod_id).notice.note = note

    def set_maintenance(
        self,
        pod_id: str,
        *,
        start: dt.datetime | float | str | None,
        end: dt.datetime | float | str | None = None,
        note: str | None = None,
    ) -> None:
        notice = self.get(pod_id).notice
        notice.maintenance_start, notice.maintenance_end = start, end
        notice.maintenance_note = note

    def record(self, operation: str, method: str, path: str) -> None:
        self.calls.append(Call(operation, method, path))

    @property
    def write_calls(self) -> list[Call]:
        return [c for c in self.calls if c.operation in WRITES]

    def take_quota(self) -> tuple[bool, int, int] | None:
        """Count a request against the quota: (allowed, remaining, reset s); None: no quota."""
        return None if self.quota is None else self.quota.take(self.clock.now())
