"""Write intent before acting, and settle what a stopped loop left written down.

Where it sits: decide, at both ends of a loop. A loop that creates, terminates or
updates a pod does it in this order (rpp/controller/reconcile.py):

1. decide, then `write_ahead`: the new status carries one `Intent` per RunPod write
   (the pod's unique name and what a create is for: the member it replaces, or the
   pool's size), and the reconciler stores it with a conflict-safe status write before
   any RunPod call; if that write fails, nothing is carried out;
2. act, then fold (rpp/decide/fold.py) removes each intent whose outcome is known;
3. the status write.

A crash, or a status write lost to conflicts or another writer, between 1 and 3
leaves intents in the stored status. The next loop settles them here, from RunPod's
listing, before anything else is decided (`settle`):

- a create whose pod is listed (rpp/decide/ledger/membership.py adopts it by name with its
  purpose and replacement link) is logged as a create; one whose pod has not appeared
  `SETTLE_AFTER` after it was written down is logged as a create of unknown outcome:
  either way it counts toward limits.maxCreatesPerHour, and until then it covers its
  need (rpp/decide/capacity/sizing.py), so no sequence of crashes makes a second pod for one
  need or passes the hourly cap;
- a terminate or an update whose pod is gone is done; an update whose pod runs the
  image asked for landed (its rollback backoff starts); one whose pod is listed
  unchanged is sent again by the member's machine (`unconfirmed` signals), so a
  crash never leaves a drained pod un-terminated or an update half-known.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import assert_never

from rpp.decide.capacity.safeguards import CREATE_BACKOFF
from rpp.machines import rollout
from rpp.model.effects import (
    AddFinalizer,
    CreatePod,
    Effect,
    RecordEvent,
    RemoveFinalizer,
    TerminatePod,
    Unwire,
    UpdatePod,
    Wire,
    WriteSlots,
)
from rpp.model.observations import RunPodPod
from rpp.model.records import HistoryEntry, Intent
from rpp.model.results import EffectResult, Result
from rpp.model.status import PoolStatus
from rpp.model.timestamps import to_rfc3339

SETTLE_AFTER = CREATE_BACKOFF
"""How long a written-down create waits for its pod to appear before it is settled as
a create of unknown outcome (the same 5 minutes a create that answered 5xx waits)."""


def ceil_second(when: dt.datetime) -> dt.datetime:
    """`when` rounded up to the second: a create logged no earlier than it happened
    keeps counting for at least the hour after it (status keeps whole seconds)."""
    whole = when.replace(microsecond=0)
    return whole if whole == when else whole + dt.timedelta(seconds=1)


def intent_for(effect: Effect, now: dt.datetime) -> Intent | None:
    """The intent to write down before carrying `effect` out; None for no RunPod write."""
    match effect:
        case CreatePod():
            return Intent(
                action="create",
                time=now,
                name=effect.name,
                replacement_for=effect.replacement_for,
                purpose=effect.reason,
            )
        case TerminatePod():
            return Intent(
                action="terminate",
                time=now,
                name=effect.name,
                pod=effect.pod_id,
                purpose=effect.reason,
            )
        case UpdatePod():
            return Intent(
                action="update",
                time=now,
                name=effect.name,
                pod=effect.pod_id,
                image=effect.image,
                rollback=effect.rollback,
                purpose=effect.reason,
            )
        case Wire() | Unwire() | WriteSlots() | RecordEvent() | AddFinalizer() | RemoveFinalizer():
            return None  # no RunPod write: nothing a crash could leave half-known
        case _:
            # A new effect type is a mypy error here until it says whether it writes.
            assert_never(effect)


def write_ahead(status: PoolStatus, effects: Iterable[Effect], now: dt.datetime) -> PoolStatus:
    """The status with an intent for every RunPod write among `effects`."""
    for effect in effects:
        intent = intent_for(effect, now)
        if intent is not None:
            status = status.with_intent(intent)
    return status


def done(status: PoolStatus, result: EffectResult, now: dt.datetime) -> PoolStatus:
    """Fold: the intent of an effect whose outcome is now known is removed."""
    if result.result is Result.PLANNED:
        return status
    intent = intent_for(result.effect, now)
    return status if intent is None else status.without_intent(*intent.key)


@dataclass
class Settled:
    """What settling a stopped loop's intents did: the status, lines for the log, and
    the members whose terminate or update must be sent again."""

    status: PoolStatus
    notes: list[str] = field(default_factory=list)
    unconfirmed: dict[str, str] = field(default_factory=dict)  # pod id -> action


def settle(status: PoolStatus, *, owned: Sequence[RunPodPod], now: dt.datetime) -> Settled:
    """Settle the intents a loop that stopped left in status; see the module docstring.

    Call after membership has adopted the listing's unknown pods (a created pod is then
    a member, found by the name its intent gives)."""
    out = Settled(status)
    listed = {p.id: p for p in owned}
    members = {m.name: m for m in status.members}
    for intent in status.intents:
        when = to_rfc3339(intent.time)
        if intent.action == "create":
            member = members.get(intent.name)
            if member is not None:
                _log_create(out, intent, now, "adopted", pod=member.pod_id)
                _note(
                    out,
                    now,
                    intent,
                    f"pod {intent.name} of the create written down at {when} "
                    f"is listed as {member.pod_id}: adopted, and counted as a create",
                )
            elif now - intent.time >= SETTLE_AFTER:
                _log_create(out, intent, now, "unknown", pod=None)
                _note(
                    out,
                    now,
                    intent,
                    f"no pod {intent.name} appeared in the "
                    f"{SETTLE_AFTER.seconds // 60} minutes after its create was written "
                    f"down at {when}: counted as a create whose outcome is unknown",
                )
            continue
        pod = listed.get(intent.pod or "")
        if pod is None:
            out.status = out.status.without_intent(*intent.key)
        elif intent.action == "update" and pod.image == intent.image:
            out.status = _update_landed(out.status, intent)
            _note(
                out,
                now,
                intent,
                f"the update of pod {intent.pod} to {intent.image} written down at {when} landed",
            )
        else:
            out.unconfirmed[pod.id] = intent.action
    return out


def _log_create(
    out: Settled, intent: Intent, now: dt.datetime, outcome: str, *, pod: str | None
) -> None:
    status = out.status.without_intent(*intent.key).with_create_attempt(
        ceil_second(now), outcome, name=intent.name, replacement_for=intent.replacement_for
    )
    old = status.member(intent.replacement_for or "")
    if pod is not None and old is not None and old.replaced_by is None:
        status = status.with_member(old.replace(replaced_by=pod))
    out.status = status


def _update_landed(status: PoolStatus, intent: Intent) -> PoolStatus:
    status = status.without_intent(*intent.key)
    effect = UpdatePod(
        pod_id=intent.pod or "",
        name=intent.name,
        image=intent.image or "",
        from_image="",
        reason=intent.purpose,
        rollback=intent.rollback,
    )
    return rollout.after_update(status, effect, EffectResult(effect, Result.OK), intent.time)


def _note(out: Settled, now: dt.datetime, intent: Intent, text: str) -> None:
    out.notes.append(text)
    out.status = out.status.with_history(
        HistoryEntry(
            time=now, action=intent.action, outcome="settled", detail=text, pod=intent.pod
        )
    )


def pending_replacements(status: PoolStatus) -> frozenset[str]:
    """Members whose replacement is written down and not settled yet: covered."""
    return frozenset(i.replacement_for for i in status.pending_creates() if i.replacement_for)


def attempts_by_name(status: PoolStatus) -> Mapping[str, tuple[str, str | None]]:
    """Every create the pool attempted, by the name it asked for: (how, replaces).

    Membership adopts a listed pod by this name and keeps what it was for."""
    found: dict[str, tuple[str, str | None]] = {
        a.name: (f"a create that answered {a.outcome}", a.replacement_for)
        for a in status.create_log
        if a.name
    }
    for i in status.pending_creates():
        found[i.name] = (
            f"a create written down at {to_rfc3339(i.time)} whose answer was never read",
            i.replacement_for,
        )
    return found
