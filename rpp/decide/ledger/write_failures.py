"""When the pool's status cannot be written: what still happens, and saying so.

Where it sits: decide, fed by the reconciler's memory of its status writes
(`PoolObservation.status_writes`, rpp/controller/status_carry.py). A loop that creates,
terminates or updates a pod stores its intents first (rpp/decide/ledger/intents.py); when
that write-ahead fails the reconciler decides the loop again with `ahead_failed` set,
and carries out only what is safe to repeat without it:

- taking dead and hung pods out of nginx (a slots write needs no write-ahead: the
  slots ConfigMap is what nginx reads, and the next loop compares it with status);
- terminating a dead pod: out of nginx, its probes failing hard or flagged for
  Unreachable and still in breach. A terminate sent twice finds the pod gone, and a
  pod that is gone is what the next loop would terminate anyway;
- Events, and the finalizer.

Creates wait (CreateBlocked StatusWriteFailing, through rpp/decide/capacity/safeguards.py): a
create whose intent is not stored could make a second pod for one need after a crash.
With its create blocked, a dead pod's replacement cannot come first, so the pool
terminates it first (rpp/decide/steps.py `terminate_first`). Updates and every other
terminate wait too: the members they concern are kept still (`keep_still`, the same
way a pod whose RunPod answer did not read is) until a write-ahead lands.

StatusWriteFailing says it: True from the first loop that knows writes failed (it
reaches the stored status with the first write that lands, saying since when, how many
writes failed and why), False again once writes land in a following loop.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from rpp.decide.ledger import intents
from rpp.decide.state.conditions import Cond, Conditions
from rpp.machines.signals import MemberSettings, down
from rpp.model.effects import Effect
from rpp.model.members import MemberRecord
from rpp.model.observations import StatusWrites
from rpp.model.status import PoolStatus
from rpp.model.timestamps import to_rfc3339

BLOCK_REASON = "StatusWriteFailing"
"""CreateBlocked's reason while a create waits for its write-ahead."""


def report(conds: Conditions, writes: StatusWrites) -> None:
    """StatusWriteFailing from what the reconciler remembers of its writes."""
    if not writes.failing:
        conds.clear(
            Cond.STATUS_WRITE_FAILING,
            reason="StatusWritesLand",
            message="the pool's status writes land",
        )
        return
    since = f" since {to_rfc3339(writes.since)}" if writes.since is not None else ""
    conds.set(
        Cond.STATUS_WRITE_FAILING,
        true=True,
        reason="WritesRefused",
        message=f"{writes.failed} write(s) of this pool's status failed{since}, the last "
        f"with {writes.error or 'an error'}; dead and hung pods still leave nginx and dead "
        "pods are still terminated, but creates and updates wait until a status write "
        "lands (their intents are stored first): check the API server, and who else "
        "writes this pool's status (kubectl get rpp -o yaml --show-managed-fields)",
    )


def create_hold(writes: StatusWrites) -> str | None:
    """Why a create must wait (CreateBlocked's message), when this loop's write-ahead
    failed; None otherwise."""
    if not writes.ahead_failed:
        return None
    return (
        f"the pool's status cannot be written ({writes.error or 'the write failed'}) and a "
        "create waits until its intent is stored"
    )


def keep_still(
    effects: Iterable[Effect],
    *,
    status: PoolStatus,
    settings: MemberSettings,
    now: dt.datetime,
) -> frozenset[str] | None:
    """The members whose effect here needs a write-ahead: every update, and every
    terminate but a dead pod's. Empty: every effect is safe to repeat without one.
    None: a create, which no member can be kept still for (it waits in decide)."""
    waiting: set[str] = set()
    for effect in effects:
        # What needs a write-ahead is what intents.py writes one for (a RunPod write).
        intent = intents.intent_for(effect, now)
        if intent is None:
            continue
        if intent.action == "create" or intent.pod is None:
            return None
        if intent.action == "terminate" and dead(status.member(intent.pod), settings):
            continue
        waiting.add(intent.pod)
    return frozenset(waiting)


def dead(member: MemberRecord | None, settings: MemberSettings) -> bool:
    """Out of nginx and down (rpp/machines/signals.py `down`): its terminate is safe to
    send again, and waiting for a write-ahead would only keep it billing."""
    return member is not None and member.slot is None and down(member, settings)
