"""Candidate creation: read the catalog once, then create per candidate until a 201.

REST v1 let RunPod pick "the first combination with stock" from lists of GPU types and
datacenters. v2 create places exactly one GPU type and never searches, so the
controller does the picking, the way RunPod documents for v2: order the candidates,
skip the ones the catalog shows without stock, and call create once per candidate, in
order, until one answers 201.

Order: the pool's gpuTypes first (the user's preference of hardware), then, within a
GPU type, its datacenters in datacenters.allow order. The caller passes the allowed
datacenters already in order and the ones to leave out (denied, at maxPerDatacenter,
in cooldown), so this module holds no pool rules: `order_candidates` is pure, and
`create_first_available` is the act step that calls RunPod.

What each refusal means for the loop, per RunPod's create table:
- NoCapacity (400, "no longer any instances...") and other 400s: next candidate. A rule
  violation fails the same way everywhere; the result keeps every detail verbatim, so
  the pool can tell "no stock" from "bad request" (`capacity_unavailable`).
- Forbidden (403): this account cannot use that pool; next candidate.
- InsufficientBalance (402), Unauthorized (401), Rejected by 422, NotFound (the template
  does not exist), RateLimited past the deadline: stop, no candidate can succeed now.
- Unknown (5xx, timeout after sending): STOP. A pod may exist; creating on the next
  candidate could make two. The next list finds it by its unique name.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from rpp.adapters.runpod import answers as oc
from rpp.adapters.runpod.catalog import GpuCatalog
from rpp.adapters.runpod.client import RunPodClient
from rpp.adapters.runpod.wire import PodRequest
from rpp.model.observations import RunPodPod

# Refusals after which the next candidate may still succeed.
_NEXT_CANDIDATE = frozenset({oc.Outcome.NO_CAPACITY, oc.Outcome.FORBIDDEN})


@dataclass(frozen=True)
class Candidate:
    """One combination RunPod can be asked to place a pod on."""

    gpu_type: str
    datacenter: str
    cloud: str

    def __str__(self) -> str:
        return f"{self.gpu_type} in {self.datacenter} ({self.cloud})"


@dataclass(frozen=True)
class CandidateFailure:
    """Why one candidate did not give a pod; `detail` is RunPod's text, verbatim."""

    candidate: Candidate
    outcome: oc.Outcome
    status: int | None
    detail: str


@dataclass(frozen=True)
class PlacementResult:
    """The outcome of one create: the pod and the winning candidate, or why not.

    `no_stock` lists the candidates the catalog showed without stock (never called);
    `failures` the ones RunPod refused, in the order tried. `stopped_by` is set when a
    refusal ended the loop early (402, 401, 422, Unknown...).
    """

    pod: RunPodPod | None
    winner: Candidate | None
    failures: tuple[CandidateFailure, ...]
    no_stock: tuple[Candidate, ...]
    gpu_types: tuple[str, ...]
    datacenters: tuple[str, ...]
    cloud: str
    stopped_by: oc.Outcome | None = None
    catalog_error: str | None = None

    @property
    def created(self) -> bool:
        return self.pod is not None

    @property
    def outcome_unknown(self) -> bool:
        """A pod may exist although no 201 came back: look it up by name next loop."""
        return self.stopped_by is oc.Outcome.UNKNOWN

    @property
    def capacity_unavailable(self) -> bool:
        """RunPod has no GPU for this pod: candidates lacked stock or were refused for
        capacity, and none was refused for a reason that is ours to fix.

        False when nothing could be tried at all (no datacenter left after the
        caller's exclusions): that is the pool's limit, not RunPod's stock."""
        if self.created or self.stopped_by is not None:
            return False
        # All 403 is an access problem (a Read Only key), not a shortage of GPUs.
        short = self.no_stock or any(f.outcome is oc.Outcome.NO_CAPACITY for f in self.failures)
        return bool(short) and all(f.outcome in _NEXT_CANDIDATE for f in self.failures)

    @property
    def last_detail(self) -> str | None:
        return self.failures[-1].detail if self.failures else None

    def describe(self) -> str:
        """One line for the CapacityUnavailable condition and the would:/did: log."""
        if self.winner is not None:
            return f"created on {self.winner}"
        tried = (
            f"GPU types {', '.join(self.gpu_types) or '(none)'} on {self.cloud} in "
            f"datacenters {', '.join(self.datacenters) or '(none)'}"
        )
        if self.stopped_by is not None:
            head = f"create stopped ({self.stopped_by.value}) after trying {tried}"
        elif self.capacity_unavailable:
            head = f"no GPU available: tried {tried}"
        else:
            head = f"no candidate accepted the pod: tried {tried}"
        parts = [head]
        if self.no_stock:
            parts.append(f"{len(self.no_stock)} without stock in the catalog")
        if self.failures:
            parts.append(f"RunPod said: {self.failures[-1].detail}")
        if self.catalog_error:
            parts.append(f"catalog unread: {self.catalog_error}")
        return "; ".join(parts)


