"""The release state machine: each phase reached by its named guards, in their order,
from any phase; the bake's verdict moving Canary and Baking on; what the release waits
for and asks for; rehydration from status.rollout.

Each case starts from a `status.rollout` record in one phase, sends one event with the
loop's signals, and states the phase that follows, why the release waits and what the
roll step must choose next.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest
from statemachine.exceptions import TransitionNotAllowed

from rpp.machines.release import (
    Ask,
    ReleaseMachine,
    ReleaseSettings,
    ReleaseSignals,
    ReleaseStep,
    ReleaseView,
    judge_bake,
    roll,
)
from rpp.model.rollout_records import Rollout, RolloutPhase, Verdict, VerdictResult

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
IMAGE, OLD = "img:2", "img:1"
SETTINGS = ReleaseSettings(canary_enabled=True, max_parallel=1)
QUIET = ReleaseSignals(
    to_update=2, in_flight=0, rolling_back=False, canary_updating=False, canary_on_image=False
)
"""Two pods still to update, nothing under way, no canary yet: the start of a release."""
PHASES = tuple(RolloutPhase)


def release(phase: RolloutPhase = RolloutPhase.CANARY, **fields: Any) -> Rollout:
    """`status.rollout` of IMAGE in `phase`, its canary c1 from OLD."""
    fields.setdefault("canary", "c1")
    fields.setdefault("from_image", OLD)
    return Rollout(image=IMAGE, phase=phase, **fields)


def verdict(result: VerdictResult) -> Verdict:
    return Verdict(result=result, message=f"the canary's bake: {result}")


def inputs(
    phase: RolloutPhase,
    *,
    settings: ReleaseSettings = SETTINGS,
    now: dt.datetime = NOW,
    result: VerdictResult | None = None,
    **signals: Any,
) -> tuple[Rollout, ReleaseSettings, dict[str, Any]]:
    """A record in `phase` with the verdict so far `result`, the settings, and the
    kwargs `roll` sends: QUIET's signals but `signals`, at `now`."""
    record = release(phase, verdict=None if result is None else verdict(result))
    sent = {"signals": dataclasses.replace(QUIET, **signals), "now": now}
    return record, settings, sent


def roll_from(phase: RolloutPhase, **given: Any) -> ReleaseStep:
    """`roll` from `phase` (the arguments as `inputs` takes them)."""
    record, settings, sent = inputs(phase, **given)
    return roll(record, settings=settings, **sent)


PAUSED: dict[str, Any] = {"update_until": NOW + dt.timedelta(minutes=10)}
PASSED: dict[str, Any] = {"result": VerdictResult.PASSED}

# (case id, roll_from's arguments, the phase, what it asks for, why it waits)
ROLL_CASES: list[tuple[str, dict[str, Any], RolloutPhase, Ask | None, str | None]] = [
    (
        "a failed canary refuses the image whatever else holds",
        {"result": VerdictResult.FAILED, "rolling_back": True, "to_update": 0, **PAUSED},
        RolloutPhase.ROLLED_BACK,
        None,
        f"{IMAGE} failed its canary; it is not tried again until spec.image changes",
    ),
    (
        "a pod rolling back holds the release even with every pod on the image",
        {"rolling_back": True, "to_update": 0, **PASSED},
        RolloutPhase.ROLLED_BACK,
        None,
        "a pod goes back to its old image after its update failed",
    ),
    (
        "a pod rolling back during the backoff says until when",
        {"rolling_back": True, "to_update": 0, **PAUSED},
        RolloutPhase.ROLLED_BACK,
        None,
        "image updates are paused after a failed update until 12:10:00Z",
    ),
    (
        "the backoff pauses a release with pods left to update",
        {"to_update": 1, **PAUSED, **PASSED},
        RolloutPhase.ROLLED_BACK,
        None,
        "image updates are paused after a failed update until 12:10:00Z",
    ),
    (
        "the backoff pauses a release with a pod still updating",
        {"to_update": 0, "in_flight": 1, **PAUSED, **PASSED},
        RolloutPhase.ROLLED_BACK,
        None,
        "image updates are paused after a failed update until 12:10:00Z",
    ),
    (
        "a backoff does not hold a release whose pods all run the image",
        {"to_update": 0, **PAUSED},
        RolloutPhase.DONE,
        None,
        None,
    ),
    (
        "an ended backoff holds nothing",
        {"update_until": NOW, **PASSED},
        RolloutPhase.ROLLING,
        Ask.NEXT_PODS,
        None,
    ),
    (
        "every pod on the image is done, with or without a verdict",
        {"to_update": 0},
        RolloutPhase.DONE,
        None,
        None,
    ),
    (
        "a passed canary lets the next pods follow",
        {"canary_on_image": True, **PASSED},
        RolloutPhase.ROLLING,
        Ask.NEXT_PODS,
        None,
    ),
    (
        "a skipped canary lets them follow too",
        {"result": VerdictResult.SKIPPED},
        RolloutPhase.ROLLING,
        Ask.NEXT_PODS,
        None,
    ),
    (
        "at maxParallel the release rolls on without asking for more",
        {"in_flight": 1, **PASSED},
        RolloutPhase.ROLLING,
        None,
        None,
    ),
    (
        "a release whose pods update but none is left stays Rolling",
        {"to_update": 0, "in_flight": 1, **PASSED},
        RolloutPhase.ROLLING,
        None,
        None,
    ),
    (
        "the canary draining or updating is the Canary phase",
        {"canary_updating": True, "in_flight": 1},
        RolloutPhase.CANARY,
        None,
        None,
    ),
    (
        "the canary Ready on the image bakes",
        {"canary_on_image": True, "result": VerdictResult.BAKING},
        RolloutPhase.BAKING,
        None,
        None,
    ),
    (
        "a bake waiting for requests still bakes",
        {"canary_on_image": True, "result": VerdictResult.WAITING},
        RolloutPhase.BAKING,
        None,
        None,
    ),
    (
        "without a canary the release asks for one",
        {},
        RolloutPhase.CANARY,
        Ask.CANARY,
        None,
    ),
]


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize(
    ("given", "expected", "asks", "waiting"),
    [case[1:] for case in ROLL_CASES],
    ids=[case[0] for case in ROLL_CASES],
)
def test_roll_reaches_the_same_phase_from_any_phase(
    phase: RolloutPhase,
    given: dict[str, Any],
    expected: RolloutPhase,
    asks: Ask | None,
    waiting: str | None,
) -> None:
    step = roll_from(phase, **given)
    assert (step.record.phase, step.asks, step.waiting) == (expected, asks, waiting)


