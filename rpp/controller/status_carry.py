"""A status decided but not written, carried to the next loop; and how writes have gone.

Where it sits: the controller, beside the reconciler (rpp/controller/reconcile.py),
which asks it what status a loop decides from and tells it how each status write
ended. Nothing here is stored anywhere: it lives as long as this process.

The rule. A loop that could not write its status (the API server refused it: 409s
that outlast the retries, a 5xx, a timeout) keeps it here with the stored status it
was decided on top of (`base`). The next loop decides from the kept status when the
stored one has not moved on since (the same content); a stored status that moved past
it, because someone else wrote it (another writer, a hand edit, ReconcileFailed), wins
and the kept one is dropped. So a storm of refused writes does not send each loop back
to a stale status: hard-failure counts, quarantines, breaches and phases go on from
loop to loop, and a pod just taken out of nginx is not wired again.

It is a cache of a write in flight, not a second memory: a restart loses it, and the
controller then starts again from the stored status, as after any lost write
(rpp/decide/ledger/intents.py settles what a stopped loop left written down). What it may
carry out meanwhile is only what is safe to repeat from that stale status
(rpp/decide/ledger/write_failures.py).

`StatusWrites` (rpp/model/observations.py) is what decide hears of the writes: how
many failed since when, and why; StatusWriteFailing says it in status, an Event when
it starts, runpod_pool_status_write_failures_total counts them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from rpp.controller.status_write import StatusWrite
from rpp.model.observations import StatusWrites
from rpp.model.status import PoolStatus


@dataclass(frozen=True)
class Carried:
    """A status decided over `base` (the stored status then) that was not written."""

    base: PoolStatus
    status: PoolStatus


class StatusCarry:
    """Per pool: the status carried over, and how this process's writes have gone."""

    def __init__(self) -> None:
        self._carried: dict[str, Carried] = {}
        self._writes: dict[str, StatusWrites] = {}

    def start(self, name: str, stored: PoolStatus) -> PoolStatus:
        """The status a loop decides from: the carried one while the stored status has
        not moved on since it was decided; otherwise the stored one (dropping it)."""
        carried = self._carried.get(name)
        if carried is None:
            return stored
        if carried.base == stored:
            return carried.status
        del self._carried[name]
        return stored

    def writes(self, name: str) -> StatusWrites:
        return self._writes.get(name) or StatusWrites()

    def ahead_failed(self, name: str, keep_still: frozenset[str]) -> StatusWrites:
        """What decide hears when this loop's write-ahead failed (see `ended`)."""
        writes = self.writes(name)
        return StatusWrites(
            since=writes.since,
            failed=writes.failed,
            error=writes.error,
            ahead_failed=True,
            keep_still=keep_still,
        )

    def ended(
        self,
        name: str,
        done: StatusWrite,
        *,
        base: PoolStatus,
        now: dt.datetime,
        composed: PoolStatus | None = None,
    ) -> int:
        """Note how one status write ended; the writes it saw refused (for the counter).

        Written: nothing is carried, and writes land again. Not written: the loop's
        status (`composed`, or the last one the write composed) is carried over `base`,
        the stored status it was decided on; if the write stopped because someone else
        wrote the status, the next loop finds the stored status moved on and drops it.
        Only a write the API server refused counts as failing. `composed=None` (a
        write-ahead: the loop goes on and writes again) carries nothing."""
        if done.written:
            self._carried.pop(name, None)
            self._writes.pop(name, None)
            return 0
        status = done.status or composed
        if composed is not None and status is not None:
            self._carried[name] = Carried(base=base, status=status)
        if done.error is None:
            return 0
        before = self.writes(name)
        self._writes[name] = StatusWrites(
            since=before.since or now,
            failed=before.failed + done.failed,
            error=done.error,
        )
        return done.failed

    def forget(self, name: str) -> None:
        self._carried.pop(name, None)
        self._writes.pop(name, None)