def order_candidates(
    *,
    gpu_types: Sequence[str],
    datacenters: Sequence[str],
    cloud: str,
    catalog: GpuCatalog | None,
    exclude: Collection[str] = (),
) -> tuple[list[Candidate], list[Candidate]]:
    """(candidates to try in order, candidates skipped for no stock). Pure.

    Without a catalog (its read failed) every combination is tried in order: the
    catalog only saves calls, and the attempt cap still bounds them.
    """
    to_try: list[Candidate] = []
    no_stock: list[Candidate] = []
    allowed = [dc for dc in dict.fromkeys(datacenters) if dc not in exclude]
    for gpu_type in dict.fromkeys(gpu_types):
        for datacenter in allowed:
            candidate = Candidate(gpu_type=gpu_type, datacenter=datacenter, cloud=cloud)
            if catalog is None or catalog.availability(gpu_type, datacenter).has_stock:
                to_try.append(candidate)
            else:
                no_stock.append(candidate)
    return to_try, no_stock


async def create_first_available(
    client: RunPodClient,
    request: PodRequest,
    *,
    gpu_types: Sequence[str],
    datacenters: Sequence[str],
    cloud: str,
    max_attempts: int,
    exclude: Collection[str] = (),
) -> PlacementResult:
    """Read the catalog once, then create per candidate in order until one answers 201."""
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
    tried_dcs = tuple(dc for dc in dict.fromkeys(datacenters) if dc not in exclude)
    catalog: GpuCatalog | None = None
    catalog_error: str | None = None
    try:
        catalog = await client.gpu_catalog(cloud=cloud, gpu_count=request.gpu_count)
    except (oc.Unauthorized, oc.InsufficientBalance) as error:
        return _result(gpu_types, tried_dcs, cloud, stopped_by=error.outcome, failures=())
    except oc.RunPodError as error:
        catalog_error = str(error)
    to_try, no_stock = order_candidates(
        gpu_types=gpu_types, datacenters=tried_dcs, cloud=cloud, catalog=catalog
    )
    failures: list[CandidateFailure] = []
    for candidate in to_try[:max_attempts]:
        try:
            pod = await client.create_pod(
                request,
                gpu_type=candidate.gpu_type,
                datacenter=candidate.datacenter,
                cloud=candidate.cloud,
            )
        except oc.RunPodError as error:
            failures.append(
                CandidateFailure(
                    candidate=candidate,
                    outcome=error.outcome,
                    status=error.status,
                    detail=error.detail or str(error),
                )
            )
            if _stops_the_loop(error):
                return _result(
                    gpu_types,
                    tried_dcs,
                    cloud,
                    stopped_by=error.outcome,
                    failures=tuple(failures),
                    no_stock=tuple(no_stock),
                    catalog_error=catalog_error,
                )
            continue
        return _result(
            gpu_types,
            tried_dcs,
            cloud,
            failures=tuple(failures),
            no_stock=tuple(no_stock),
            pod=pod,
            winner=candidate,
            catalog_error=catalog_error,
        )
    return _result(
        gpu_types,
        tried_dcs,
        cloud,
        failures=tuple(failures),
        no_stock=tuple(no_stock),
        catalog_error=catalog_error,
    )


def _stops_the_loop(error: oc.RunPodError) -> bool:
    if error.outcome in _NEXT_CANDIDATE:
        return False
    # A 400 that is not about capacity: RunPod's table says try the next candidate.
    return not (error.outcome is oc.Outcome.REJECTED and error.status == 400)


def _result(
    gpu_types: Sequence[str],
    datacenters: tuple[str, ...],
    cloud: str,
    *,
    failures: tuple[CandidateFailure, ...],
    stopped_by: oc.Outcome | None = None,
    no_stock: tuple[Candidate, ...] = (),
    pod: RunPodPod | None = None,
    winner: Candidate | None = None,
    catalog_error: str | None = None,
) -> PlacementResult:
    return PlacementResult(
        pod=pod,
        winner=winner,
        failures=failures,
        no_stock=no_stock,
        gpu_types=tuple(dict.fromkeys(gpu_types)),
        datacenters=datacenters,
        cloud=cloud,
        stopped_by=stopped_by,
        catalog_error=catalog_error,
    )
