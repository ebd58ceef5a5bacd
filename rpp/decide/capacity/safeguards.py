"""The hard caps and the create backoff that may block a create, each with the reason why.

Where it sits: decide, in front of every CreatePod (the `create` step, and the
autoscaler's growth). A blocked create is not silent: the pool raises CreateBlocked
with the reason and the numbers behind it, so `kubectl get rpp -o yaml` says exactly
why a pool short of pods is not creating one.

The caps hold in every mode and at every moment: they count every pool pod RunPod
lists (whatever its phase), every pod RunPod created and does not list yet
(rpp/decide/capacity/unconfirmed.py), and every create written down but not settled, and the
cost cap adds the price of the pod about to be created (rpp/decide/capacity/prices.py), so a
pool never exceeds limits.maxPods or limits.maxHourlyCostUsd.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from rpp.decide.capacity.prices import Candidates, PoolCost
from rpp.model.spec import RunPodPoolSpec
from rpp.model.status import PoolStatus
from rpp.model.timestamps import to_rfc3339

CREATE_BACKOFF = dt.timedelta(minutes=5)
"""How long creates wait after one failed (set when the result is folded in)."""


@dataclass(frozen=True)
class Block:
    """Why a create may not happen now: a condition reason and a human message."""

    reason: str
    message: str


def create_block(
    *,
    spec: RunPodPoolSpec,
    status: PoolStatus,
    pod_count: int,
    cost: PoolCost,
    fit: Candidates,
    now: dt.datetime,
    unconfirmed: str | None = None,
    unwritten: str | None = None,
) -> Block | None:
    """The first safeguard that blocks a create now, or None when a create may go.

    `unconfirmed` says which pod RunPod created and does not list yet, if one is
    (rpp/decide/capacity/unconfirmed.py): no create goes out until it shows. `unwritten` says
    why the create's intent cannot be stored first (rpp/decide/ledger/write_failures.py)."""
    limits = spec.limits
    if unwritten is not None:
        return Block("StatusWriteFailing", unwritten)
    until = status.backoff.create_until
    if until is not None and now < until:
        return Block(
            "CreateBackoff",
            f"the last create failed; creates wait until {to_rfc3339(until)} "
            f"({CREATE_BACKOFF.seconds // 60}m backoff)",
        )
    if unconfirmed is not None:
        return Block("CreateUnconfirmed", unconfirmed)
    if pod_count >= limits.max_pods:
        return Block(
            "MaxPodsReached",
            f"the pool has {pod_count} pod(s) and limits.maxPods is {limits.max_pods}",
        )
    if limits.max_hourly_cost_usd <= 0:
        return Block(
            "CostCapReached",
            "limits.maxHourlyCostUsd is 0, which means never create: set the pool's budget",
        )
    if not fit.fitting:
        return Block(
            "CostCapReached",
            f"{cost.describe()}; one more pod would pass limits.maxHourlyCostUsd "
            f"${limits.max_hourly_cost_usd:.2f}/h: {fit.describe_priced_out()}",
        )
    recent = status.creates_in_last_hour(now)
    if recent >= limits.max_creates_per_hour:
        return Block(
            "CreateRateLimited",
            f"{recent} create(s) in the last hour; limits.maxCreatesPerHour is "
            f"{limits.max_creates_per_hour}",
        )
    return None
