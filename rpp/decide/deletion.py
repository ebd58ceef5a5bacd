"""A pool being deleted: its pods go first (deletionPolicy Delete), or stay (Retain).

Where it sits: decide, in place of the pool steps, from the loop a pool shows a
deletionTimestamp until its finalizer is removed. Every Manage pool carries the
controller's finalizer (rpp/decide/pool.py adds it), so `kubectl delete rpp` and `helm
uninstall` leave the pool object in place until this module lets it go:

- Delete (the default): every member gets the member machine's `delete` order. One that
  serves is unwired and drains for drain.period first, so requests under way finish; one
  that serves nothing is terminated at once. An owned pod the status does not know (a
  create whose answer was lost) is taken in and terminated too. The executor re-reads
  each pod before terminating it and refuses one that is not the pool's. Once RunPod
  lists none of the pool's pods, the finalizer goes and Kubernetes deletes the pool.
- Retain, or a pool not in Manage (DryRun and Observe never change RunPod): nothing is
  terminated and the slots are left as they are; an Event names the pods left running,
  and the finalizer goes at once.

While the deletion progresses, DeletionBlocked is False and says what is left. When it
cannot progress, DeletionBlocked is True (a Warning Event) and says why: RunPod's pod
list cannot be read, or RunPod did not carry out the last terminate (a Read Only key, an
outage: its words are in the message). The terminate is sent again every 5 minutes
(the member machine's retry), and a human can always let the pool go by removing the
finalizer (docs/operating.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rpp.decide.ledger import unreadable
from rpp.decide.nginx_slots import slots_effect
from rpp.decide.ownership import owned_pods
from rpp.decide.state.conditions import Cond
from rpp.decide.state.loop_state import LoopState
from rpp.machines import member_step
from rpp.model.effects import EventType, RecordEvent, RemoveFinalizer
from rpp.model.members import DrainReason, MemberRecord, Phase
from rpp.model.records import MESSAGE_LIMIT, bounded
from rpp.model.spec import Mode

SHOWN = 10
"""Pods named one by one in a message; the rest are counted."""
_FAILED = frozenset({"failed", "refused", "not-owned"})


def step(loop: LoopState) -> None:
    """One loop of a pool being deleted: its effects, members and conditions."""
    spec, obs, conds = loop.spec, loop.obs, loop.conds
    if spec.mode is not Mode.MANAGE or spec.deletion_policy == "Retain":
        _leave_pods(loop)
        return
    if obs.pods is None:
        refused = obs.refused_key
        conds.set(
            Cond.DELETION_BLOCKED,
            true=True,
            reason="RunPodUnavailable" if refused is None else "RunPodKeyRefused",
            message="the pool is being deleted and its pods are terminated first, but "
            + (
                f"RunPod's pod list cannot be read ({obs.runpod_error})"
                if refused is None
                else f"RunPod refuses {refused.source.describe()} ({refused.status})"
            )
            + "; tried again every loop",
        )
        return
    known = {m.pod_id for m in loop.status.current.members}
    loop.own(
        unreadable.with_known_facts(
            owned_pods(spec, obs.pods, members=known), status=loop.status.current, spec=spec
        )
    )
    if conds.before.get(Cond.DELETION_BLOCKED.value) is None:
        pods = [*_named(loop.status.current.members), *_unknown_named(loop)]
        loop.effects.append(
            RecordEvent(
                type="Normal",
                reason="PoolDeleting",
                message=_bounded(
                    f"the pool is being deleted (deletionPolicy Delete): {len(pods)} pod(s) "
                    f"are drained and terminated before it goes: {_listing(pods)}"
                ),
            )
        )
    kept = _drive_out(loop)
    loop.status.replace(members=tuple(kept))
    if obs.slots is not None and not obs.slots_error:
        write, loop.slots = slots_effect(
            pool=loop.pool,
            spec=spec,
            members=kept,
            observed=obs.slots,
            proxy_url=loop.proxy_url,
            last=loop.slots,
        )
        if write is not None:  # nginx stops sending to the pool's pods first
            loop.effects.insert(0, write)
    if not kept and not loop.owned:
        loop.effects += [
            RecordEvent(
                type="Normal",
                reason="PoolDeleted",
                message="RunPod lists none of the pool's pods any more; the finalizer is "
                "removed and Kubernetes deletes the pool",
            ),
            RemoveFinalizer(reason="every pod of the pool is terminated"),
        ]
        return
    _report_progress(loop, kept)


def _drive_out(loop: LoopState) -> list[MemberRecord]:
    """Every member (and every owned pod not yet one) one step further out; the rest."""
    known = {m.pod_id for m in loop.status.current.members}
    strays = [
        member_step.new_member(pod, now=loop.now, adopted=True)
        for pod in loop.owned
        if pod.id not in known
    ]
    for record in strays:
        loop.note(
            "an owned pod the status did not know: terminated with the pool", pod=record.pod_id
        )
    kept: list[MemberRecord] = []
    for member in (*loop.status.current.members, *strays):
        signals = loop.plain(member.pod_id, probe=True)
        if _still_in(member):
            member = loop.order(member, member_step.delete(member, signals=signals, now=loop.now))
        moved = member_step.observe(member, signals=signals, now=loop.now)
        loop.effects += moved.effects
        loop.transition(member, moved)
        if not moved.gone:
            kept.append(moved.record)
    return kept


def _still_in(member: MemberRecord) -> bool:
    """Not yet on its way out of a deleted pool: it needs the `delete` order."""
    if member.phase in (Phase.TERMINATING, Phase.GONE):
        return False
    return not (member.phase == Phase.DRAINING and member.drain_reason == DrainReason.POOL_DELETED)


def _report_progress(loop: LoopState, kept: Sequence[MemberRecord]) -> None:
    """DeletionBlocked: True with RunPod's words when the last terminate of a pod RunPod
    still lists did not go through; else False with what is left."""
    listed = {p.id for p in loop.owned}
    for member in kept:
        failure = _last_terminate_failure(loop, member.pod_id)
        if member.phase == Phase.TERMINATING and member.pod_id in listed and failure:
            loop.conds.set(
                Cond.DELETION_BLOCKED,
                true=True,
                reason="TerminateFailed",
                message=_bounded(
                    f"the pool is being deleted, but RunPod did not terminate pod "
                    f"{member.pod_id}: {failure}; the terminate is sent again every 5m "
                    f"({len(kept)} pod(s) left)"
                ),
            )
            return
    left = [f"{m.pod_id} ({m.phase})" for m in kept]
    loop.conds.set(
        Cond.DELETION_BLOCKED,
        true=False,
        reason="TerminatingPods",
        message=_bounded(
            f"the pool is being deleted: {len(left)} pod(s) left, drained then "
            f"terminated: {_listing(left)}"
        ),
    )


def _last_terminate_failure(loop: LoopState, pod_id: str) -> str | None:
    """RunPod's words when the newest terminate of the pod in history did not succeed."""
    for entry in reversed(loop.status.current.history):
        if entry.action == "terminate" and entry.pod == pod_id:
            return entry.detail if entry.outcome in _FAILED else None
    return None


