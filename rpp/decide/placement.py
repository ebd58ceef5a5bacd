"""Placement: where the pool may create its next pod, and why other places are out.

Where it sits: decide, pool step 4 (and replacements in step 3). The pool rules are
here: datacenters.allow in order (required to create), minus datacenters.deny, minus
datacenters already holding maxPerDatacenter pool pods, minus datacenters in cooldown
(2 replacements in 24h avoid a datacenter for 24h). The RunPod side (reading the
catalog, skipping combinations without stock, creating per candidate until a 201)
is the executor's job in rpp/adapters/runpod/candidates.py; the result here travels
to it inside the CreatePod effect.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from rpp.model.spec import RunPodPoolSpec
from rpp.model.status import PoolStatus
from rpp.model.timestamps import to_rfc3339


@dataclass(frozen=True)
class Placement:
    """The datacenters a create may try, in order, and why the others are left out."""

    datacenters: tuple[str, ...]
    excluded: tuple[tuple[str, str], ...]  # (datacenter, why)

    def explain(self) -> str:
        """A sentence for a condition when nothing is left."""
        if not self.excluded:
            return "datacenters.allow is empty: list the datacenters pods may use"
        why = "; ".join(f"{dc} {reason}" for dc, reason in self.excluded)
        return f"no allowed datacenter can take a pod: {why}"


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
            excluded.append((dc, "is denied"))
        elif dc in cooling:
            excluded.append(
                (dc, f"is in cooldown until {to_rfc3339(cooling[dc])} (2 replacements in 24h)")
            )
        elif per_dc[dc] >= spec.max_per_datacenter:
            excluded.append(
                (
                    dc,
                    f"already holds {per_dc[dc]} pool pod(s) (maxPerDatacenter "
                    f"{spec.max_per_datacenter})",
                )
            )
        else:
            allowed.append(dc)
    return Placement(tuple(allowed), tuple(excluded))
