"""Act: create one pod, trying candidates until RunPod answers 201.

Where it sits: act, called by the executor (rpp/act/executor.py) for a CreatePod
effect in Manage mode. Where a pod may go and in which order is decided by decide
(rpp/decide/capacity/placement.py) and carried in the effect: its GPU types and datacenters in
the order to try. This module does the I/O and decides nothing: it reads RunPod's GPU
catalog once, leaves out what that catalog shows without stock or over the cost cap
(the rules rpp/model/candidates.py holds for decide and act alike), then calls create
once per candidate, in the effect's order, until one answers 201, and reports the
result as an `EffectResult`.

What each refusal means for the loop, per RunPod's create table:
- NoCapacity (400, "no longer any instances...") and other 400s: next candidate. A rule
  violation fails the same way everywhere; the report keeps every detail verbatim, so
  the pool can tell "no stock" from "bad request" (`capacity_unavailable`).
- Forbidden (403): this account cannot use that pool; next candidate.
- InsufficientBalance (402), Unauthorized (401), Rejected by 422, NotFound (the template
  does not exist), RateLimited past the deadline: stop, no candidate can succeed now.
- Unknown (5xx, timeout after sending): STOP. A pod may exist; creating on the next
  candidate could make two. The next list finds it by its unique name.

The cost cap is checked here once more, against the catalog just read: a candidate
whose GPU type's list price (times the GPU count) is above what decide left under
limits.maxHourlyCostUsd (`CreatePod.max_price_per_hr`) is never tried, nor one with no
price at all (NaN, negative, missing; the last prices read stand in when the catalog
cannot be read). The prices read go back to status for decide's next check
(rpp/decide/capacity/prices.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from rpp.adapters.runpod import answers
from rpp.adapters.runpod.catalog import GpuCatalog
from rpp.adapters.runpod.client import RunPodClient
from rpp.adapters.runpod.wire import PodRequest
from rpp.model.candidates import Candidate, fits, known, order_candidates
from rpp.model.effects import CreatePod, skipped_text
from rpp.model.observations import RunPodPod
from rpp.model.records import CapacityRefusal
from rpp.model.results import EffectResult, Result
from rpp.model.spec import RunPodPoolSpec

# The most candidates one create may try (each a RunPod call).
MAX_CREATE_ATTEMPTS = 12

# Refusals after which the next candidate may still succeed.
_NEXT_CANDIDATE = frozenset({answers.CallOutcome.NO_CAPACITY, answers.CallOutcome.FORBIDDEN})


async def create_pod(
    runpod: RunPodClient,
    *,
    spec: RunPodPoolSpec,
    effect: CreatePod,
    env: Mapping[str, str],
    now: dt.datetime,
) -> EffectResult:
    """Carry out one CreatePod: the pod created, or why none was (a value, never raised)."""
    request = PodRequest(
        name=effect.name,
        image=effect.image or spec.image,
        template_id=spec.template_id,
        env=dict(env),
        ports=(f"{spec.port}/http",),
    )
    report = await create_first_available(
        runpod,
        request,
        gpu_types=effect.gpu_types or spec.gpu_types,
        datacenters=effect.datacenters,
        cloud=effect.cloud or spec.cloud,
        max_attempts=MAX_CREATE_ATTEMPTS,
        skipped=effect.skipped,
        budget=Budget(effect.max_price_per_hr, dict(effect.catalog_prices))
        if effect.max_price_per_hr is not None
        else None,
    )
    prices = dict(report.prices)
    if report.created:
        return EffectResult(
            effect, Result.CREATED, report.describe(), pod=report.pod, prices=prices
        )
    if report.outcome_unknown:
        return EffectResult(effect, Result.UNKNOWN, report.describe(), prices=prices)
    capacity = None
    if report.capacity_unavailable:
        capacity = CapacityRefusal(
            time=now,
            gpu_types=report.gpu_types,
            cloud=report.cloud,
            datacenters=report.datacenters,
            message=report.describe(),  # what was tried and left out, RunPod's words too
        )
    return EffectResult(
        effect, Result.REFUSED, report.describe(), capacity=capacity, prices=prices
    )


@dataclass(frozen=True)
class Budget:
    """What one more pod may cost (USD/h), and the last list prices read (per GPU)."""

    max_price: float
    last_prices: dict[str, float]


@dataclass(frozen=True)
class CandidateFailure:
    """Why one candidate did not give a pod; `detail` is RunPod's text, verbatim."""

    candidate: Candidate
    outcome: answers.CallOutcome
    status: int | None
    detail: str


