"""The release state machine: where one pool's release of a new image stands.

Where it sits: decide, beside the member machine (rpp/machines/member.py). A member
machine carries one pod through its update; this one carries the pool's release of
spec.image through its phases, `status.rollout.phase` (rpp/model/rollout_records.py).
rpp/decide/release/steps.py drives it twice a loop, through the functions at the end of
this module: the `bake` step sends `judge_bake` once the canary's bake has a verdict,
and the `roll` step, after the member machines, sends `roll` with what the pool's pods
say this loop (`ReleaseSignals`). Each time the machine is rehydrated from
status.rollout: the record's phase is the current state, and a release that starts this
loop starts in Canary, so no entry action ever runs on construction.
rpp/commands/diagrams.py renders this class into docs/diagrams/ and the README table,
so the guard and action names below are what users see.

A release goes Canary -> Baking -> Rolling -> Done. The phase follows from the pods and
the canary's verdict, not from the phase before: a canary that failed, a pod going back
to its old image, a paused roll or every pod on the image each decide it whatever the
release was doing, so `roll`'s transitions go from any phase, tried in order, and the
last has no guard: `roll` always takes one. `judge_bake` leaves Canary or Baking for
Rolling once the canary passed, and otherwise keeps the release baking.

Actions do not act. They say why the release waits (`ReleaseView.waiting`) and what
the roll step must choose next (`Ask`): a canary, or the next pods to drain. Which pods
those are needs the whole pool (busy pods, the Ready floor, pods RunPod's answer did
not read), so rpp/decide/release/next_pods.py chooses them. Nothing here does I/O or
reads the clock: `now` is handed in. Most loops of a release at rest (Done, or Rolling
with maxParallel pods under way) go back to their own phase without an action; the
driver asks `stays_put` first and skips the library's dispatch for those.

`StateMachine` (not `StateChart`), as the member machine: an event that takes no
transition is an error. `roll` always takes one (its last transition has no guard), and
the bake step sends `judge_bake` only in Canary or Baking, where it always takes one too.
"""

from __future__ import annotations

import datetime as dt
import inspect
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from statemachine import State, StateMachine
from statemachine.transition_list import TransitionList

from rpp.model.rollout_records import Rollout, RolloutPhase, VerdictResult

_PASSED = frozenset({VerdictResult.PASSED, VerdictResult.SKIPPED})
_GUARD_PARAMETERS: dict[str, tuple[str, ...]] = {}
"""Each guard's parameters by name, read once (`ReleaseMachine.stays_put`)."""


class Ask(StrEnum):
    """What the roll step must choose after the machine moved."""

    CANARY = "canary"  # the oldest pod on another image, once the pool is idle
    NEXT_PODS = "next pods"  # more pods to drain, as maxParallel and the Ready floor allow


@dataclass(frozen=True)
class ReleaseSettings:
    """The spec's rollout settings the phases depend on."""

    canary_enabled: bool  # rollout.canary.enabled
    max_parallel: int  # rollout.maxParallel


@dataclass(frozen=True)
class ReleaseSignals:
    """What the pool's pods say about the release this loop (the roll step counts them)."""

    to_update: int  # Ready pods, in nginx or quarantined, still on another image
    in_flight: int  # pods draining or updating to spec.image (not rolling back)
    rolling_back: bool  # a pod goes back to its old image
    canary_updating: bool  # the canary is one of `in_flight`
    canary_on_image: bool  # the canary is Ready on spec.image
    update_until: dt.datetime | None = None  # status.backoff.updateUntil


def _from_any_phase(target: State, **kwargs: Any) -> TransitionList:
    """Transitions to `target` from every phase, itself included (`from_.any()`)."""
    transitions: TransitionList = target.from_.any(**kwargs)  # type: ignore[no-untyped-call]
    return transitions


