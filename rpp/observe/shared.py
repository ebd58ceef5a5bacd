"""Observe, once per loop for every pool: RunPod's pod listing and its machine notices.

Where it sits: observe, first in each loop. The controller loop (rpp/controller/loop.py)
calls `read_shared` once before it reconciles the pools, and every pool's observation
(rpp/observe/pool.py) starts from the `Shared` it returns: one `GET /v2/pods` and one
GraphQL notice query serve all pools, so the RunPod calls do not grow with the number of
pools. Decide keeps each pool's own pods from the listing (rpp/decide/ownership.py),
which is indexed here once for all of them.

Once in 10 minutes it also reads what RunPod billed the account's pods (due when the
pools' status.spend is that old: rpp/observe/billing.py); other loops carry no reading
and the pools keep their figures. A billing read that fails is the error in the reading,
never a reason to skip a loop.

Whatever RunPod answers, every pool gets a loop: an answer that cannot be read at all
is "RunPod unavailable" for each (NotActing, written in its status), never an exception
that ends the loop before any pool's status is written. A listing RunPod refused for the
key (401, 403: the client's `Unauthorized` and `Forbidden`) is carried as `RefusedKey`,
naming where the key comes from, so each pool says which key to fix.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rpp.adapters.logs import layer_logger
from rpp.adapters.runpod import answers
from rpp.adapters.runpod.client import RunPodClient
from rpp.decide.ownership import IndexedPods
from rpp.model.observations import (
    BillingReading,
    HostNotice,
    RefusedKey,
    RunPodKeySource,
    RunPodPod,
)
from rpp.observe import billing

# Logged under the controller's name, as when the loop read these itself: a search for
# the controller's records keeps finding them.
log = layer_logger("rpp.controller")


@dataclass(frozen=True)
class Shared:
    """What one loop read once for every pool: the RunPod listing and machine notices."""

    pods: tuple[RunPodPod, ...] | None
    runpod_error: str | None = None
    refused_key: RefusedKey | None = None
    """The listing failed because RunPod refused the key it was asked with."""
    notices: Mapping[str, HostNotice] | None = None
    notices_error: str | None = None
    pools: tuple[Mapping[str, Any], ...] = ()
    """Every RunPodPool listed, as stored: a pool that would fight an older one waits."""
    billing: BillingReading | None = None
    """What RunPod billed the account's pods, when this loop read it (every 10 minutes)."""


_KEY_REFUSALS = (answers.Unauthorized, answers.Forbidden)


async def read_shared(
    runpod: RunPodClient,
    *,
    key: RunPodKeySource,
    now: dt.datetime | None = None,
    billing_for: Sequence[Mapping[str, Any]] = (),
    billing_cache: billing.BillingCache = billing.CACHE,
) -> Shared:
    """One pod listing and one notice query for every pool; failures become data.
    `key`: where the client's key comes from, named if RunPod refuses it. With `now`, the
    pod billing too when it is due for `billing_for` (the loop's pools, as stored)."""
    refused = None
    try:
        # Indexed once, on first use, for every pool of this loop.
        pods: tuple[Any, ...] | None = IndexedPods(await runpod.list_pods())
        error = None
    except _KEY_REFUSALS as err:
        pods, error = None, str(err)
        refused = RefusedKey(source=key, status=err.status or 401)
    except answers.RunPodError as err:
        pods, error = None, str(err)
    except Exception as err:  # a bug reading the answer: every pool still reports it
        log.exception("reading RunPod's pod listing failed")
        pods, error = None, f"the pod listing could not be read ({type(err).__name__})"
    try:
        notices: Mapping[str, Any] | None = await runpod.host_notices()
        notices_error = None
    except answers.RunPodError as err:
        notices, notices_error = None, str(err)
    except Exception as err:
        log.exception("reading RunPod's machine notices failed")
        notices, notices_error = None, f"the notices could not be read ({type(err).__name__})"
    spend = None
    if now is not None:
        spend = await billing_cache.read(
            runpod, now, last_read=billing.oldest_reading(billing_for)
        )
    return Shared(
        pods=pods,
        runpod_error=error,
        refused_key=refused,
        notices=notices,
        notices_error=notices_error,
        billing=spend,
    )
