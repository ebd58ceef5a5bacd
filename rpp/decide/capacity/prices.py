"""Prices for the cost cap: what the pool's pods bill, and what one more pod would.

Where it sits: decide, under the safeguards (rpp/decide/capacity/safeguards.py) and the create
step (rpp/decide/capacity/sizing.py); act applies the same rule with the catalog it reads
right before it creates (rpp/act/create.py), so limits.maxHourlyCostUsd is a hard cap:

- a pod costs what RunPod lists as its price; only a pod RunPod has not priced (a
  price that is NaN, infinite or negative is no price) counts at
  limits.estimatedPodCostUsd, never at zero;
- one more pod costs its GPU type's catalog price (RunPod's list price per GPU; the
  pool creates one-GPU pods). Decide does not read the catalog: it uses the prices the
  last create read (status.catalogPrices), and the estimate for a GPU type never priced
  yet. Only GPU types whose price fits under the cap stay candidates, so the highest
  price among the candidates still open fits; act then checks each candidate against
  the fresh catalog and tries none that would pass the cap.

What a price is (`known`) and what fits under the cap (`fits`) are one rule for decide
and act alike, so they live in the model (rpp/model/candidates.py), named here too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rpp.model.candidates import fits, known
from rpp.model.observations import RunPodPod
from rpp.model.spec import RunPodPoolSpec

__all__ = ["Candidates", "PoolCost", "billed", "candidates", "fits", "known", "pool_cost"]


def billed(pods: Iterable[RunPodPod]) -> float:
    """What the pods bill per hour at the prices RunPod gives (for costPerHour)."""
    return round(sum(p for pod in pods if (p := known(pod.cost_per_hr)) is not None), 4)


@dataclass(frozen=True)
class PoolCost:
    """The pool's cost for the cap, and the room left under it."""

    current: float
    unpriced: int  # pods counted at the estimate because RunPod gave no price
    cap: float
    estimate: float

    @property
    def room(self) -> float:
        return self.cap - self.current

    def describe(self) -> str:
        text = f"the pool costs ${self.current:.2f}/h"
        if self.unpriced:
            text += (
                f" ({self.unpriced} pod(s) RunPod lists without a price counted at "
                f"limits.estimatedPodCostUsd ${self.estimate:.2f}/h)"
            )
        return text


def pool_cost(
    spec: RunPodPoolSpec,
    pods: Iterable[RunPodPod],
    *,
    pending: int = 0,
    pending_price: float = 0,
    unlisted: Iterable[float | None] = (),
) -> PoolCost:
    """The pods' cost, unpriced ones at the estimate, plus `pending` creates written down
    and not settled (they may have made a pod) at `pending_price` each, plus the prices
    of pods RunPod created and does not list yet (`unlisted`; None: not priced)."""
    estimate = spec.limits.estimated_pod_cost_usd
    total, unpriced = 0.0, 0
    for price in [*(pod.cost_per_hr for pod in pods), *unlisted]:
        price = known(price)
        if price is None:
            unpriced += 1
            price = estimate
        total += price
    total += pending * pending_price
    return PoolCost(
        current=round(total, 4),
        unpriced=unpriced,
        cap=spec.limits.max_hourly_cost_usd,
        estimate=estimate,
    )


@dataclass(frozen=True)
class Candidates:
    """The GPU types one more pod may use under the cap, and the ones priced out."""

    fitting: tuple[str, ...]
    priced_out: tuple[tuple[str, float], ...]  # (GPU type, price per pod)
    prices: Mapping[str, float]  # the price used for each GPU type
    estimated: frozenset[str] = frozenset()  # types priced at the estimate, not the catalog

    def highest(self) -> float:
        return max(self.prices.values(), default=0.0)

    def describe_priced_out(self) -> str:
        return ", ".join(
            f"{t} at ${p:.2f}/h"
            + (" (limits.estimatedPodCostUsd: not priced yet)" if t in self.estimated else "")
            for t, p in self.priced_out
        )


def candidates(spec: RunPodPoolSpec, *, catalog: Mapping[str, float], room: float) -> Candidates:
    """The pool's GPU types whose price per pod fits in `room`, in gpuTypes order.

    `catalog` holds RunPod's list price per GPU; a type it does not price counts at the
    estimate until a create reads its price."""
    prices: dict[str, float] = {}
    fitting: list[str] = []
    priced_out: list[tuple[str, float]] = []
    estimated: set[str] = set()
    for gpu_type in spec.gpu_types:
        price = known(catalog.get(gpu_type))
        if price is None:
            estimated.add(gpu_type)
            price = spec.limits.estimated_pod_cost_usd
        prices[gpu_type] = price
        if fits(price, room):
            fitting.append(gpu_type)
        else:
            priced_out.append((gpu_type, price))
    return Candidates(tuple(fitting), tuple(priced_out), prices, frozenset(estimated))