class ReleaseView:
    """A working copy of one `status.rollout` that the machine moves during one event.

    python-statemachine reads and writes the state through `phase`; the record itself
    is frozen, so the view holds the working copy, and what the actions say beside it.
    """

    def __init__(self, record: Rollout, settings: ReleaseSettings) -> None:
        self.load(record, settings)

    def load(self, record: Rollout, settings: ReleaseSettings) -> None:
        """Start over on `record`: the machine reading this view is now in its phase."""
        self._record = record
        self.settings = settings
        self.waiting: str | None = None
        self.asks: Ask | None = None

    @property
    def phase(self) -> RolloutPhase:
        return self._record.phase

    @phase.setter
    def phase(self, value: str) -> None:
        if value != self._record.phase:
            self._record = self._record.replace(phase=RolloutPhase(value))

    @property
    def current(self) -> Rollout:
        return self._record


class ReleaseMachine(StateMachine):
    """Canary -> Baking -> Rolling -> Done; RolledBack when a pod goes back."""

    canary = State(initial=True, value=RolloutPhase.CANARY.value)
    baking = State(value=RolloutPhase.BAKING.value)
    rolling = State(value=RolloutPhase.ROLLING.value)
    rolled_back = State(name="RolledBack", value=RolloutPhase.ROLLED_BACK.value)
    done = State(value=RolloutPhase.DONE.value)

    # The roll step's event: from any phase, the first transition whose guards pass.
    roll = (
        _from_any_phase(rolled_back, cond="canary_failed_bake", on="refuse_image")
        | _from_any_phase(rolled_back, cond="pod_rolling_back", on="wait_for_rollback")
        | _from_any_phase(
            rolled_back, cond="updates_paused", unless="every_pod_on_image", on="wait_out_backoff"
        )
        | _from_any_phase(done, cond="every_pod_on_image")
        | _from_any_phase(
            rolling, cond=["canary_passed", "room_for_another_update"], on="ask_next_pods"
        )
        | _from_any_phase(rolling, cond="canary_passed")
        | _from_any_phase(canary, cond="canary_updating")
        | _from_any_phase(baking, cond="canary_on_image")
        | _from_any_phase(canary, on="ask_for_canary")
    )
    # The bake step's event, once this loop's verdict is in the record.
    judge_bake = rolling.from_(canary, baking, cond="canary_passed") | baking.from_(canary, baking)

    def __init__(self, view: ReleaseView) -> None:
        self.view = view
        super().__init__(model=view, state_field="phase")

    def rehydrate(self, record: Rollout, settings: ReleaseSettings) -> ReleaseView:
        """Put this machine in `record`'s phase (no entry actions), with nothing said yet."""
        self.view.load(record, settings)
        return self.view

    def stays_put(self, event: str, **kwargs: Any) -> bool:
        """Whether `event` would take a transition back to this phase without an action:
        nothing would change, so the driver skips the library's dispatch (most loops of
        a release at rest, Done or Rolling, cost a few guard calls then).

        The transitions are this class's own, tried in the library's order, their
        guards called with the kwargs `send` would get, so the rules stay here, once
        (tests/machines/test_release_machine.py checks the answer against `send`).
        """
        state = self.states_map[self.view.phase]
        for transition in state.transitions:
            if not transition.match(event):
                continue
            if all(self._guard(spec, kwargs) is spec.expected_value for spec in transition.cond):
                acts = any(not spec.is_convention for spec in transition.on)
                return transition.target is state and not acts
        return False

    def _guard(self, spec: Any, kwargs: dict[str, Any]) -> bool:
        name = str(spec.attr_name)
        method = getattr(self, name)
        wanted = _GUARD_PARAMETERS.get(name)
        if wanted is None:
            wanted = tuple(inspect.signature(method).parameters)
            _GUARD_PARAMETERS[name] = wanted
        return bool(method(*[kwargs[p] for p in wanted]))

    # --- guards: pure reads of the record, the settings, the signals and now ---------

    def canary_failed_bake(self) -> bool:
        """the canary failed its bake"""
        verdict = self.view.current.verdict
        return verdict is not None and verdict.result is VerdictResult.FAILED

    def canary_passed(self) -> bool:
        """the canary passed its bake, or needs none (image served already, or canary disabled)"""
        # The roll step skips the canary of an image a Ready pod already serves (a Skipped
        # verdict), and so does the bake step when rollout.canary.enabled is false.
        verdict = self.view.current.verdict
        passed = verdict is not None and verdict.result in _PASSED
        return passed or not self.view.settings.canary_enabled

    def pod_rolling_back(self, signals: ReleaseSignals) -> bool:
        """a pod goes back to its old image after its update failed"""
        return signals.rolling_back

    def updates_paused(self, signals: ReleaseSignals, now: dt.datetime) -> bool:
        """image updates are paused after a failed update (status.backoff.updateUntil)"""
        return signals.update_until is not None and now < signals.update_until

    def every_pod_on_image(self, signals: ReleaseSignals) -> bool:
        """every pod runs spec.image: none is left to update and none is updating"""
        return signals.to_update == 0 and signals.in_flight == 0

    def room_for_another_update(self, signals: ReleaseSignals) -> bool:
        """fewer pods update now than rollout.maxParallel"""
        return signals.in_flight < self.view.settings.max_parallel

    def canary_updating(self, signals: ReleaseSignals) -> bool:
        """the canary drains or updates to spec.image"""
        return signals.canary_updating

    def canary_on_image(self, signals: ReleaseSignals) -> bool:
        """the canary is Ready on spec.image"""
        return signals.canary_on_image

    # --- actions: what the release waits for, what the roll step chooses next --------

    def refuse_image(self) -> None:
        """waits: the image is not tried again until spec.image changes"""
        image = self.view.current.image
        self.view.waiting = (
            f"{image} failed its canary; it is not tried again until spec.image changes"
        )

    def wait_for_rollback(self, signals: ReleaseSignals, now: dt.datetime) -> None:
        """waits: for the pod going back, or for the update backoff while it runs"""
        if self.updates_paused(signals, now):
            self.wait_out_backoff(signals)
        else:
            self.view.waiting = "a pod goes back to its old image after its update failed"

    def wait_out_backoff(self, signals: ReleaseSignals) -> None:
        """waits: for the update backoff to end"""
        until = signals.update_until
        self.view.waiting = (
            f"image updates are paused after a failed update until {until:%H:%M:%SZ}"
        )

    def ask_next_pods(self) -> None:
        """asks for the next pods to drain (maxParallel, the Ready floor)"""
        self.view.asks = Ask.NEXT_PODS

    def ask_for_canary(self) -> None:
        """asks for a canary: the oldest pod on another image, once the pool is idle"""
        self.view.asks = Ask.CANARY


