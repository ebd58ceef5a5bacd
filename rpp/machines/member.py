"""The member state machine: the lifecycle of one RunPod pod in a pool.

This is decide code. Each loop the pool rehydrates one `MemberMachine` per member
from its record in status (the record's `phase` is the current state, so no entry
actions run on construction), sends it that loop's events, and writes the record back.
Guards are named methods that read only the record, the loop's `MemberSignals` and
`now`; actions change the record and append effects (rpp/model/effects.py) to an outbox.
Nothing here does I/O or reads the clock. rpp/commands/diagrams.py renders this
class into docs/diagrams/ and the README table, so the names below are what users see.

Events: `observe` (once per loop, after `refresh`), `observe_unlisted` (instead of
`observe` in a loop whose RunPod listing could not be read: quarantine only), and the
pool's orders `drain`
(Ready -> Draining for an image update or a scale-down), `replacement_wired`
(Flagged -> Draining), `retire` (Warming -> Terminating when the pool shrinks) and
`delete` (every member on its way out: the pool is being deleted) and `let_go` (a
Flagged member the pool will not replace first: out of nginx already, it is terminated
at once; still serving, it drains).
An event none of whose transitions applies is a no-op
(`allow_event_without_transition`): a quiet loop takes no transition at all, which
is most loops of most members. The driver asks `may_move` first, which tries the same
transitions' guards without the library's dispatch, and sends `observe` only when one
passes (a quiet loop then costs a few guard calls). The pool drives the machine through
rpp/machines/member_step.py, which turns an order that moved nothing (sent to a member
in the wrong phase, a bug in the pool) into a `ValueError`.

Quarantine: a wired Ready member whose last 2 probes failed hard (no connection, no
answer within the probe timeout, or RunPod's proxy answering 404, 502 or 503) leaves
nginx at once (Ready -> Ready, `quarantine`), not after the Unreachable rule's
duration, and also in a loop that could not read RunPod's listing (a Flagged member
still serving is unwired for good the same way, `unwire_failing`); it goes back into a
free slot after 3 passing probes (`release`), or after one when nginx has no pod of
the pool (`release_into_empty`). The last wired pod, or one of a pool-wide
degradation, is kept in nginx only while the controller may be blind (`blind`: nothing
this loop shows its own network works), so a dead pod never stays wired, and so
billed, for a rule's sake. It stays Ready and counts toward the pool's size, so its
replacement still waits for a rule's full duration (Ready -> Flagged), which ends the
quarantine: from then on the replacement takes its place.

Flagged: the pool creates its replacement first (rpp/decide/capacity/surge_first.py), and a
member that still serves (slow, erring, a host notice) keeps serving until it is wired
(`replacement_wired`). One out of nginx and dead (its probes fail hard, or the
Unreachable rule is still due) does not wait: it is terminated at once (Flagged ->
Terminating, `terminate_dead`), since it gives no capacity and only bills. One out of
nginx but alive goes once health.warmupTimeout passes with no replacement serving
(`terminate_unserved`).

`StateMachine` (not `StateChart`) on purpose: it writes the phase once per transition
and lets action exceptions propagate, so a failed decision never half-persists. Only
`allow_event_without_transition` is set as `StateChart` has it.
"""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import Callable
from typing import Any, ClassVar

from statemachine import State, StateMachine
from statemachine.transition import Transition

from rpp.machines.member_update import UpdateCallbacks
from rpp.machines.member_view import MemberView, Move
from rpp.machines.signals import UNREACHABLE, MemberSignals, fails_hard
from rpp.model.members import DrainReason, MemberRecord, Phase, Quarantine, UpdateProgress

Guards = tuple[tuple[Callable[..., Any], bool, tuple[str, ...]], ...]
"""A transition's guards as direct calls: (bound method, the value it must return, its
parameters). `unless` guards must return False."""


def _elapsed(since: dt.datetime | None, now: dt.datetime) -> float:
    return 0.0 if since is None else (now - since).total_seconds()


