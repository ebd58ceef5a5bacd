"""Placement: where the pool may create its next pod, and in which order to try.

Where it sits: decide. Every rule about where a pod may go is here, but for the order
in which act tries the candidates, a rule act applies too (with the catalog it reads
right before it creates), so it lives in the model (rpp/model/candidates.py); the only
I/O of a create (reading RunPod's catalog, then creating per candidate until one
answers 201) is act's, in rpp/act/create.py.

1. `place` (the `create` step, for the size and for replacements): datacenters.allow in order
   (required to create), minus datacenters.deny, minus datacenters already holding
   maxPerDatacenter pool pods, minus datacenters in cooldown (2 replacements in 24h
   avoid a datacenter for 24h). The result travels to act inside the CreatePod effect.
2. `order_candidates` (rpp/model/candidates.py, at act time, with the catalog just
   read): REST v1 let RunPod pick "the first combination with stock"; v2 create places
   exactly one GPU type and never searches, so the controller picks, the way RunPod
   documents for v2. The pool's gpuTypes come first (the user's preference of
   hardware), then, within a GPU type, its datacenters in the order `place` gave;
   combinations the catalog shows without stock are skipped (never called).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from rpp.model.candidates import Candidate, StockLevels, order_candidates
from rpp.model.effects import skipped_text
from rpp.model.spec import RunPodPoolSpec
from rpp.model.status import PoolStatus
from rpp.model.timestamps import to_rfc3339

# Placed in the model for act; named here too, beside the rest of placement.
__all__ = ["Candidate", "Placement", "StockLevels", "order_candidates", "place"]


@dataclass(frozen=True)
class Placement:
    """The datacenters a create may try, in order, and why the others are left out."""

    datacenters: tuple[str, ...]
    excluded: tuple[tuple[str, str], ...]  # (datacenter, why), in datacenters.allow order

    def explain(self) -> str:
        """A sentence for a condition when nothing is left."""
        if not self.excluded:
            return "datacenters.allow is empty: list the datacenters pods may use"
        return f"no allowed datacenter can take a pod: {skipped_text(self.excluded)}"


def place(
    *,
    spec: RunPodPoolSpec,
    status: PoolStatus,
    pod_datacenters: Iterable[str | None],
    now: dt.datetime,
) -> Placement:
    """Order the allowed datacenters for the next create.

    `pod_datacenters` are the datacenters of the pool's current pods (every pod RunPod
    lists for the pool, whatever its phase: a draining pod still occupies its place).
    """
    per_dc = Counter(dc for dc in pod_datacenters if dc)
    cooling = status.cooldown_until(now)
    allowed: list[str] = []
    excluded: list[tuple[str, str]] = []
    for dc in spec.datacenters.allow:
        if dc in spec.datacenters.deny:
            excluded.append((dc, "denied by datacenters.deny"))
        elif dc in cooling:
            excluded.append(
                (dc, f"cooldown until {to_rfc3339(cooling[dc])} after 2 replacements in 24h")
            )
        elif per_dc[dc] >= spec.max_per_datacenter:
            excluded.append((dc, f"maxPerDatacenter {spec.max_per_datacenter} reached"))
        else:
            allowed.append(dc)
    return Placement(tuple(allowed), tuple(excluded))
