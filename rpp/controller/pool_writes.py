"""A pool's status writes, in the order a loop makes them: ahead, after, and rebuilds.

Where it sits: the controller, under the reconciler (rpp/controller/reconcile.py), over
the one conflict-safe write helper (rpp/controller/status_write.py). A loop writes
status up to twice:

- `ahead`: before it creates, terminates or updates a pod, the decided status with
  its intents (rpp/decide/ledger/intents.py). A 409 whose fresh status is still the one the
  loop read (a spec change) is written over; any other means someone else wrote
  status since. A loop whose write-ahead did not land carries out only what is safe
  to repeat without it (rpp/decide/ledger/write_failures.py).
- `after`: the status with the results folded in. On 409, a loop that acted writes
  over the fresh version only when the fresh status is still the one it wrote or read
  last (its effects are facts now); a loop that acted on nothing re-decides (the
  reconciler's `redecide`).

Every status written carries this process's identity and is told to `Writers`
(rpp/controller/writers.py), which is how a second controller is seen.

`keep_old` keeps a status the controller must rebuild (rpp/decide/ledger/rebuild.py) in the
pool's `<group>/status-before-rebuild` annotation first.

It also remembers, per pool, the status this process last wrote, as stored and as
parsed: the next loop reads back the same dict, and parsing it again is ~5% of a loop.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from rpp.adapters.kube.api import KubeApi, KubeError
from rpp.adapters.logs import layer_logger
from rpp.controller.status_write import StatusWrite, write_status
from rpp.controller.writers import Writers
from rpp.model.codec import StatusFormatError
from rpp.model.status import PoolStatus

log = layer_logger("rpp.controller")

OLD_STATUS_ANNOTATION = "status-before-rebuild"
"""Annotation (under the CRD group) that keeps a status the controller had to rebuild."""
OLD_STATUS_LIMIT = 100_000  # characters; annotations share 256 KiB per object

Redecide = Callable[[Mapping[str, Any]], Awaitable[PoolStatus | None]]


def _fresh_status(fresh: Mapping[str, Any]) -> PoolStatus | None:
    try:
        return PoolStatus.from_stored(fresh.get("status") or {})
    except StatusFormatError:
        return None


class PoolWrites:
    """Every status write of one reconciler, for any pool."""

    def __init__(self, *, kube: KubeApi, group: str, writers: Writers) -> None:
        self.kube = kube
        self.group = group
        self.writers = writers
        # Kept only when the server stored exactly what was sent, and hit only on equal
        # content, so a status pruned by the server or written by anyone else is parsed.
        self._written: dict[str, tuple[Mapping[str, Any], PoolStatus]] = {}

    def read(self, name: str, stored: Mapping[str, Any]) -> PoolStatus:
        """The stored status; `StatusFormatError` when it cannot be read."""
        written = self._written.get(name)
        if written is not None and written[0] == stored:
            return written[1]  # from_stored(s.stored()) == s: the round trip is exact
        return PoolStatus.from_stored(stored)

    def forget(self, name: str) -> None:
        """A deleted pool: nothing is remembered about it."""
        self._written.pop(name, None)

    def _remember(self, name: str, done: StatusWrite) -> None:
        if done.stored_as_sent and done.status is not None:
            self._written[name] = (done.stored, done.status)
        else:  # not written, or the API server pruned or changed it: read back what it keeps
            self._written.pop(name, None)

    async def ahead(
        self, obj: Mapping[str, Any], read: PoolStatus, ahead: PoolStatus
    ) -> StatusWrite:
        """Store the decided status with its intents before acting. Not `written`: the
        loop carries out nothing that needs its write-ahead."""
        name = str(obj["metadata"]["name"])
        ahead = self.writers.mark(ahead)

        async def on_conflict(fresh: Mapping[str, Any]) -> PoolStatus | None:
            if _fresh_status(fresh) != read:
                log.warning("status changed before acting; the next loop decides")
                return None
            return ahead

        done = await self._write(name, obj, ahead, on_conflict)
        if not done.written or done.status is None:
            log.warning("intents not written; only what is safe to repeat is carried out")
        return done

    async def after(
        self,
        obj: Mapping[str, Any],
        before: PoolStatus,
        after: PoolStatus,
        *,
        redecide: Redecide | None,
    ) -> StatusWrite:
        """Write the loop's status; `redecide` (a loop that acted on nothing) decides
        again on a pool re-read after a 409, None when the loop acted."""
        name = str(obj["metadata"]["name"])
        after = self.writers.mark(after)

        async def on_conflict(fresh: Mapping[str, Any]) -> PoolStatus | None:
            if redecide is not None:
                retry = await redecide(fresh)
                if retry is None:
                    # The re-read pool wants actions this loop did not take: a status
                    # claiming them would lie. The next loop decides and acts.
                    log.info("the pool changed during the loop; the next loop acts")
                    return None
                return self.writers.mark(retry)
            if _fresh_status(fresh) != before:
                log.error(
                    "status changed while this loop acted; not overwriting it "
                    "(is a second controller acting on this namespace?)"
                )
                return None
            return after

        return await self._write(name, obj, after, on_conflict)

    async def _write(
        self,
        name: str,
        obj: Mapping[str, Any],
        status: PoolStatus,
        on_conflict: Callable[[Mapping[str, Any]], Awaitable[PoolStatus | None]],
    ) -> StatusWrite:
        # Its creates are this process's own even if the answer is lost (writers.py).
        self.writers.writing(name, status)
        done = await write_status(
            self.kube, name=name, obj=obj, status=status, on_conflict=on_conflict
        )
        if done.written:
            self.writers.wrote(name, done.status or status)
        self._remember(name, done)
        return done

    async def keep_old(self, obj: Mapping[str, Any], why: str) -> Mapping[str, Any]:
        """Keep the status about to be rebuilt in an annotation; the pool as stored now."""
        name = str(obj["metadata"]["name"])
        old = json.dumps(obj.get("status"), sort_keys=True, default=str)
        if len(old) > OLD_STATUS_LIMIT:
            cut = f"(the first {OLD_STATUS_LIMIT} of {len(old)} characters) "
            old = cut + old[:OLD_STATUS_LIMIT]
        key = f"{self.group}/{OLD_STATUS_ANNOTATION}"
        try:
            return await self.kube.annotate_pool(name, annotations={key: old})
        except KubeError as err:
            log.error("the old status could not be kept (%s): %s", why, err)
            return obj
