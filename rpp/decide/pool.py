"""Decide one loop of one pool: (spec, status, observations, now) -> (status, effects).

This is the pure heart of the controller (ARCHITECTURE.md: observe -> decide -> act),
one of decide's two entry points (the other, rpp/decide/fold.py, folds act's results
back in). It reads no clock, network or environment; the executor (rpp/act/) carries
the effects out according to the pool's mode.

Every loop first reports what it saw of other writers (SecondController,
StatusWriteFailing; rpp/decide/ledger/), then takes one branch:

- the pool is being deleted: rpp/decide/deletion.py;
- RunPod's pod list could not be read: rpp/decide/unlisted.py (dead pods still leave
  nginx), NotActing RunPodUnavailable, or RunPodKeyRefused naming the key RunPod
  refused (401, 403) and what to do;
- otherwise the ledger: the pods the pool owns (rpp/decide/ownership.py), those whose
  answer did not read (held), pods adopted (membership), intents settled, creates not
  listed yet (unconfirmed). A lost status is then rebuilt in one quiet loop
  (rebuild), a pool missing its slots or env Secret does nothing (NotActing), and any
  other loop runs the acting steps, in this order:

  1. judge: the health rules over this loop's probes, values and machine notes
     (rpp/decide/health/);
  2. bake: the canary's values go into its tally, and its verdict (release/);
  3. machines: every member's machine runs once (rpp/decide/members.py);
  4. drain: flagged members whose replacement is wired leave (capacity/surge_first.py);
  5. size: the autoscaler sets the size the pool aims for (capacity/autoscale.py);
  6. create: at most one create, a replacement first, then the size, through the caps
     and placement (rpp/decide/steps.py, capacity/);
  7. terminate first: a flagged pod whose replacement cannot be created and that
     serves nothing goes first (steps.py);
  8. shrink: one pod at a time when the pool is larger than its size (steps.py);
  9. roll: the release's phase and the next pods put on the new image (release/);
  10. slots: the nginx slots ConfigMap rendered from the wired members
     (rpp/decide/nginx_slots.py).

Every branch ends in rpp/decide/finish.py (the summary, Ready, the plan, the Decision).
Every mode runs the same decisions:

- Manage: the new status is the one the effects lead to; the executor acts.
- DryRun: the effects are the plan (status.plannedActions, `would:` log lines); member
  records keep describing reality, so a member whose step needs an action (a wire, a
  terminate...) keeps its previous phase, refreshed with this loop's facts.
- Observe: the same judgement, nothing planned: status, metrics and SD only.

The pool object's finalizer is bookkeeping, carried out in every mode: a Manage pool gets
it (so deleting the pool waits for its pods), a pool in another mode loses it (those
modes never terminate pods).
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from rpp.decide import deletion, members, steps, unlisted
from rpp.decide.capacity import sizing as capacity
from rpp.decide.capacity import surge_first, unconfirmed
from rpp.decide.finish import Decision, finish
from rpp.decide.health import judgement
from rpp.decide.ledger import intents, rebuild, second_controller, unreadable, write_failures
from rpp.decide.ledger.membership import find_new_members
from rpp.decide.nginx_slots import (
    RenderedSlots,
    SlotsFormatError,
    slots_effect,
    wired_pods,
)
from rpp.decide.ownership import owned_pods
from rpp.decide.release import steps as release
from rpp.decide.state.conditions import Cond, Conditions
from rpp.decide.state.loop_state import LoopState, Note, Transition, settings_for
from rpp.decide.state.working_status import WorkingStatus
from rpp.machines.signals import refresh
from rpp.model.effects import (
    TerminatePod,
)
from rpp.model.members import Phase
from rpp.model.observations import PoolObservation
from rpp.model.proxy_hosts import DEFAULT_URL_PATTERN as DEFAULT_PROXY_URL
from rpp.model.records import HistoryEntry
from rpp.model.spec import Mode, RunPodPoolSpec
from rpp.model.status import PoolStatus

__all__ = ["Decision", "Note", "Transition", "decide", "settings_for"]


def decide(
    *,
    pool: str,
    generation: int,
    spec: RunPodPoolSpec,
    status: PoolStatus,
    obs: PoolObservation,
    now: dt.datetime,
    proxy_url: str = DEFAULT_PROXY_URL,
    status_unreadable: str | None = None,
    last_slots: RenderedSlots | None = None,
) -> Decision:
    """One loop of one pool; see the module docstring for the steps and the modes.

    `status_unreadable`: the stored status could not be read (why); `status` is then
    empty and this loop rebuilds it (rpp/decide/ledger/rebuild.py). `last_slots`: the
    previous Decision's `slots`, reused when the slots did not change."""
    working = WorkingStatus(status)
    conds = Conditions(working, now=now, generation=generation)
    conds.clear(Cond.INVALID_SPEC, reason="Valid", message="the spec is valid")
    second_controller.report(conds, obs.other_controller, now=now)
    write_failures.report(conds, obs.status_writes)
    loop = LoopState(
        pool,
        spec,
        obs,
        now,
        conds,
        proxy_url,
        settings_for(spec),
        status=working,
        slots=last_slots,
    )
    if obs.pool.deleting_since is not None:
        deletion.step(loop)
        return finish(loop, generation=generation, desired=0)
    if obs.pods is None:
        blind = unlisted.step(loop) if status_unreadable is None else []
        reason, cause = _unlisted_cause(obs)
        conds.set(
            Cond.NOT_ACTING,
            true=True,
            reason=reason,
            message=f"{cause}; the pool "
            "creates, terminates and updates nothing until it can "
            + (
                f"and keeps {', '.join(blind)} in nginx although its probes fail hard: no "
                "pod passes its probe either, so the fault may be the controller's own "
                "network"
                if blind
                else "(a wired pod whose probes fail hard still leaves nginx)"
            ),
        )
        return finish(loop, generation=generation, desired=status.desired)
    known = {m.pod_id for m in status.members}
    loop.own(
        unreadable.with_known_facts(
            owned_pods(spec, obs.pods, members=known), status=status, spec=spec
        )
    )
    # Members whose next step waits for a write-ahead that failed are kept still too.
    loop.held = unreadable.held(loop.owned) | obs.status_writes.keep_still
    unreadable.report(conds, loop.owned)
    blockers, wired_now = _blockers(loop)
    # The stored status, not the working one: this loop's conditions (UnreadablePods,
    # SecondController) already make the new one look non-empty.
    rebuilt = rebuild.needed(status=status, unreadable=status_unreadable, wired=wired_now)
    for found in find_new_members(
        status=working.current, owned=loop.owned, wired=wired_now, now=now
    ):
        working.with_member(found.record)
        working.with_history(
            HistoryEntry(
                time=now, action="adopt", outcome="ok", detail=found.how, pod=found.record.pod_id
            )
        )
        loop.note(found.how, pod=found.record.pod_id)
    settled = intents.settle(working.current, owned=loop.owned, now=now)
    working.adopt(settled.status)
    loop.unconfirmed = settled.unconfirmed
    for line in settled.notes:
        loop.note(line)
    sorted_out, loop.awaiting = unconfirmed.sort_out(
        working.current,
        listed=(p.id for p in obs.pods),
        grace=spec.health.create_listing_grace,
        now=now,
    )
    working.adopt(sorted_out)
    if rebuilt is not None:
        rebuild.announce(loop, rebuilt)
        members = tuple(
            refresh(m, loop.plain(m.pod_id, probe=True), now) for m in working.current.members
        )
        working.replace(members=members)
        decision = finish(loop, generation=generation, desired=spec.replicas.min)
        return dataclasses.replace(decision, rebuilt=rebuilt)
    if blockers:
        conds.set(
            Cond.NOT_ACTING,
            true=True,
            reason=blockers[0][0],
            message="; ".join(message for _, message in blockers),
        )
        members = tuple(
            refresh(m, loop.plain(m.pod_id, probe=True), now) for m in working.current.members
        )
        working.replace(members=members)
        return finish(loop, generation=generation, desired=status.desired or spec.replicas.min)
    conds.clear(Cond.NOT_ACTING, reason="Acting", message="the pool has what it needs to act")
    return _acting_steps(loop, generation=generation)