def test_with_the_canary_disabled_the_release_rolls_without_a_verdict() -> None:
    off = ReleaseSettings(canary_enabled=False, max_parallel=1)
    assert roll_from(RolloutPhase.CANARY, settings=off).record.phase is RolloutPhase.ROLLING
    assert roll_from(RolloutPhase.CANARY).record.phase is RolloutPhase.CANARY


def test_room_for_another_update_counts_against_max_parallel() -> None:
    wide = ReleaseSettings(canary_enabled=True, max_parallel=3)
    for in_flight, asks in ((0, Ask.NEXT_PODS), (2, Ask.NEXT_PODS), (3, None), (4, None)):
        step = roll_from(RolloutPhase.ROLLING, settings=wide, in_flight=in_flight, **PASSED)
        assert (step.record.phase, step.asks) == (RolloutPhase.ROLLING, asks), in_flight


def test_roll_keeps_the_rest_of_the_record() -> None:
    record = release(RolloutPhase.BAKING, verdict=verdict(VerdictResult.PASSED), total=3)
    step = roll(record, settings=SETTINGS, signals=QUIET, now=NOW)
    assert step.record == record.replace(phase=RolloutPhase.ROLLING)


@pytest.mark.parametrize("phase", [RolloutPhase.CANARY, RolloutPhase.BAKING])
@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (VerdictResult.PASSED, RolloutPhase.ROLLING),
        (VerdictResult.SKIPPED, RolloutPhase.ROLLING),
        (VerdictResult.BAKING, RolloutPhase.BAKING),
        (VerdictResult.WAITING, RolloutPhase.BAKING),
        # Baking still: the roll step, later in the loop, rolls a failed canary back.
        (VerdictResult.FAILED, RolloutPhase.BAKING),
    ],
)
def test_the_bake_verdict_moves_a_passed_canary_on_and_keeps_the_rest_baking(
    phase: RolloutPhase, result: VerdictResult, expected: RolloutPhase
) -> None:
    judged = judge_bake(release(phase, verdict=verdict(result)), settings=SETTINGS)
    assert judged.phase is expected
    assert judged.verdict == verdict(result)


@pytest.mark.parametrize(
    "phase", [RolloutPhase.ROLLING, RolloutPhase.ROLLED_BACK, RolloutPhase.DONE]
)
def test_a_bake_is_judged_only_in_canary_or_baking(phase: RolloutPhase) -> None:
    with pytest.raises(TransitionNotAllowed):
        judge_bake(release(phase, verdict=verdict(VerdictResult.PASSED)), settings=SETTINGS)
    # The machine that refused is not reused half-way: the next release drives cleanly.
    assert roll_from(RolloutPhase.CANARY).asks is Ask.CANARY


