"""Who wrote a pool's status: this controller's mark, and the evidence of another one.

Where it sits: the controller, around each reconcile's status read and write
(rpp/controller/reconcile.py). Leader election should make one controller process the
only writer of every pool; when it does not (issue 15: two controllers created two
pods with one name), this is how the pool finds out:

- every status this process writes carries its identity, `status.writer` (its Lease
  holder identity, unique per process);
- a status whose writer is another identity, read after this process wrote that pool
  in its current term as leader, was written by someone else since: a second active
  controller;
- a create in the create log this process did not make, appeared since it first read
  the pool in this term: another controller created.

A new term (leadership won again) forgets the pools' marks, so taking over from a
replica that led before is not mistaken for a second controller. The evidence goes to
decide as one sentence (rpp/decide/ledger/second_controller.py raises SecondController).
"""

from __future__ import annotations

import datetime as dt

from rpp.model.status import PoolStatus

_SHOWN = 3  # create names quoted in the evidence


def _creates(status: PoolStatus) -> set[tuple[dt.datetime, str | None]]:
    return {(attempt.time, attempt.name) for attempt in status.create_log}


class Writers:
    """This process's identity and what it wrote, per pool, in its current term."""

    def __init__(self, identity: str | None) -> None:
        self.identity = identity
        self._wrote: set[str] = set()  # pools this process wrote in this term
        self._creates: dict[str, set[tuple[dt.datetime, str | None]]] = {}

    def start_term(self) -> None:
        """Leadership (re)gained: what another leader wrote before is no evidence."""
        self._wrote.clear()
        self._creates.clear()

    def forget(self, pool: str) -> None:
        self._wrote.discard(pool)
        self._creates.pop(pool, None)

    def evidence(self, pool: str, status: PoolStatus) -> str | None:
        """What the status read shows of another controller, in one sentence; None if
        nothing. Each create is reported once (decide holds the condition)."""
        if self.identity is None:
            return None
        found: list[str] = []
        writer = status.writer
        if pool in self._wrote and writer is not None and writer != self.identity:
            found.append(
                f"its status was written by {writer} after this controller "
                f"({self.identity}) wrote it"
            )
        creates = _creates(status)
        known = self._creates.setdefault(pool, set(creates))
        foreign = sorted(creates - known, key=lambda c: c[0])
        if foreign:
            names = ", ".join(name or "(no name)" for _, name in foreign[:_SHOWN])
            more = f" and {len(foreign) - _SHOWN} more" if len(foreign) > _SHOWN else ""
            found.append(
                f"the create log holds creates this controller did not make ({names}{more})"
            )
        known |= creates
        return "; ".join(found) or None

    def mark(self, status: PoolStatus) -> PoolStatus:
        """The status to write, carrying this process's identity."""
        if self.identity is None or status.writer == self.identity:
            return status
        return status.replace(writer=self.identity)

    def writing(self, pool: str, status: PoolStatus) -> None:
        """The status this process is about to write: its creates are its own, even if
        the write's answer is lost (a timeout after the API server stored it)."""
        self._creates.setdefault(pool, set()).update(_creates(status))

    def wrote(self, pool: str, status: PoolStatus) -> None:
        """The status this process just wrote: a later write by another is evidence."""
        self._wrote.add(pool)
        self.writing(pool, status)