def _acting_steps(loop: LoopState, *, generation: int) -> Decision:
    """The steps of a loop that acts, in the order they run (the module docstring's list)."""
    spec, working = loop.spec, loop.status
    # 1. judge
    before = working.current
    health = judgement.judge(
        spec=spec, status=working.current, obs=loop.obs, now=loop.now, conds=loop.conds
    )
    if (expired := judgement.hold_expired_event(before, health)) is not None:
        loop.effects.append(expired)
    # 2. bake
    canary = release.bake(loop, health)
    # 3. machines
    planned, real = members.drive(loop, health, canary)
    # 4. drain
    surge_first.drain_replaced(loop, planned)
    # 5. size
    desired = steps.autoscale_size(loop, planned)
    # 6. create
    wish = capacity.wanted_create(
        members=planned,
        desired=desired,
        pool_wide=health.blocks_replacement,
        covered=intents.pending_replacements(working.current),
        coming=len(working.current.pending_creates()),
    )
    create = steps.create(loop, wish)
    # 7. terminate first
    steps.terminate_first(loop, planned, wish if create is None else None)
    # 8. shrink: a blocked create does not stop the pool from shrinking by its bad pods.
    shrunk = create is None and steps.scale_down(loop, planned, desired)
    # 9. roll
    release.roll(
        loop, planned, wants_create=wish is not None or shrunk, pool_wide=health.pool_wide
    )
    # 10. slots
    write, loop.slots = slots_effect(
        pool=loop.pool,
        spec=spec,
        members=planned,
        observed=loop.obs.slots,
        proxy_url=loop.proxy_url,
        last=loop.slots,
    )
    if write is not None:
        loop.effects.append(write)
    if create is not None:
        loop.effects.append(create)
    if spec.mode is Mode.MANAGE:
        for effect in loop.effects:
            if isinstance(effect, TerminatePod) and effect.cooldown_datacenter:
                working.with_datacenter_replacement(effect.cooldown_datacenter, loop.now)
    kept = planned if spec.mode is Mode.MANAGE else real
    working.replace(members=tuple(m for m in kept if m.phase != Phase.GONE))
    return finish(loop, generation=generation, desired=desired)