def _leave_pods(loop: LoopState) -> None:
    """Retain, or a pool not in Manage: name the pods left running, then let it go."""
    spec, obs = loop.spec, loop.obs
    if obs.pods is not None:
        known = {m.pod_id for m in loop.status.current.members}
        loop.own(owned_pods(spec, obs.pods, members=known))
    pods = [*_named(loop.status.current.members), *_unknown_named(loop)]
    kind: EventType
    if spec.mode is Mode.MANAGE:
        reason, kind, why = "PodsRetained", "Normal", "with deletionPolicy Retain"
    else:
        reason, kind = "PodsLeftRunning", "Warning"
        why = f"in {spec.mode.value}, a mode that never changes RunPod"
    if pods:
        message = (
            f"the pool is deleted {why}: its {len(pods)} pod(s) keep running, and billing: "
            f"{_listing(pods)}; adopt them in another pool (spec.adopt) or terminate them "
            "in the RunPod console"
        )
    else:
        message = f"the pool is deleted {why}; it has no pods"
    loop.effects.append(RecordEvent(type=kind, reason=reason, message=_bounded(message)))
    if obs.pool.finalizer:
        loop.effects.append(RemoveFinalizer(reason=f"the pool is deleted {why}"))


def _named(members: Iterable[MemberRecord]) -> list[str]:
    return [f"{m.pod_id} ({m.name})" for m in members]


def _unknown_named(loop: LoopState) -> list[str]:
    known = {m.pod_id for m in loop.status.current.members}
    return [f"{p.id} ({p.name})" for p in loop.owned if p.id not in known]


def _listing(items: Sequence[str]) -> str:
    shown = ", ".join(items[:SHOWN])
    more = len(items) - SHOWN
    return shown + (f" and {more} more" if more > 0 else "") if items else "none"


def _bounded(text: str) -> str:
    return bounded(text, MESSAGE_LIMIT)
