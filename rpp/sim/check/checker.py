"""The invariant checker: `rpp simulate --check` and the soak judge every loop by it.

Where it sits: the simulator, beside the world (rpp/sim/world.py), never inside the
controller. It listens to what the world sees happen (every reconcile's result, every
change of the fake cloud's ground truth, every RunPod request the controller sends)
and checks the invariants a platform engineer relies on, from ground truth where
there is one (the fake cloud's pods and prices, the slots ConfigMap nginx reads) and
from the pool's stored status where the invariant is about the controller's own
promise (desired size, which members it is removing).

The invariants, one group per module:

- `caps.py`: pods <= limits.maxPods; cost at RunPod's prices <= maxHourlyCostUsd;
  creates in any hour <= maxCreatesPerHour (checked at each create);
- `needs.py`: no create while the pods that serve or will serve meet desired: no second
  create for one need, no replacement the pool does not need;
- `unconfirmed.py`: no create while a pod the pool created (its 201 read and kept in
  status) is not listed by RunPod yet, within health.createListingGrace;
- `hands.py`: no pod the pool does not own is deleted, updated or created;
- `serving.py`: never 0 wired beyond one loop while a healthy Ready pod exists; no slot
  on a pod RunPod no longer lists beyond 2 loops; no flagged pod that serves nothing
  kept past its rule's duration plus one create-and-warm time;
- `dead_wired.py`: no dead, hung or deleted pod in nginx more than 60 s after the first
  loop that could see it (unless every wired pod is down while RunPod's listing cannot
  be read);
- `dead_billed.py`: no dead pod billed more than 15 min after the first loop that could
  see it, PoolWideDegradation holds (and DryRun, Observe, paused, Retain) aside;
- `ready_claims.py`: no Ready=True in the stored status, beyond one loop, while no pod
  in nginx answers;
- `ending.py`: no leaked pods at the end; convergence to desired when stock and caps
  allow.

A violation names the loop, the simulated time, the invariant and the numbers.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from rpp.controller.reconcile import PoolResult
from rpp.decide.nginx_slots import wired_pods
from rpp.decide.ownership import owns, owns_name
from rpp.model.codec import StatusFormatError
from rpp.model.observations import PodStatus, RunPodPod
from rpp.model.runpod_operations import CREATE_CALLS, RunPodOperation
from rpp.model.spec import RunPodPoolSpec
from rpp.model.spec_load import load_pool
from rpp.model.status import PoolStatus
from rpp.sim.cloud_model import FakePod
from rpp.sim.faults import ExtraPods, Fault, ListingLag, OddFields, Slow
from rpp.sim.timeline import clock_text
from rpp.sim.world import CloudChange, World

LEAKED_POD = "leaked pod"  # the invariant ending.py checks, once per leaked pod
_READABLE = (Slow, OddFields, ExtraPods, ListingLag)  # faults after which a listing is read


@dataclass(frozen=True)
class Violation:
    """One broken invariant: where (loop, time), which, and the numbers."""

    loop: int
    t: float
    invariant: str
    detail: str

    def text(self) -> str:
        return (
            f"violation: loop {self.loop} ({clock_text(self.t)}): {self.invariant}: {self.detail}"
        )


def count_leaks(violations: Iterable[Violation]) -> int:
    """Leaked pods: each one is a violation of its own, so the count is never kept apart."""
    return sum(1 for v in violations if v.invariant == LEAKED_POD)


class Invariants(Protocol):
    """One group of invariants; each hook may call `checker.violate`."""

    def on_create(self, checker: Checker, change: CloudChange) -> None: ...

    def on_loop(self, checker: Checker, result: PoolResult) -> None: ...

    def on_call(self, checker: Checker, operation: str, request: httpx.Request) -> None: ...

    def on_finish(self, checker: Checker) -> None: ...


class Checker:
    """Watches one pool in one world and collects every violation."""

    def __init__(self, world: World, pool: str, *, groups: tuple[Invariants, ...]) -> None:
        self.world = world
        self.pool = pool
        self.start = world.clock.now()
        self.groups = groups
        self.loops = 0
        self.creates = 0
        self.create_times: list[float] = []  # seconds since the start, every pool create
        self.departures: list[float] = []  # seconds since the start, every pool pod deleted
        self.violations: list[Violation] = []
        self._spec: tuple[Any, RunPodPoolSpec] | None = None
        self.last_loop_spec: RunPodPoolSpec | None = None
        self.listing_failures: list[float] = []  # seconds since the start, listPods faults
        self.create_faults: list[float] = []  # seconds since the start, faults of a create's calls
        world.result_listeners.append(self._loop)
        world.cloud.faults.listeners.append(self._fault)
        world.cloud_listeners.append(self._cloud)
        world.crossings.call_listeners.append(self._call)

    # -- facts --------------------------------------------------------------------------

    @property
    def now(self) -> dt.datetime:
        return self.world.clock.now()

    @property
    def seconds(self) -> float:
        return (self.now - self.start).total_seconds()

    @property
    def leaks(self) -> int:
        return count_leaks(self.violations)

    def spec(self) -> RunPodPoolSpec:
        """The pool's spec as stored now (parsed once per generation)."""
        obj = self.world.kube.pool(self.pool)
        key = (obj["metadata"].get("generation"), obj.get("spec"))
        if self._spec is None or self._spec[0] != key:
            loaded, problems = load_pool(obj)
            if loaded is None:
                raise ValueError(f"the simulated pool is invalid: {problems}")
            self._spec = (key, loaded.spec)
        return self._spec[1]

    def status(self) -> PoolStatus | None:
        """The pool's status as stored now; None when it cannot be read."""
        try:
            return PoolStatus.from_stored(self.world.kube.pool(self.pool).get("status") or {})
        except StatusFormatError:
            return None

    def owned(self, spec: RunPodPoolSpec | None = None) -> list[FakePod]:
        """The pool's pods RunPod has now (ground truth), by pod id."""
        spec = spec or self.spec()
        return [
            pod
            for pod_id, pod in sorted(self.world.cloud.pods.items())
            if owns(spec, as_listed(pod))
        ]

    def wired(self) -> dict[int, str]:
        """What nginx serves now: the slots ConfigMap as stored."""
        stored = self.world.kube.config_map(self.spec().nginx.slots_config_map)
        return dict(wired_pods(stored.data if stored else None))

    def answers(self, pod: FakePod) -> bool:
        """RUNNING, and its service answers (not dead, not hung) within the pool's probe
        timeout: slower than that, its probes time out, as the controller is told they
        fail hard."""
        server = self.world.pods.get(pod.info.pod_id)
        running = self.world.cloud.status(pod) is PodStatus.RUNNING
        if not running or server is None:
            return False
        return server.answers_within(self.spec().probe.timeout)

    def violate(self, invariant: str, detail: str, *, loop: int | None = None) -> None:
        at = self.loops + 1 if loop is None else loop
        self.violations.append(Violation(at, round(self.seconds, 3), invariant, detail))

    # -- listeners -----------------------------------------------------------------------

    @property
    def present(self) -> bool:
        """The pool still exists (a scenario may delete it)."""
        return self.world.kube.has_pool(self.pool)

    def _loop(self, result: PoolResult) -> None:
        if result.pool != self.pool or not self.present:
            return
        self.loops += 1
        unlisted = None if result.status is None else result.status.condition("NotActing")
        if unlisted is not None and unlisted.reason in ("RunPodUnavailable", "RunPodKeyRefused"):
            # The listing failed without a fault of its own: a slow answer that ran past
            # the client's timeout, which the fault alone does not tell.
            self.listing_failures.append(self.seconds)
        for group in self.groups:
            group.on_loop(self, result)
        self.last_loop_spec = self.spec()

    def _cloud(self, change: CloudChange) -> None:
        if not self.present:
            return
        if change.kind == "deleted" and change.name and owns_name(self.spec(), change.name):
            self.departures.append(self.seconds)
            return
        if change.kind != "created" or not change.api or change.pod_id is None:
            return
        pod = self.world.cloud.pods.get(change.pod_id)
        if pod is None or not owns(self.spec(), as_listed(pod)):
            return
        self.creates += 1
        self.create_times.append(self.seconds)
        for group in self.groups:
            group.on_create(self, change)

    def _fault(self, operation: str, fault: Fault) -> None:
        """A listPods answer the controller could not read (the listing itself fails), or
        a fault of a call a create makes (a scripted one may wait, armed, until the pool
        creates again)."""
        if operation == RunPodOperation.LIST_PODS and not isinstance(fault, _READABLE):
            self.listing_failures.append(self.seconds)
        if operation in CREATE_CALLS:
            self.create_faults.append(self.seconds)

    def listing_failed_since(self, t: float) -> bool:
        """RunPod's listing could not be read at some time from `t` (seconds) on."""
        return bool(self.listing_failures) and self.listing_failures[-1] >= t

    def _call(self, operation: str, request: httpx.Request) -> None:
        if not self.present:
            return
        for group in self.groups:
            group.on_call(self, operation, request)

    def finish(self) -> None:
        """The end-of-run invariants; call once, after the last loop."""
        if not self.present:
            return
        for group in self.groups:
            group.on_finish(self)


def pod_in_path(request: httpx.Request) -> str | None:
    """The pod id a per-pod RunPod call names (/v2/pods/{podId}[/...]), if any."""
    parts = request.url.path.strip("/").split("/")
    return parts[2] if len(parts) >= 3 and parts[1] == "pods" else None


def as_listed(pod: FakePod) -> RunPodPod:
    """The pod as the ownership rule reads it (its name and id are all it needs)."""
    info = pod.info
    return RunPodPod(
        id=info.pod_id,
        name=info.name,
        status=PodStatus.RUNNING,
        image=info.image,
        gpu_type=info.gpu_type,
        gpu_count=info.gpu_count,
        cloud=info.cloud,
        datacenter=info.datacenter,
        cost_per_hr=pod.cost_per_hr,
        created_at=None,
    )


class NoChecks:
    """An invariant group that checks nothing; groups override the hooks they need."""

    def on_create(self, checker: Checker, change: CloudChange) -> None:
        return None

    def on_loop(self, checker: Checker, result: PoolResult) -> None:
        return None

    def on_call(self, checker: Checker, operation: str, request: httpx.Request) -> None:
        return None

    def on_finish(self, checker: Checker) -> None:
        return None