# --- driving the machine: the functions rpp/decide/release/steps.py calls -------------


@dataclass(frozen=True)
class ReleaseStep:
    """The release after one event: its record, why it waits and what it asks for."""

    record: Rollout
    waiting: str | None
    asks: Ask | None


class _Cache:
    """One machine, rehydrated for each pool's release: building one (callback
    resolution) costs far more than driving one. A plain module-level slot, as the member
    machine's (rpp/machines/member_step.py): decide runs on the loop's one thread."""

    machine: ReleaseMachine | None = None


def _run(record: Rollout, event: str, *, settings: ReleaseSettings, **kwargs: Any) -> ReleaseStep:
    machine = _Cache.machine
    if machine is None:
        machine = ReleaseMachine(ReleaseView(record, settings))
        _Cache.machine = machine
    else:
        machine.rehydrate(record, settings)
    if machine.stays_put(event, **kwargs):
        return ReleaseStep(record=record, waiting=None, asks=None)
    try:
        machine.send(event, **kwargs)
    except BaseException:
        _Cache.machine = None  # never reuse an engine that raised mid-event
        raise
    view = machine.view
    return ReleaseStep(record=view.current, waiting=view.waiting, asks=view.asks)


def judge_bake(record: Rollout, *, settings: ReleaseSettings) -> Rollout:
    """The bake step's verdict is in `record` (Canary or Baking): Rolling once the
    canary passed, Baking otherwise."""
    return _run(record, "judge_bake", settings=settings).record


def roll(
    record: Rollout, *, settings: ReleaseSettings, signals: ReleaseSignals, now: dt.datetime
) -> ReleaseStep:
    """The roll step: the release's phase this loop, why it waits, what it asks for."""
    return _run(record, "roll", settings=settings, signals=signals, now=now)
