"""A loop whose write-ahead failed, decided again until all it does is safe without one.

Where it sits: the controller, between decide and act. A loop that creates, terminates
or updates a pod stores its intents first (rpp/decide/ledger/intents.py, written by
rpp/controller/pool_writes.py `ahead`). When that write fails (a storm of 409s, a 5xx,
a timeout), the reconciler (rpp/controller/reconcile.py) does not act on its first
decision; it asks here for another, decided with `ahead_failed` set, and carries out
that one instead.

Why several decides and not one: only decide's effects show which members would need a
write-ahead, and keeping them still changes the decision. So each round tells decide
which members to keep still (those whose update or terminate needs a stored intent,
rpp/decide/ledger/write_failures.py `keep_still`) and decides again, until every effect is
safe to repeat without a write-ahead: dead and hung pods out of nginx, dead pods
terminated, Events. A create can never be made safe (decide blocks it: CreateBlocked
StatusWriteFailing), and a round that keeps no new member still would go round for
ever: both give up, and the loop carries out nothing.

Nothing here does I/O: it is decide, called a few more times with what the reconciler
remembers of its status writes (rpp/controller/status_carry.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from rpp.controller.status_carry import StatusCarry
from rpp.decide.ledger import write_failures
from rpp.decide.nginx_slots import RenderedSlots
from rpp.decide.pool import Decision, decide
from rpp.decide.state.loop_state import settings_for
from rpp.model.observations import PoolObservation
from rpp.model.spec import RunPodPoolSpec
from rpp.model.status import PoolStatus

ROUNDS = 4
"""Decides tried before giving up: each round that goes on keeps one more member still at
least, and a loop in a storm should not cost more than a few decides."""


def decide_without_write_ahead(
    name: str,
    *,
    carry: StatusCarry,
    spec: RunPodPoolSpec,
    generation: int,
    status: PoolStatus,
    obs: PoolObservation,
    now: dt.datetime,
    proxy_url: str,
    last_slots: RenderedSlots | None,
) -> Decision | None:
    """The loop decided again after its write-ahead failed: creates blocked, and the
    members whose step needs a write-ahead kept still, until every effect is safe to
    repeat without one; None if that never comes."""
    settings = settings_for(spec)
    keep: frozenset[str] = frozenset()
    for _ in range(ROUNDS):
        writes = carry.ahead_failed(name, keep)
        decision = decide(
            pool=name,
            generation=generation,
            spec=spec,
            status=status,
            obs=dataclasses.replace(obs, status_writes=writes),
            now=now,
            proxy_url=proxy_url,
            last_slots=last_slots,
        )
        waiting = write_failures.keep_still(
            decision.effects, status=decision.status, settings=settings, now=now
        )
        if waiting == frozenset():
            return decision
        if waiting is None or waiting <= keep:
            return None
        keep |= waiting
    return None
