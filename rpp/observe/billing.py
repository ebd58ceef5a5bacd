"""Observe, at a low rate: what RunPod really billed the account's pods, per hour.

Where it sits: observe, inside the loop's shared read (rpp/observe/shared.py), before
the pools decide. `BillingCache.read` calls RunPod's `GET /v2/billing/pods`
(listPodBilling) only when it is due: when the pools' billing readings
(status.spend.readAt, the oldest of them) are 10 minutes old or more, or a pool has none,
and this process has not asked for this client in the last 10 minutes. Other loops get
no reading (None) and each pool keeps its status.spend. So an ordinary loop still makes
its 2 RunPod calls (the listing and the notices), and one loop in every 10 minutes a
third, counted like any call in
runpod_pool_runpod_api_calls_total{operation="listPodBilling"}.

Why due from the status: status is the only memory (docs/ARCHITECTURE.md). A restarted
process, or the standby taking over, reads the bill when the last controller would have,
not again at once, and decides every loop as the one that ran on. The process's own
memory (when it last asked each client) only holds back a retry: a read that failed
moved no readAt, and is tried again 10 minutes later, not every loop.

Why so rarely: RunPod's bill lags the pods by minutes to hours, and status.spend is a
report, not an input to any decision (the cost cap stays on catalog prices), so reading
it every 30 s would spend the account's rate limit on numbers that barely move.

Keyed by client: one `RunPodClient` per RunPod key (today the controller's one key),
held weakly, so a client that is closed and dropped takes its entry with it.

A read that fails never stops the loop: it is logged, and the reading carries the error
and no records, so each pool keeps its last figures with their own readAt and says why.
The read runs before the pools decide, so its reading lands in this loop's status: a
slow billing endpoint delays that one loop by at most the client's retry deadline, once
in 10 minutes.

The window: hourly buckets from the start of the month (UTC), or of the hour before
this one if that is earlier (the first hour of a month still has a last hour), to the
end of the hour now running.
"""

from __future__ import annotations

import datetime as dt
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from rpp.adapters.logs import layer_logger
from rpp.adapters.runpod import answers
from rpp.adapters.runpod.client import RunPodClient
from rpp.model.observations import BillingReading
from rpp.model.timestamps import from_rfc3339

log = layer_logger("rpp.observe")

READ_EVERY = dt.timedelta(minutes=10)
"""At most one listPodBilling call per client in this time."""
HOUR = dt.timedelta(hours=1)


def billing_window(now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """[start, end) of the read at `now`: the month so far (and the last full hour, when it
    lies in the month before), to the end of the current hour."""
    hour = now.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)
    month = hour.replace(day=1, hour=0)
    return min(month, hour - HOUR), hour + HOUR


def oldest_reading(pools: Iterable[Mapping[str, Any]]) -> dt.datetime | None:
    """The oldest status.spend.readAt of `pools` (as stored); None when any pool has none
    (a new pool, or no read has succeeded yet): then a read is due."""
    oldest: dt.datetime | None = None
    for pool in pools:
        status = pool.get("status")
        spend = status.get("spend") if isinstance(status, Mapping) else None
        read_at = spend.get("readAt") if isinstance(spend, Mapping) else None
        try:
            when = from_rfc3339(read_at) if isinstance(read_at, str) else None
        except ValueError:
            when = None
        if when is None:
            return None
        oldest = when if oldest is None else min(oldest, when)
    return oldest


class BillingCache:
    """When this process last asked RunPod's bill for each client."""

    def __init__(self, *, every: dt.timedelta = READ_EVERY) -> None:
        self.every = every
        self._asked: weakref.WeakKeyDictionary[RunPodClient, dt.datetime] = (
            weakref.WeakKeyDictionary()
        )

    def due(
        self, client: RunPodClient, now: dt.datetime, *, last_read: dt.datetime | None
    ) -> bool:
        """True when a read at `now` calls RunPod: the pools' oldest reading (`last_read`,
        None: a pool has none) is `every` old, and this process did not ask that lately.
        A clock stepped back makes it not due until time catches up: a late reading,
        never a burst of calls."""
        asked = self._asked.get(client)
        if asked is not None and now - asked < self.every:
            return False
        return last_read is None or now - last_read >= self.every

    async def read(
        self, client: RunPodClient, now: dt.datetime, *, last_read: dt.datetime | None
    ) -> BillingReading | None:
        """A fresh reading when due (its error when the read failed), else None."""
        if not self.due(client, now, last_read=last_read):
            return None
        # Marked before the call: a second caller meanwhile does not call again.
        self._asked[client] = now
        start, end = billing_window(now)
        try:
            records = await client.pod_billing(start=start, end=end)
        except answers.RunPodError as err:
            error = str(err)
        except Exception as err:  # a bug reading the answer: reported like a failed read
            log.exception("reading RunPod's pod billing failed")
            error = f"the pod billing could not be read ({type(err).__name__})"
        else:
            return BillingReading(records=records, read_at=now)
        log.warning("RunPod's pod billing could not be read (%s); the pools keep theirs", error)
        return BillingReading(error=error)


CACHE = BillingCache()
"""The process's cache: every loop of every controller in this process reads through it."""