def test_a_release_walks_canary_baking_rolling_done() -> None:
    """One release, loop by loop, as the bake and roll steps drive it."""
    # A new release starts in Canary and asks for its canary.
    step = roll(release(canary=None, from_image=None), settings=SETTINGS, signals=QUIET, now=NOW)
    assert (step.record.phase, step.asks) == (RolloutPhase.CANARY, Ask.CANARY)
    # The canary drains and updates.
    updating = dataclasses.replace(QUIET, to_update=1, in_flight=1, canary_updating=True)
    step = roll(release(), settings=SETTINGS, signals=updating, now=NOW)
    assert (step.record.phase, step.asks) == (RolloutPhase.CANARY, None)
    # Back in nginx on the image, it bakes; the bake is not over yet.
    serving = dataclasses.replace(QUIET, to_update=1, canary_on_image=True)
    step = roll(step.record, settings=SETTINGS, signals=serving, now=NOW)
    assert step.record.phase is RolloutPhase.BAKING
    baking = judge_bake(
        step.record.replace(verdict=verdict(VerdictResult.BAKING)), settings=SETTINGS
    )
    assert baking.phase is RolloutPhase.BAKING
    # It passes: the others follow, one at a time.
    passed = judge_bake(baking.replace(verdict=verdict(VerdictResult.PASSED)), settings=SETTINGS)
    assert passed.phase is RolloutPhase.ROLLING
    step = roll(passed, settings=SETTINGS, signals=serving, now=NOW)
    assert (step.record.phase, step.asks) == (RolloutPhase.ROLLING, Ask.NEXT_PODS)
    last = dataclasses.replace(serving, to_update=0, in_flight=1)
    step = roll(step.record, settings=SETTINGS, signals=last, now=NOW)
    assert (step.record.phase, step.asks) == (RolloutPhase.ROLLING, None)
    # Every pod on the image: done.
    done = dataclasses.replace(serving, to_update=0)
    step = roll(step.record, settings=SETTINGS, signals=done, now=NOW)
    assert step.record.phase is RolloutPhase.DONE
    assert step.record.verdict == verdict(VerdictResult.PASSED)


def test_a_failed_update_rolls_back_then_resumes_after_the_backoff() -> None:
    back = dataclasses.replace(QUIET, rolling_back=True, **PAUSED)
    step = roll(release(RolloutPhase.ROLLING), settings=SETTINGS, signals=back, now=NOW)
    assert step.record.phase is RolloutPhase.ROLLED_BACK
    # The pod is back on its old image; the backoff still runs.
    waiting = dataclasses.replace(back, rolling_back=False)
    step = roll(step.record, settings=SETTINGS, signals=waiting, now=NOW)
    assert step.record.phase is RolloutPhase.ROLLED_BACK
    # Once it is over, a release whose canary had not passed asks for a new one.
    later = NOW + dt.timedelta(minutes=10)
    step = roll(step.record, settings=SETTINGS, signals=waiting, now=later)
    assert (step.record.phase, step.asks, step.waiting) == (RolloutPhase.CANARY, Ask.CANARY, None)


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("given", [case[1] for case in ROLL_CASES], ids=[c[0] for c in ROLL_CASES])
def test_a_loop_at_rest_is_known_without_sending_roll(
    phase: RolloutPhase, given: dict[str, Any]
) -> None:
    """`stays_put` (the driver's shortcut) says what sending would do: nothing."""
    record, settings, sent = inputs(phase, **given)
    machine = ReleaseMachine(ReleaseView(record, settings))
    at_rest = machine.stays_put("roll", **sent)
    machine.send("roll", **sent)
    view = machine.view
    assert at_rest is (view.phase is phase and view.waiting is None and view.asks is None)


@pytest.mark.parametrize("phase", [RolloutPhase.CANARY, RolloutPhase.BAKING])
@pytest.mark.parametrize("result", list(VerdictResult))
def test_a_bake_at_rest_is_known_without_sending_judge_bake(
    phase: RolloutPhase, result: VerdictResult
) -> None:
    machine = ReleaseMachine(ReleaseView(release(phase, verdict=verdict(result)), SETTINGS))
    at_rest = machine.stays_put("judge_bake")
    machine.send("judge_bake")
    assert at_rest is (machine.view.phase is phase)


def test_rehydrating_from_every_phase_runs_no_action() -> None:
    machine = ReleaseMachine(ReleaseView(release(), SETTINGS))
    for phase in PHASES:
        view = machine.rehydrate(release(phase, waiting="last loop's reason"), SETTINGS)
        assert machine.current_state_value == phase.value
        assert (view.phase, view.waiting, view.asks) == (phase, None, None)


def test_each_phase_is_a_state_and_the_states_are_the_phases() -> None:
    assert sorted(str(s.value) for s in ReleaseMachine.states) == sorted(p.value for p in PHASES)
    assert ReleaseMachine.canary.initial
    assert not any(s.final for s in ReleaseMachine.states)


def test_what_one_release_asked_does_not_carry_into_the_next() -> None:
    assert roll_from(RolloutPhase.CANARY).asks is Ask.CANARY
    paused = roll_from(RolloutPhase.CANARY, **PAUSED)
    assert (paused.asks, paused.record.phase) == (None, RolloutPhase.ROLLED_BACK)
    assert roll_from(RolloutPhase.DONE, to_update=0).waiting is None