@dataclass(frozen=True)
class CreateReport:
    """What one create across the candidates did: the pod and the winning candidate,
    or why there is none.

    `no_stock` lists the candidates the catalog showed without stock (never called);
    `failures` the ones RunPod refused, in the order tried. `stopped_by` is set when a
    refusal ended the loop early (402, 401, 422, Unknown...). `skipped` holds the
    datacenters placement left out, with why (deny, cooldown, maxPerDatacenter), so that
    a refusal names them too.
    """

    gpu_types: tuple[str, ...]
    datacenters: tuple[str, ...]
    cloud: str
    pod: RunPodPod | None = None
    winner: Candidate | None = None
    failures: tuple[CandidateFailure, ...] = ()
    no_stock: tuple[Candidate, ...] = ()
    stopped_by: answers.CallOutcome | None = None
    catalog_error: str | None = None
    skipped: tuple[tuple[str, str], ...] = ()
    priced_out: tuple[str, ...] = ()  # GPU types the cost cap kept out, with their price
    prices: tuple[tuple[str, float], ...] = ()  # the catalog's list prices per GPU

    @property
    def created(self) -> bool:
        return self.pod is not None

    @property
    def outcome_unknown(self) -> bool:
        """A pod may exist although no 201 came back: look it up by name next loop."""
        return self.stopped_by is answers.CallOutcome.UNKNOWN

    @property
    def capacity_unavailable(self) -> bool:
        """RunPod has no GPU for this pod: candidates lacked stock or were refused for
        capacity, and none was refused for a reason that is ours to fix.

        False when nothing could be tried at all (placement left no datacenter):
        that is the pool's limit, not RunPod's stock."""
        if self.created or self.stopped_by is not None:
            return False
        # All 403 is an access problem (a Read Only key), not a shortage of GPUs.
        short = self.no_stock or any(
            f.outcome is answers.CallOutcome.NO_CAPACITY for f in self.failures
        )
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
        if self.skipped:
            parts.append(f"not tried: {skipped_text(self.skipped)}")
        if self.priced_out:
            parts.append(f"over the cost cap: {'; '.join(self.priced_out)}")
        if self.failures:
            parts.append(f"RunPod said: {self.failures[-1].detail}")
        if self.catalog_error:
            parts.append(f"catalog unread: {self.catalog_error}")
        return "; ".join(parts)


async def create_first_available(
    client: RunPodClient,
    request: PodRequest,
    *,
    gpu_types: Sequence[str],
    datacenters: Sequence[str],
    cloud: str,
    max_attempts: int,
    skipped: Sequence[tuple[str, str]] = (),
    budget: Budget | None = None,
) -> CreateReport:
    """Read the catalog once, then create per candidate in order until one answers 201.

    With a `budget`, GPU types priced above it (or not priced at all) are not tried."""
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
    report = CreateReport(
        gpu_types=tuple(dict.fromkeys(gpu_types)),
        datacenters=tuple(dict.fromkeys(datacenters)),
        cloud=cloud,
        skipped=tuple(skipped),
    )
    catalog: GpuCatalog | None = None
    try:
        catalog = await client.gpu_catalog(cloud=cloud, gpu_count=request.gpu_count)
    except (answers.Unauthorized, answers.InsufficientBalance) as error:
        return replace(report, stopped_by=error.outcome)
    except answers.RunPodError as error:
        report = replace(report, catalog_error=str(error))
    listed = _list_prices(catalog)
    report = replace(report, prices=tuple(sorted(listed.items())))
    gpu_types = report.gpu_types
    if budget is not None:
        gpu_types, priced_out = _within(
            gpu_types, listed=listed, budget=budget, gpu_count=request.gpu_count
        )
        report = replace(report, priced_out=priced_out)
    to_try, no_stock = order_candidates(
        gpu_types=gpu_types, datacenters=report.datacenters, cloud=cloud, stock=catalog
    )
    report = replace(report, no_stock=tuple(no_stock))
    failures: list[CandidateFailure] = []
    for candidate in to_try[:max_attempts]:
        try:
            pod = await client.create_pod(
                request,
                gpu_type=candidate.gpu_type,
                datacenter=candidate.datacenter,
                cloud=candidate.cloud,
            )
        except answers.RunPodError as error:
            failures.append(
                CandidateFailure(
                    candidate=candidate,
                    outcome=error.outcome,
                    status=error.status,
                    detail=error.detail or str(error),
                )
            )
            if _stops_the_loop(error):
                return replace(report, failures=tuple(failures), stopped_by=error.outcome)
            continue
        return replace(report, failures=tuple(failures), pod=pod, winner=candidate)
    return replace(report, failures=tuple(failures))


def _list_prices(catalog: GpuCatalog | None) -> dict[str, float]:
    """The catalog's list price per GPU, for the GPU types it prices."""
    if catalog is None:
        return {}
    return {
        gpu: price
        for gpu, offer in catalog.gpus.items()
        if (price := known(offer.price_per_hr)) is not None
    }


def _within(
    gpu_types: Sequence[str], *, listed: dict[str, float], budget: Budget, gpu_count: int
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(GPU types priced within the budget, the others with why), in order."""
    kept: list[str] = []
    out: list[str] = []
    for gpu in gpu_types:
        unit = listed.get(gpu, known(budget.last_prices.get(gpu)))
        if unit is None:
            out.append(f"{gpu} (RunPod gives no price: the cost cap cannot be checked)")
        elif not fits(unit * gpu_count, budget.max_price):
            out.append(
                f"{gpu} at ${unit * gpu_count:.2f}/h, ${budget.max_price:.2f}/h left under "
                "limits.maxHourlyCostUsd"
            )
        else:
            kept.append(gpu)
    return tuple(kept), tuple(out)


def _stops_the_loop(error: answers.RunPodError) -> bool:
    if error.outcome in _NEXT_CANDIDATE:
        return False
    # A 400 that is not about capacity: RunPod's table says try the next candidate.
    return not (error.outcome is answers.CallOutcome.REJECTED and error.status == 400)