class MemberMachine(UpdateCallbacks, StateMachine):
    """Warming -> Ready -> (Flagged | Draining) -> (Updating | Terminating) -> Gone.

    The update transitions' guards and actions are in `UpdateCallbacks`
    (rpp/machines/member_update.py); the others are below.
    """

    warming = State(initial=True, value=Phase.WARMING.value)
    ready = State(value=Phase.READY.value)
    flagged = State(value=Phase.FLAGGED.value)
    draining = State(value=Phase.DRAINING.value)
    updating = State(value=Phase.UPDATING.value)
    terminating = State(value=Phase.TERMINATING.value)
    gone = State(final=True, value=Phase.GONE.value)

    # Per source state, transitions are tried in this order; the first whose guards pass
    # wins. When none passes, nothing happens (allow_event_without_transition below).
    observe = (
        gone.from_(
            warming, ready, flagged, draining, updating, cond="missing_for_loops", on="vanish"
        )
        | terminating.to(gone, cond="not_listed", on="finish_termination")
        | warming.to(ready, cond=["passes_in_a_row", "slot_offered"], on="wire_offered_slot")
        | warming.to(terminating, cond="warmup_timed_out", on="terminate_warmup")
        | ready.to(draining, cond="canary_failed", on="reject_canary")
        | ready.to(
            flagged,
            cond=["unreachable_due", "wired"],
            unless=["pool_wide", "blind"],
            on=["flag", "unwire_unreachable"],
        )
        | ready.to(flagged, cond="rule_due", unless="pool_wide", on="flag")
        | ready.to(ready, cond=["failing_hard", "wired"], unless="blind", on="quarantine")
        | ready.to(ready, cond=["quarantined", "passes_in_a_row", "slot_offered"], on="release")
        | ready.to(
            ready,
            cond=["quarantined", "passes_now", "slot_offered", "nginx_empty"],
            on="release_into_empty",
        )
        | flagged.to(
            flagged, cond=["unreachable_due", "wired"], unless="blind", on="unwire_unreachable"
        )
        | flagged.to(flagged, cond=["failing_hard", "wired"], unless="blind", on="unwire_failing")
        | flagged.to(terminating, cond=["serves_nothing", "dead"], on="terminate_dead")
        | flagged.to(
            terminating, cond=["serves_nothing", "surge_overdue"], on="terminate_unserved"
        )
        | draining.to(updating, cond=["drain_elapsed", "rollback_planned"], on="send_rollback")
        | draining.to(updating, cond=["drain_elapsed", "update_planned"], on="send_update")
        | draining.to(terminating, cond="drain_elapsed", on="terminate_drained")
        | updating.to(updating, cond="update_unconfirmed", on="resend_update")
        | updating.to(
            ready,
            cond=["new_process_running", "passes_in_a_row", "slot_offered", "is_canary"],
            unless="rolling_back",
            on="start_bake",
        )
        | updating.to(
            ready,
            cond=["new_process_running", "passes_in_a_row", "slot_offered"],
            on="finish_update",
        )
        | updating.to(terminating, cond="rollback_timed_out", on="abandon_update")
        | updating.to(updating, cond="update_failed", unless="rolling_back", on="roll_back")
        | terminating.to(terminating, cond="terminate_unconfirmed", on="retry_terminate")
        | terminating.to(terminating, cond=["listed", "terminate_failed"], on="retry_terminate")
        | terminating.to(terminating, cond="terminate_retry_due", on="retry_terminate")
    )
    # A loop whose RunPod listing could not be read (NotActing, RunPodUnavailable): no
    # lifecycle move without RunPod's word, but quarantine needs none and is safe to
    # repeat, so a dead or hung pod still leaves nginx (rpp/decide/unlisted.py).
    observe_unlisted = ready.to(
        ready, cond=["failing_hard", "wired"], unless="blind", on="quarantine"
    ) | flagged.to(flagged, cond=["failing_hard", "wired"], unless="blind", on="unwire_failing")
    drain = ready.to(draining, validators="valid_drain_order", on="start_drain")
    replacement_wired = flagged.to(draining, on="drain_replaced")
    retire = warming.to(terminating, on="terminate_retired")
    # A serving member drains first (in-flight requests finish); one that serves
    # nothing goes at once. Draining re-marks its drain so no update follows it.
    delete = (
        ready.to(draining, on="drain_for_deletion")
        | flagged.to(draining, on="drain_for_deletion")
        | draining.to(draining, on="drain_for_deletion")
        | warming.to(terminating, on="terminate_for_deletion")
        | updating.to(terminating, on="terminate_for_deletion")
    )
    let_go = flagged.to(terminating, cond="serves_nothing", on="terminate_released") | (
        flagged.to(draining, on="drain_released")
    )

    ORDERS: ClassVar[dict[str, str]] = {
        "drain": "the pool chose it for an image update or a scale-down",
        "replacement_wired": "its replacement is wired",
        "retire": "the pool shrinks and it is not serving yet (scale-down takes these first)",
        "delete": "the pool is being deleted with deletionPolicy Delete",
        "let_go": "the pool will not replace it first: it has enough serving pods without "
        "it, or its replacement cannot be created while it stays (terminate-first)",
    }
    """When the pool sends each of its orders (the docs show this; `let_go` has one
    guard, which picks where the member goes)."""

    allow_event_without_transition = True  # "nothing applies" is a no-op, not an error

    def __init__(self, view: MemberView) -> None:
        # Every record's phase names a state: `Phase` is the states' values (tested).
        self.view = view
        # Per (phase, event), the transitions the library would try, in its order, with
        # their guards as direct calls where they can be (`may_move`).
        self._tried: dict[tuple[str, str], tuple[tuple[Transition, Guards | None], ...]] = {}
        super().__init__(model=view, state_field="phase")

    def rehydrate(self, record: MemberRecord) -> MemberView:
        """Put this machine in `record`'s phase (no entry actions), with an empty outbox.

        The library reads the state from the model on every access, so one machine can
        serve member after member: building one costs ~2 ms, reusing it ~0.3 ms.
        """
        self.view.load(record)
        return self.view

    def may_move(self, event: str, **kwargs: Any) -> bool:
        """Whether any of `event`'s transitions from the current phase passes its guards.

        The driver asks this before sending `observe`: when it is False, sending would
        take no transition (a no-op, `allow_event_without_transition`), so the quiet
        loop of a quiet member skips the library's dispatch, most of a loop's cost. The
        answer comes from this class's own transitions, tried in the library's order,
        with their guards called with the kwargs `send` would get, so the rules stay
        here, once (tests/machines/test_member_machine.py checks the answer against `send`). A
        transition with validators counts as one that may move: only sending runs them.
        """
        phase = str(self.view.phase)
        tried = self._tried.get((phase, event))
        if tried is None:
            state = self.states_map[phase]
            tried = tuple(
                (t, self._direct_guards(t, kwargs))
                for t in state.transitions
                if not t.initial and t.match(event)
            )
            self._tried[(phase, event)] = tried
        for transition, guards in tried:
            if guards is None:
                if self._callbacks.all(transition.cond.key, **kwargs):
                    return True
                continue
            for guard, expected, names in guards:
                if len(names) == 1:  # most guards read the signals, or only the record
                    value = guard(kwargs[names[0]])
                else:
                    value = guard(*[kwargs[name] for name in names]) if names else guard()
                if bool(value) is not expected:
                    break
            else:
                return True
        return False

    def _direct_guards(self, transition: Transition, kwargs: dict[str, Any]) -> Guards | None:
        """The transition's guards as plain method calls: (method, expected, its params).

        None when the library has to evaluate them: validators, a guard that is not one
        of this class's methods (an expression such as "a and not b"), or one with a
        parameter `send` would not pass or that cannot be passed by position.
        """
        if list(transition.validators):
            return None
        guards = []
        for spec in transition.cond:
            method = getattr(self, str(spec.attr_name), None)
            if not inspect.ismethod(method):
                return None
            parameters = inspect.signature(method).parameters.values()
            names = tuple(p.name for p in parameters)
            positional = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in parameters)
            if not positional or not set(names) <= kwargs.keys():
                return None
            guards.append((method, spec.expected_value is not False, names))
        return tuple(guards)

    # --- guards: pure reads of the record, the signals and now ---------------------

    def missing_for_loops(self, signals: MemberSignals) -> bool:
        """RunPod has not listed the pod for 2 loops in a row"""
        needed = signals.settings.missing_loops_to_gone
        return not signals.listed and self.view.current.missing_loops >= needed

    def not_listed(self, signals: MemberSignals) -> bool:
        """RunPod no longer lists the pod"""
        return not signals.listed

    def passes_in_a_row(self, signals: MemberSignals) -> bool:
        """3 probes in a row passed"""
        return self.view.current.pass_streak >= signals.settings.passes_needed

    def passes_now(self) -> bool:
        """its last probe passed"""
        return self.view.current.pass_streak >= 1

    def nginx_empty(self, signals: MemberSignals) -> bool:
        """nginx has no pod of the pool"""
        # For a member out of nginx, "last wired" means no other member is wired.
        return self.view.current.slot is None and signals.last_wired

    def slot_offered(self, signals: MemberSignals) -> bool:
        """the pool offers a free nginx slot"""
        return signals.offered_slot is not None

    def warmup_timed_out(self, signals: MemberSignals, now: dt.datetime) -> bool:
        """warming longer than health.warmupTimeout"""
        return _elapsed(self.view.current.since, now) >= signals.settings.warmup_timeout_s

    def unreachable_due(self, signals: MemberSignals) -> bool:
        """the Unreachable rule breached for its full duration"""
        return UNREACHABLE in signals.flagged

    def rule_due(self, signals: MemberSignals) -> bool:
        """a health rule breached for its full duration"""
        return bool(signals.flagged)

    def wired(self) -> bool:
        """the pod is in an nginx slot"""
        return self.view.current.slot is not None

    def pool_wide(self, signals: MemberSignals) -> bool:
        """every Ready pod is degraded (PoolWideDegradation)"""
        return signals.pool_wide

    def blind(self, signals: MemberSignals) -> bool:
        """it is the last wired pod or all pods fail, and nothing shows the network works"""
        # No sign: RunPod's pod list was not read this loop and no other pod of the pool
        # passed its probe. All probes failing at once may be the controller's own network,
        # and emptying nginx on that guess would stop traffic the pods still serve. But
        # nginx reaches the pods through the same RunPod proxy as the probes: once this
        # loop read RunPod's list, or another pod passed its probe, a pod the controller
        # cannot reach is one nginx cannot use either, so it leaves nginx whatever its rank.
        return (signals.last_wired or signals.pool_wide) and not signals.network_ok

    def failing_hard(self, signals: MemberSignals) -> bool:
        """its last 2 probes failed hard (no answer, or none in time; RunPod's 404, 502, 503)"""
        return fails_hard(self.view.current, signals.settings)

    def quarantined(self) -> bool:
        """it is quarantined"""
        return self.view.current.quarantine is not None

    def drain_elapsed(self, signals: MemberSignals, now: dt.datetime) -> bool:
        """drain.period elapsed since it was unwired"""
        return _elapsed(self.view.current.since, now) >= signals.settings.drain_period_s

    def terminate_retry_due(self, signals: MemberSignals, now: dt.datetime) -> bool:
        """RunPod still lists it a while after the terminate was sent"""
        record = self.view.current
        sent = record.terminate_requested_at or record.since
        return signals.listed and _elapsed(sent, now) >= signals.settings.terminate_retry_s

    def serves_nothing(self) -> bool:
        """it is out of nginx"""
        return self.view.current.slot is None

    def dead(self, signals: MemberSignals) -> bool:
        """its probes fail hard, or the Unreachable rule is still due"""
        # Surge-first keeps a flagged pod for the capacity it still gives while its
        # replacement warms; a dead pod out of nginx gives none and only bills.
        return fails_hard(self.view.current, signals.settings) or UNREACHABLE in signals.flagged

    def surge_overdue(self, signals: MemberSignals, now: dt.datetime) -> bool:
        """flagged for health.warmupTimeout: no replacement came to serve in time"""
        return _elapsed(self.view.current.since, now) >= signals.settings.warmup_timeout_s

    def listed(self, signals: MemberSignals) -> bool:
        """RunPod lists the pod"""
        return signals.listed

    def terminate_failed(self) -> bool:
        """the last terminate failed (RunPod answered an error, or nothing)"""
        return self.view.current.terminate_error is not None

    def terminate_unconfirmed(self, signals: MemberSignals) -> bool:
        """its terminate was written down but never answered (the loop stopped)"""
        return signals.unconfirmed == "terminate" and signals.listed

    def valid_drain_order(self, reason: str | None, image: str | None) -> None:
        """Reject a drain order the pool should never send."""
        record = self.view.current
        if reason not in (DrainReason.UPDATE, DrainReason.SCALE_DOWN):
            raise ValueError(f"drain of {record.pod_id}: reason must be update or scale-down")
        if reason == DrainReason.UPDATE and not (image and record.image):
            raise ValueError(
                f"drain of {record.pod_id} for update needs the new image "
                "and the pod's current one"
            )

    # --- actions: change the record, append effects --------------------------------

    def vanish(self, signals: MemberSignals) -> None:
        """Unwire if wired; Event PodVanished"""
        self._unwire("RunPod no longer lists the pod")
        record = self.view.current
        loops = f"{record.missing_loops} loops in a row"
        text = f"pod {record.pod_id} ({record.name}) was not listed by RunPod for {loops}"
        self._event("Warning", "PodVanished", text)

    def finish_termination(self) -> None:
        """Event PodTerminated"""
        self._unwire("terminated")
        record = self.view.current
        self._event("Normal", "PodTerminated", f"pod {record.pod_id} ({record.name}) is gone")

    def wire_offered_slot(self, signals: MemberSignals) -> None:
        """Wire(slot)"""
        self._wire(signals.offered_slot)

    def terminate_warmup(self, signals: MemberSignals, now: dt.datetime) -> None:
        """TerminatePod, datacenter to cooldown; Event WarmupTimeout"""
        self._unwire("warm-up timed out")
        record = self.view.current
        text = (
            f"pod {record.pod_id} ({record.name}) did not pass {signals.settings.passes_needed} "
            f"probes in a row within {signals.settings.warmup_timeout_s:g}s"
        )
        self._terminate(text, now=now, cooldown=True)
        self._event("Warning", "WarmupTimeout", text)

    def flag(self, signals: MemberSignals) -> None:
        """Event PodFlagged

        The pool then creates a replacement first (surge-first).
        """
        record = self.view.current
        rule = signals.flagged[0] if signals.flagged else UNREACHABLE
        reason = signals.reasons.get(rule) or f"{rule} breached"
        self.view.change(flagged_rule=rule, flagged_reason=reason)
        self._event(
            "Warning", "PodFlagged", f"pod {record.pod_id} ({record.name}): {rule}: {reason}"
        )

    def quarantine(self, now: dt.datetime) -> None:
        """Unwire; Event PodQuarantined

        Out of nginx at once, without waiting for the Unreachable rule's duration:
        nginx skips a failing slot only for seconds, and each time it tries the slot
        again a request pays for it. The rules go on judging it (replacement).
        """
        record = self.view.current
        probe = record.last_probe
        reason = (probe.error if probe else None) or "probes failed hard"
        self._unwire("quarantined: its probes failed hard")
        self.view.change(quarantine=Quarantine(since=now, reason=reason))
        self._event(
            "Warning",
            "PodQuarantined",
            f"pod {record.pod_id} ({record.name}) is out of nginx: its last "
            f"{record.hard_failures} probes failed hard ({reason}); it goes back once "
            "it passes again",
        )

    def release(self, signals: MemberSignals) -> None:
        """Wire(slot); Event PodReleased"""
        record = self.view.current
        self._back_in_nginx(signals, f"passed {record.pass_streak} probes in a row")

    def release_into_empty(self, signals: MemberSignals) -> None:
        """Wire(slot); Event PodReleased"""
        # Waiting for 3 passes guards the other pods' traffic against a flapping pod;
        # with no other pod in nginx there is none to guard, and every loop out is lost.
        self._back_in_nginx(signals, "passed its probe", "which had no pod of the pool")

    def _back_in_nginx(self, signals: MemberSignals, passed: str, *more: str) -> None:
        record = self.view.current
        self._wire(signals.offered_slot)
        self.view.change(quarantine=None)
        text = ", ".join(
            (f"pod {record.pod_id} ({record.name}) {passed} and is back in nginx", *more)
        )
        self._event("Normal", "PodReleased", text)

    def unwire_unreachable(self) -> None:
        """Unwire"""
        self._unwire("unreachable")

    def unwire_failing(self) -> None:
        """Unwire; Event FlaggedPodUnwired

        A flagged pod serves until its replacement does, but not once its probes fail
        hard: it would only fail or hold the requests nginx sends it.
        """
        record = self.view.current
        probe = record.last_probe
        reason = (probe.error if probe else None) or "probes failed hard"
        self._unwire("its probes failed hard")
        self._event(
            "Warning",
            "FlaggedPodUnwired",
            f"pod {record.pod_id} ({record.name}) is out of nginx: its last "
            f"{record.hard_failures} probes failed hard ({reason}); its replacement takes "
            "its place",
        )

    def start_drain(self, reason: str, image: str | None) -> None:
        """Unwire"""
        record = self.view.current
        self._unwire(f"drain for {reason}")
        update = None
        if reason == DrainReason.UPDATE and image and record.image:
            update = UpdateProgress(from_image=record.image, to_image=image)
        self.view.change(drain_reason=str(reason), update=update)

    def drain_replaced(self) -> None:
        """Unwire if wired"""
        self._unwire("its replacement is wired")
        self.view.change(drain_reason=DrainReason.REPLACE.value)

    def terminate_drained(self, now: dt.datetime) -> None:
        """TerminatePod, datacenter to cooldown if replaced"""
        record = self.view.current
        reason = record.drain_reason or "drained"
        cooldown = record.drain_reason == DrainReason.REPLACE
        self._terminate(f"drained ({reason})", now=now, cooldown=cooldown)

    def terminate_retired(self, now: dt.datetime) -> None:
        """TerminatePod; Event PodRetired"""
        record = self.view.current
        text = f"pod {record.pod_id} ({record.name}) is not needed: the pool shrinks"
        self.view.change(drain_reason=DrainReason.SCALE_DOWN.value)
        self._terminate(text, now=now, cooldown=False)
        self._event("Normal", "PodRetired", text)

    def drain_for_deletion(self) -> None:
        """Unwire if wired"""
        self._unwire("the pool is being deleted")
        self.view.change(drain_reason=DrainReason.POOL_DELETED.value, update=None)

    def terminate_for_deletion(self, now: dt.datetime) -> None:
        """TerminatePod"""
        self.drain_for_deletion()
        self._terminate("the pool is being deleted", now=now, cooldown=False)

    def terminate_unserved(self, signals: MemberSignals, now: dt.datetime) -> None:
        """TerminatePod, datacenter to cooldown; Event FlaggedPodTerminated"""
        record = self.view.current
        text = (
            f"pod {record.pod_id} ({record.name}) serves nothing and no replacement came to "
            f"serve within {signals.settings.warmup_timeout_s:g}s of its flag: terminating it"
        )
        self._terminate(text, now=now, cooldown=True)
        self._event("Warning", "FlaggedPodTerminated", text)

    def terminate_dead(self, signals: MemberSignals, now: dt.datetime) -> None:
        """TerminatePod, datacenter to cooldown; Event DeadPodTerminated"""
        record = self.view.current
        probe = signals.probe
        why = (probe.error if probe else None) or "the Unreachable rule is due"
        text = (
            f"pod {record.pod_id} ({record.name}) is dead ({why}) and out of nginx: "
            "terminated now instead of billing until its replacement serves"
        )
        self._terminate(text, now=now, cooldown=True)
        self._event("Warning", "DeadPodTerminated", text)

    def terminate_released(self, reason: str | None, now: dt.datetime) -> None:
        """TerminatePod, datacenter to cooldown; Event ReplacedTerminateFirst"""
        record = self.view.current
        text = f"pod {record.pod_id} ({record.name}) serves nothing: {reason}"
        self._terminate(text, now=now, cooldown=True)
        self._event("Warning", "ReplacedTerminateFirst", text)

    def drain_released(self, reason: str | None) -> None:
        """Unwire; Event FlaggedPodReleased"""
        record = self.view.current
        self._unwire("released")
        self.view.change(drain_reason=DrainReason.REPLACE.value)
        self._event(
            "Normal", "FlaggedPodReleased", f"pod {record.pod_id} ({record.name}): {reason}"
        )

    def retry_terminate(self, now: dt.datetime) -> None:
        """TerminatePod again"""
        self._terminate("still listed after terminate", now=now, cooldown=False)

    def after_transition(self, event: str, source: State, target: State, now: dt.datetime) -> None:
        if target.value != Phase.READY and self.view.current.quarantine is not None:
            # Flagged, drained or gone: that now says why it is out of nginx.
            self.view.change(quarantine=None)
        self.view.moved(Move(event=str(event), source=source.value, target=target.value), now)