def _unlisted_cause(obs: PoolObservation) -> tuple[str, str]:
    """Why RunPod's pod list is missing (NotActing's reason and the start of its message):
    a key RunPod refused, named by where it comes from (never its value) with what to do,
    or RunPod unavailable."""
    refused = obs.refused_key
    if refused is None:
        return "RunPodUnavailable", f"RunPod's pod list could not be read ({obs.runpod_error})"
    source = refused.source
    if source.rereads:
        fix = (
            f"put a valid key in the Secret that {source.path} is mounted from; the file is "
            "read again every loop, no restart needed"
        )
    else:
        fix = (
            f"put a valid key in {source.variable} and restart the controller (or mount the "
            "key's Secret as a file and set RUNPOD_API_KEY_FILE: a changed file needs no "
            "restart)"
        )
    stale = (
        f"; {source.variable}={source.path} cannot be used now ({source.unreadable}), so "
        "this is the key last read from it"
        if source.unreadable
        else ""
    )
    return "RunPodKeyRefused", (
        f"RunPod refused {source.describe()} ({refused.status}){stale}, so its pod list "
        f"could not be read ({obs.runpod_error}); to fix it, {fix}"
    )


def _blockers(loop: LoopState) -> tuple[list[tuple[str, str]], dict[int, str]]:
    """What keeps the pool from acting (NotActing), and what nginx serves now."""
    obs, spec = loop.obs, loop.spec
    blockers: list[tuple[str, str]] = []
    wired: dict[int, str] = {}
    name = spec.nginx.slots_config_map
    if obs.slots_error:
        blockers.append(("SlotsUnavailable", f"the slots ConfigMap {name}: {obs.slots_error}"))
    elif obs.slots is not None:
        # A missing ConfigMap is no blocker: nginx then serves none of the pool's pods
        # (examples/nginx.yaml answers 503), and the slots step creates it with what the
        # members say, in Manage only (DryRun plans it; Observe writes nothing).
        try:
            wired = wired_pods(obs.slots)
        except SlotsFormatError as err:
            blockers.append(("SlotsUnreadable", f"the slots ConfigMap {name}: {err}"))
    if obs.secret.problem:
        blockers.append(("EnvSecretUnavailable", obs.secret.problem))
    return blockers, wired
