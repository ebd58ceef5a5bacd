"""The two rules a create is held to twice: where to try first, and what a price is.

Where it sits: the model, below decide and act, because both apply these rules and act
must not import decide. Decide applies them with what it knows (the last list prices,
status.catalogPrices; rpp/decide/capacity/prices.py and
rpp/decide/capacity/placement.py) and puts the
result in the CreatePod effect: the GPU types that fit under the cost cap and the
datacenters in the order to try. Act (rpp/act/create.py) reads RunPod's GPU catalog
right before it creates, a read decide never gets (one more RunPod call per pool per
loop, for stock that changes by the minute), and applies the same rules to it: it drops
what the fresh catalog prices over the cap and what it shows without stock, and tries
the rest in the effect's order. Act orders nothing of its own: the order is the
effect's, gpuTypes first, then datacenters.

- `known`: a price RunPod really gave (finite, not negative); anything else is no price.
- `fits`: one more pod at a price stays under what is left of limits.maxHourlyCostUsd.
- `order_candidates`: every (GPU type, datacenter) in the effect's order, split into the
  ones to call and the ones the catalog shows without stock (never called). REST v1 let
  RunPod pick "the first combination with stock"; v2 create places exactly one GPU type
  and never searches, so the controller picks, the way RunPod documents for v2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


def known(price: float | None) -> float | None:
    """A price RunPod really gave: finite and not negative; anything else is no price."""
    if price is None or not math.isfinite(price) or price < 0:
        return None
    return price


def fits(price: float, room: float) -> bool:
    """One more pod at `price` stays under the cap (`room` is what is left of it)."""
    return price <= room + 1e-9


@dataclass(frozen=True)
class Candidate:
    """One combination RunPod can be asked to place a pod on."""

    gpu_type: str
    datacenter: str
    cloud: str

    def __str__(self) -> str:
        return f"{self.gpu_type} in {self.datacenter} ({self.cloud})"


class StockLevels(Protocol):
    """What ordering needs of RunPod's catalog (rpp/adapters/runpod/catalog.py)."""

    def has_stock(self, gpu_type: str, datacenter: str) -> bool: ...


def order_candidates(
    *,
    gpu_types: Sequence[str],
    datacenters: Sequence[str],
    cloud: str,
    stock: StockLevels | None,
) -> tuple[list[Candidate], list[Candidate]]:
    """(candidates to try in order, candidates skipped for no stock).

    Without a catalog (its read failed) every combination is tried in order: the
    catalog only saves calls, and the attempt cap still bounds them.
    """
    to_try: list[Candidate] = []
    no_stock: list[Candidate] = []
    for gpu_type in dict.fromkeys(gpu_types):
        for datacenter in dict.fromkeys(datacenters):
            candidate = Candidate(gpu_type=gpu_type, datacenter=datacenter, cloud=cloud)
            if stock is None or stock.has_stock(gpu_type, datacenter):
                to_try.append(candidate)
            else:
                no_stock.append(candidate)
    return to_try, no_stock
