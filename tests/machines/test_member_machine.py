"""The member state machine: every transition fires when its guards hold and is blocked
when any one of them does not; rehydration from every phase; clear errors.

Cases are named, reusable matrices. Each case starts from a member record in one phase
(`since` = T0), drives one event `after` seconds later with the given signals, and
states the phase and the effect types that must follow.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import ValidationError

from rpp.adapters.clock import UTC
from rpp.machines.member import MemberMachine
from rpp.machines.member_step import (
    MemberStep,
    drain,
    new_member,
    observe,
    observe_unlisted,
    replacement_wired,
    retire,
)
from rpp.machines.member_view import MemberView
from rpp.machines.signals import MemberSettings, MemberSignals, refresh
from rpp.model.effects import RecordEvent, TerminatePod, Unwire, UpdatePod, Wire
from rpp.model.members import (
    PHASES,
    MemberRecord,
    Phase,
    ProbeRecord,
    Quarantine,
    UpdateProgress,
    UpdateStep,
)
from rpp.model.observations import PodStatus, ProbeResult, RunPodPod

T0 = dt.datetime(2026, 1, 1, tzinfo=UTC)
SETTINGS = MemberSettings()  # warm-up 900s, drain 150s, update 900s, retry 300s, 3 passes
POD = RunPodPod(
    id="pod1",
    name="rpp-inference-1",
    status=PodStatus.RUNNING,
    image="img:1",
    gpu_type="NVIDIA GeForce RTX 4090",
    gpu_count=1,
    cloud="SECURE",
    datacenter="EU-RO-1",
    cost_per_hr=0.69,
    created_at=T0,
)
NOT_LISTED: dict[str, Any] = {"pod": None}


def probe(passed: bool = True, process_start: float | None = 100.0) -> ProbeResult:
    return ProbeResult(
        passed=passed,
        health_ok=passed,
        metrics_ok=passed,
        health_latency_s=0.05,
        metrics_latency_s=0.1,
        error=None if passed else "health: connection refused",
        process_start=process_start,
    )


def hard_probe() -> ProbeResult:
    """A probe RunPod's proxy answered 502: the pod's service is down."""
    return ProbeResult(
        passed=False,
        health_ok=False,
        metrics_ok=False,
        health_latency_s=0.01,
        metrics_latency_s=0.01,
        error="health /health: HTTP 502; metrics /metrics: HTTP 502",
        hard_failures=1,
    )


QUARANTINED: dict[str, Any] = {
    "slot": None,
    "quarantine": Quarantine(since=T0, reason="health /health: HTTP 502"),
}


def last_probe(process_start: float) -> ProbeRecord:
    return ProbeRecord(
        at=T0, passed=True, health_ok=True, metrics_ok=True, process_start=process_start
    )


UPDATE_DRAIN = UpdateProgress(from_image="img:1", to_image="img:2")
UPDATE_SENT = UpdateProgress(
    from_image="img:1",
    to_image="img:2",
    step=UpdateStep.RESTART,
    started_at=T0,
    process_start_before=100.0,
)
ROLLBACK_SENT = UpdateProgress(
    from_image="img:1",
    to_image="img:2",
    step=UpdateStep.RESTART,
    started_at=T0,
    process_start_before=300.0,
    rollback=True,
)
ROLLBACK_DRAIN = UpdateProgress(from_image="img:1", to_image="img:2", rollback=True)
CANARY_FAILED: dict[str, Any] = {
    "pod": RunPodPod(**(vars(POD) | {"image": "img:2"})),  # the canary runs the new image
    "canary_failure": "error ratio 30.0% against 0.0% on the old pods",
    "rollback_to": "img:1",
}
# The slot a member normally has in each phase (Ready is wired, Draining onwards is not).
USUAL_SLOT = {"Ready": 1, "Flagged": 1}
UNREACHABLE_DUE: dict[str, Any] = {
    "breaches": {"Unreachable": T0},
    "flagged": ("Unreachable",),
    "reasons": {"Unreachable": "health: connection refused (breached 120s of 120s)"},
}
SLOW_DUE: dict[str, Any] = {
    "breaches": {"SlowScrape": T0},
    "flagged": ("SlowScrape",),
    "reasons": {"SlowScrape": "metrics probe took 3.00s (limit 2s)"},
}


def member(phase: str, **changes: Any) -> MemberRecord:
    record = MemberRecord(
        pod_id=POD.id,
        name=POD.name,
        phase=Phase(phase),
        since=T0,
        slot=USUAL_SLOT.get(phase),
        datacenter="EU-RO-1",
        image="img:1",
        update=UPDATE_SENT if phase == "Updating" else None,
    )
    return record.replace(**changes)


def signals(**changes: Any) -> MemberSignals:
    base: dict[str, Any] = {"settings": SETTINGS, "pod": POD}
    return MemberSignals(**(base | changes))


@dataclass(frozen=True)
class Case:
    phase: str
    expect: str  # the phase after the event
    effects: tuple[type, ...] = ()  # effect types, in order
    record: dict[str, Any] = field(default_factory=dict)
    signals: dict[str, Any] = field(default_factory=dict)
    after: float = 30.0  # seconds since the member entered its phase
    event: str = "observe"
    reason: str | None = None
    image: str | None = None


def run(case: Case) -> MemberStep:
    record = member(case.phase, **case.record)
    now = T0 + dt.timedelta(seconds=case.after)
    sig = signals(**case.signals)
    if case.event == "observe":
        return observe(record, signals=sig, now=now)
    if case.event == "observe_unlisted":
        return observe_unlisted(record, signals=sig, now=now)
    if case.event == "drain":
        return drain(record, reason=case.reason or "", image=case.image, signals=sig, now=now)
    if case.event == "retire":
        return retire(record, signals=sig, now=now)
    return replacement_wired(record, signals=sig, now=now)


def _param(name: str, case: Case) -> Any:
    return pytest.param(case, id=name)


# Each transition, with its guards all holding.
FIRES = {
    "Warming->Gone missing_for_loops": Case(
        "Warming", "Gone", (RecordEvent,), record={"missing_loops": 1}, signals=NOT_LISTED
    ),
    "Ready->Gone missing_for_loops (unwires)": Case(
        "Ready", "Gone", (Unwire, RecordEvent), record={"missing_loops": 1}, signals=NOT_LISTED
    ),
    "Flagged->Gone missing_for_loops": Case(
        "Flagged", "Gone", (Unwire, RecordEvent), record={"missing_loops": 1}, signals=NOT_LISTED
    ),
    "Draining->Gone missing_for_loops": Case(
        "Draining", "Gone", (RecordEvent,), record={"missing_loops": 1}, signals=NOT_LISTED
    ),
    "Updating->Gone missing_for_loops": Case(
        "Updating", "Gone", (RecordEvent,), record={"missing_loops": 1}, signals=NOT_LISTED
    ),
    "Terminating->Gone not_listed": Case(
        "Terminating", "Gone", (RecordEvent,), signals=NOT_LISTED
    ),
    "Warming->Ready passes_in_a_row and slot_offered": Case(
        "Warming",
        "Ready",
        (Wire,),
        record={"pass_streak": 2},
        signals={"probe": probe(), "offered_slot": 2},
    ),
    "Warming->Terminating warmup_timed_out": Case(
        "Warming", "Terminating", (TerminatePod, RecordEvent), after=900
    ),
    "Ready->Flagged unreachable_due, wired, not last, not pool-wide (unwired)": Case(
        "Ready", "Flagged", (RecordEvent, Unwire), signals=UNREACHABLE_DUE, after=120
    ),
    "Ready->Flagged rule_due, not pool-wide": Case(
        "Ready", "Flagged", (RecordEvent,), signals=SLOW_DUE, after=600
    ),
    "Ready->Ready failing_hard, wired, not last, not pool-wide (quarantined)": Case(
        "Ready",
        "Ready",
        (Unwire, RecordEvent),
        record={"hard_failures": 1},
        signals={"probe": hard_probe()},
    ),
    "Ready->Ready failing_hard, wired, last wired but RunPod's list read (quarantined)": Case(
        "Ready",
        "Ready",
        (Unwire, RecordEvent),
        record={"hard_failures": 1},
        signals={"probe": hard_probe(), "last_wired": True, "network_ok": True},
    ),
    "Ready->Ready failing_hard, wired, pool-wide but another pod passed (quarantined)": Case(
        "Ready",
        "Ready",
        (Unwire, RecordEvent),
        record={"hard_failures": 1},
        signals={"probe": hard_probe(), "pool_wide": True, "network_ok": True},
    ),
    "Ready->Flagged unreachable_due, wired, last wired but not blind (unwired)": Case(
        "Ready",
        "Flagged",
        (RecordEvent, Unwire),
        signals=UNREACHABLE_DUE | {"last_wired": True, "network_ok": True},
        after=120,
    ),
    "Ready->Ready quarantined, passes_in_a_row, slot_offered (released)": Case(
        "Ready",
        "Ready",
        (Wire, RecordEvent),
        record=QUARANTINED | {"pass_streak": 2},
        signals={"probe": probe(), "offered_slot": 2},
    ),
    "Ready->Ready quarantined, passes_now, slot_offered, nginx_empty (released)": Case(
        "Ready",
        "Ready",
        (Wire, RecordEvent),
        record=QUARANTINED,
        signals={"probe": probe(), "offered_slot": 2, "last_wired": True},
    ),
    "Ready->Draining drain scale-down": Case(
        "Ready", "Draining", (Unwire,), event="drain", reason="scale-down"
    ),
    "Ready->Draining drain update": Case(
        "Ready", "Draining", (Unwire,), event="drain", reason="update", image="img:2"
    ),
    "Flagged->Flagged unreachable_due, wired, not last (unwired)": Case(
        "Flagged", "Flagged", (Unwire,), signals=UNREACHABLE_DUE
    ),
    "Flagged->Flagged unreachable_due, wired, last wired but RunPod's list read (unwired)": Case(
        "Flagged",
        "Flagged",
        (Unwire,),
        signals=UNREACHABLE_DUE | {"last_wired": True, "network_ok": True},
    ),
    "Flagged->Flagged failing_hard, wired, not last (unwired for good)": Case(
        "Flagged",
        "Flagged",
        (Unwire, RecordEvent),
        record={"hard_failures": 1},
        signals={"probe": hard_probe()},
    ),
    "Ready->Ready observe_unlisted failing_hard, wired (quarantined, no listing)": Case(
        "Ready",
        "Ready",
        (Unwire, RecordEvent),
        record={"hard_failures": 1, "missing_loops": 1},
        signals={"probe": hard_probe(), "pod": None},
        event="observe_unlisted",
    ),
    "Flagged->Flagged observe_unlisted failing_hard, wired (unwired, no listing)": Case(
        "Flagged",
        "Flagged",
        (Unwire, RecordEvent),
        record={"hard_failures": 1},
        signals={"probe": hard_probe(), "pod": None},
        event="observe_unlisted",
    ),
    "Flagged->Terminating dead (unreachable due) and out of nginx": Case(
        "Flagged",
        "Terminating",
        (TerminatePod, RecordEvent),
        record={"slot": None},
        signals=UNREACHABLE_DUE,
    ),
    "Flagged->Terminating dead (probes fail hard) and out of nginx": Case(
        "Flagged",
        "Terminating",
        (TerminatePod, RecordEvent),
        record={"slot": None, "hard_failures": 2},
        signals=SLOW_DUE,
    ),
    "Flagged->Draining replacement_wired": Case(
        "Flagged", "Draining", (Unwire,), event="replacement_wired"
    ),
    "Warming->Terminating retire": Case(
        "Warming", "Terminating", (TerminatePod, RecordEvent), event="retire"
    ),
    "Draining->Updating drain_elapsed and update_planned": Case(
        "Draining",
        "Updating",
        (UpdatePod,),
        record={"update": UPDATE_DRAIN, "drain_reason": "update"},
        after=150,
    ),
    "Draining->Terminating drain_elapsed": Case(
        "Draining", "Terminating", (TerminatePod,), record={"drain_reason": "replace"}, after=150
    ),
    "Updating->Ready new_process_running, passes_in_a_row, slot_offered": Case(
        "Updating",
        "Ready",
        (Wire, RecordEvent),
        record={"pass_streak": 2},
        signals={"probe": probe(process_start=200.0), "offered_slot": 3},
    ),
    "Updating->Ready after rollback (passes suffice)": Case(
        "Updating",
        "Ready",
        (Wire, RecordEvent),
        record={"pass_streak": 2, "update": ROLLBACK_SENT},
        signals={"probe": probe(process_start=100.0), "offered_slot": 3},
    ),
    "Updating->Ready as the canary: new_process_running, passes, slot_offered, is_canary": Case(
        "Updating",
        "Ready",
        (Wire, RecordEvent),
        record={"pass_streak": 2},
        signals={"probe": probe(process_start=200.0), "offered_slot": 3, "canary": True},
    ),
    "Ready->Draining canary_failed": Case(
        "Ready",
        "Draining",
        (Unwire, RecordEvent),
        record={"image": "img:2"},
        signals=CANARY_FAILED,
    ),
    "Draining->Updating drain_elapsed and rollback_planned": Case(
        "Draining",
        "Updating",
        (UpdatePod,),
        record={"update": ROLLBACK_DRAIN, "drain_reason": "update", "image": "img:2"},
        after=150,
    ),
    "Updating->Updating update_failed (refused), not rolling back": Case(
        "Updating", "Updating", (UpdatePod, RecordEvent), signals={"update_refused": True}
    ),
    "Updating->Updating update_failed (timed out), not rolling back": Case(
        "Updating", "Updating", (UpdatePod, RecordEvent), after=900
    ),
    "Updating->Terminating rollback_timed_out": Case(
        "Updating",
        "Terminating",
        (TerminatePod, RecordEvent),
        record={"update": ROLLBACK_SENT},
        after=900,
    ),
    "Terminating->Terminating terminate_retry_due": Case(
        "Terminating", "Terminating", (TerminatePod,), after=300
    ),
}

# Each transition with exactly one of its guards not holding (or the wrong phase/order).
BLOCKED = {
    "Warming stays: missing only 1 loop": Case(
        "Warming", "Warming", signals=NOT_LISTED, record={"missing_loops": 0}
    ),
    "Ready stays: missing only 1 loop": Case("Ready", "Ready", signals=NOT_LISTED),
    "Terminating stays: still listed": Case("Terminating", "Terminating"),
    "Warming stays: only 2 passes in a row": Case(
        "Warming",
        "Warming",
        record={"pass_streak": 1},
        signals={"probe": probe(), "offered_slot": 2},
    ),
    "Warming stays: a failed probe resets the streak": Case(
        "Warming",
        "Warming",
        record={"pass_streak": 5},
        signals={"probe": probe(False), "offered_slot": 2},
    ),
    "Warming stays: no slot offered": Case(
        "Warming", "Warming", record={"pass_streak": 2}, signals={"probe": probe()}
    ),
    "Warming stays: warm-up not over": Case("Warming", "Warming", after=899),
    "Warming->Ready wins over the timeout when it passes": Case(
        "Warming",
        "Ready",
        (Wire,),
        record={"pass_streak": 2},
        after=900,
        signals={"probe": probe(), "offered_slot": 2},
    ),
    "Ready stays: no rule due": Case("Ready", "Ready", signals={"breaches": {"SlowScrape": T0}}),
    "Ready stays: unreachable due but pool-wide": Case(
        "Ready", "Ready", signals=UNREACHABLE_DUE | {"pool_wide": True}
    ),
    "Ready stays: rule due but pool-wide": Case(
        "Ready", "Ready", signals=SLOW_DUE | {"pool_wide": True}
    ),
    "Ready->Flagged stays wired: unreachable due but last wired": Case(
        "Ready", "Flagged", (RecordEvent,), signals=UNREACHABLE_DUE | {"last_wired": True}
    ),
    "Ready->Flagged nothing to unwire: unreachable due but not wired": Case(
        "Ready", "Flagged", (RecordEvent,), record={"slot": None}, signals=UNREACHABLE_DUE
    ),
    "Ready stays wired: one hard failure": Case("Ready", "Ready", signals={"probe": hard_probe()}),
    "Ready stays wired: a failure that is not hard (a timeout) resets the count": Case(
        "Ready", "Ready", record={"hard_failures": 1}, signals={"probe": probe(False)}
    ),
    "Ready stays wired: failing hard but the last wired": Case(
        "Ready",
        "Ready",
        record={"hard_failures": 1},
        signals={"probe": hard_probe(), "last_wired": True},
    ),
    "Ready stays wired: failing hard but pool-wide": Case(
        "Ready",
        "Ready",
        record={"hard_failures": 1},
        signals={"probe": hard_probe(), "pool_wide": True},
    ),
    "Ready stays out: quarantined, only 2 passes": Case(
        "Ready", "Ready", record=QUARANTINED | {"pass_streak": 1}, signals={"probe": probe()}
    ),
    "Ready stays out: quarantined, one pass, another pod in nginx": Case(
        "Ready", "Ready", record=QUARANTINED, signals={"probe": probe(), "offered_slot": 2}
    ),
    "Ready stays out: quarantined, nginx empty, its probe failed": Case(
        "Ready",
        "Ready",
        record=QUARANTINED,
        signals={"probe": hard_probe(), "offered_slot": 2, "last_wired": True},
    ),
    "Ready stays out: quarantined and passing, no slot offered": Case(
        "Ready", "Ready", record=QUARANTINED | {"pass_streak": 2}, signals={"probe": probe()}
    ),
    "Ready stays wired: passing, not quarantined": Case(
        "Ready", "Ready", record={"pass_streak": 2}, signals={"probe": probe(), "offered_slot": 2}
    ),
    "Ready->Flagged from quarantine: a rule due, nothing to unwire": Case(
        "Ready", "Flagged", (RecordEvent,), record=QUARANTINED, signals=UNREACHABLE_DUE
    ),
    "Flagged stays wired: last wired": Case(
        "Flagged", "Flagged", signals=UNREACHABLE_DUE | {"last_wired": True}
    ),
    "Ready->Flagged stays wired: pool-wide holds the flag even with the list read": Case(
        "Ready", "Ready", signals=UNREACHABLE_DUE | {"pool_wide": True, "network_ok": True}
    ),
    "Flagged stays: out of nginx, alive (a slow rule due), replacement not overdue": Case(
        "Flagged", "Flagged", record={"slot": None}, signals=SLOW_DUE
    ),
    "Flagged stays: unreachable not due (other rule due)": Case(
        "Flagged", "Flagged", signals=SLOW_DUE
    ),
    "Flagged->Draining with nothing to unwire": Case(
        "Flagged", "Draining", record={"slot": None}, event="replacement_wired"
    ),
    "Draining stays: drain not elapsed (update)": Case(
        "Draining", "Draining", record={"update": UPDATE_DRAIN}, after=149
    ),
    "Draining stays: drain not elapsed": Case("Draining", "Draining", after=149),
    "Updating stays: process not restarted": Case(
        "Updating",
        "Updating",
        record={"pass_streak": 5},
        signals={"probe": probe(process_start=100.0), "offered_slot": 3},
    ),
    "Updating stays: restarted but only 2 passes": Case(
        "Updating",
        "Updating",
        record={"pass_streak": 1},
        signals={"probe": probe(process_start=200.0), "offered_slot": 3},
    ),
    "Updating stays: restarted and passing but no slot": Case(
        "Updating",
        "Updating",
        record={"pass_streak": 2},
        signals={"probe": probe(process_start=200.0)},
    ),
    "Updating stays: not refused and not timed out": Case("Updating", "Updating", after=899),
    "Updating stays: rolling back, refused again": Case(
        "Updating", "Updating", record={"update": ROLLBACK_SENT}, signals={"update_refused": True}
    ),
    "Updating stays: rollback not timed out": Case(
        "Updating", "Updating", record={"update": ROLLBACK_SENT}, after=899
    ),
    "Terminating stays: retry not due": Case("Terminating", "Terminating", after=299),
    "Ready stays: a canary failure without an image to go back to": Case(
        "Ready", "Ready", signals=CANARY_FAILED | {"rollback_to": None}
    ),
    "Ready->Draining canary_failed wins over a health rule due": Case(
        "Ready", "Draining", (Unwire, RecordEvent), signals=CANARY_FAILED | SLOW_DUE, after=600
    ),
    "Draining stays: rollback planned, drain not elapsed": Case(
        "Draining", "Draining", record={"update": ROLLBACK_DRAIN}, after=149
    ),
    "Updating->Ready rolled back canary is no canary any more": Case(
        "Updating",
        "Ready",
        (Wire, RecordEvent),
        record={"pass_streak": 2, "update": ROLLBACK_SENT},
        signals={"probe": probe(process_start=100.0), "offered_slot": 3, "canary": True},
    ),
}


@pytest.mark.parametrize("case", [_param(n, c) for n, c in FIRES.items()])
def test_transition_fires_when_its_guards_hold(case: Case) -> None:
    step = run(case)
    assert step.record.phase == case.expect
    assert tuple(type(e) for e in step.effects) == case.effects
    assert [m.target for m in step.moves] == [case.expect]


@pytest.mark.parametrize("case", [_param(n, c) for n, c in BLOCKED.items()])
def test_transition_is_blocked_when_one_guard_fails(case: Case) -> None:
    step = run(case)
    assert step.record.phase == case.expect
    assert tuple(type(e) for e in step.effects) == case.effects


class TestWhatTransitionsWrite:
    def test_wiring_records_the_offered_slot_and_wires_that_slot(self) -> None:
        step = run(FIRES["Warming->Ready passes_in_a_row and slot_offered"])
        assert step.record.slot == 2
        assert step.effects == (Wire(pod_id="pod1", slot=2),)

    def test_phase_change_stamps_since_and_a_stay_does_not(self) -> None:
        moved = run(FIRES["Warming->Ready passes_in_a_row and slot_offered"])
        stayed = run(BLOCKED["Warming stays: no slot offered"])
        assert moved.record.since == T0 + dt.timedelta(seconds=30)
        assert stayed.record.since == T0

    def test_warmup_timeout_terminates_and_counts_the_datacenter_toward_cooldown(self) -> None:
        step = run(FIRES["Warming->Terminating warmup_timed_out"])
        terminate = step.effects[0]
        assert isinstance(terminate, TerminatePod)
        assert terminate.cooldown_datacenter == "EU-RO-1"
        assert step.record.terminate_requested_at == T0 + dt.timedelta(seconds=900)

    def test_flag_names_the_rule_and_its_reason_and_unwires_the_slot(self) -> None:
        step = run(
            FIRES["Ready->Flagged unreachable_due, wired, not last, not pool-wide (unwired)"]
        )
        assert (step.record.flagged_rule, step.record.slot) == ("Unreachable", None)
        assert step.record.flagged_reason == UNREACHABLE_DUE["reasons"]["Unreachable"]
        assert step.effects[1] == Unwire(pod_id="pod1", slot=1, reason="unreachable")
        assert step.record.breaches == {"Unreachable": T0}

    def test_drain_for_update_plans_the_update_and_then_sends_it(self) -> None:
        drained = run(FIRES["Ready->Draining drain update"]).record
        assert (drained.drain_reason, drained.update) == ("update", UPDATE_DRAIN)
        later = T0 + dt.timedelta(seconds=30 + 150)
        step = observe(drained, signals=signals(probe=probe(process_start=100.0)), now=later)
        assert step.effects == (
            UpdatePod(
                pod_id="pod1",
                name="rpp-inference-1",
                image="img:2",
                from_image="img:1",
                reason="rolling image update",
            ),
        )
        assert step.record.update is not None
        assert (step.record.update.step, step.record.update.process_start_before) == (
            "restart",
            100.0,
        )
        assert step.record.pass_streak == 0

    def test_scale_down_drain_terminates_without_cooldown(self) -> None:
        case = Case(
            "Draining",
            "Terminating",
            (TerminatePod,),
            record={"drain_reason": "scale-down"},
            after=150,
        )
        terminate = run(case).effects[0]
        assert isinstance(terminate, TerminatePod)
        assert terminate.cooldown_datacenter is None

    def test_update_success_wires_and_records_the_new_image(self) -> None:
        step = run(FIRES["Updating->Ready new_process_running, passes_in_a_row, slot_offered"])
        assert (step.record.image, step.record.update, step.record.slot) == ("img:2", None, 3)
        event = step.effects[1]
        assert isinstance(event, RecordEvent)
        assert event.reason == "PodUpdated"

    def test_rollback_sends_the_old_image_and_marks_the_update(self) -> None:
        step = run(FIRES["Updating->Updating update_failed (refused), not rolling back"])
        rollback = step.effects[0]
        assert isinstance(rollback, UpdatePod)
        assert (rollback.image, rollback.from_image, rollback.rollback) == ("img:1", "img:2", True)
        assert step.record.update is not None
        assert step.record.update.rollback

    def test_rolled_back_member_returns_ready_on_its_old_image(self) -> None:
        step = run(FIRES["Updating->Ready after rollback (passes suffice)"])
        assert step.record.update is None
        event = step.effects[1]
        assert isinstance(event, RecordEvent)
        assert (event.type, event.reason) == ("Warning", "UpdateRolledBack")

    def test_a_canary_back_in_service_says_it_bakes_and_for_how_long(self) -> None:
        step = run(
            FIRES[
                "Updating->Ready as the canary: new_process_running, passes, slot_offered, "
                "is_canary"
            ]
        )
        assert (step.record.image, step.record.update, step.record.slot) == ("img:2", None, 3)
        event = step.effects[1]
        assert isinstance(event, RecordEvent)
        assert event.reason == "CanaryBaking"
        assert "bakes for 10m against the pods still on img:1" in event.message

    def test_a_failed_canary_is_unwired_with_the_numbers_and_goes_back_through_a_drain(
        self,
    ) -> None:
        step = run(FIRES["Ready->Draining canary_failed"])
        unwire, event = step.effects
        assert isinstance(unwire, Unwire)
        assert isinstance(event, RecordEvent)
        assert (event.type, event.reason) == ("Warning", "CanaryFailed")
        assert "error ratio 30.0% against 0.0%" in event.message
        assert step.record.drain_reason == "update"
        assert step.record.update == ROLLBACK_DRAIN
        later = T0 + dt.timedelta(seconds=30 + 150)
        sent = observe(step.record, signals=signals(probe=probe(process_start=400.0)), now=later)
        (rollback,) = sent.effects
        assert isinstance(rollback, UpdatePod)
        assert (rollback.image, rollback.from_image, rollback.rollback) == ("img:1", "img:2", True)
        assert sent.record.update is not None
        assert (sent.record.update.step, sent.record.update.process_start_before) == (
            "restart",
            400.0,
        )
        back = observe(
            sent.record.replace(pass_streak=2),
            signals=signals(probe=probe(process_start=400.0), offered_slot=2),
            now=later + dt.timedelta(seconds=30),
        )
        assert (back.record.phase, back.record.image, back.record.update) == (
            "Ready",
            "img:1",
            None,
        )

    def test_listing_resets_the_missing_count_and_refreshes_reported_fields(self) -> None:
        moved_pod = RunPodPod(**(vars(POD) | {"image": "img:9", "cost_per_hr": 0.5}))
        record = member("Ready", missing_loops=1)
        step = observe(record, signals=signals(pod=moved_pod), now=T0)
        assert (step.record.missing_loops, step.record.image, step.record.cost_per_hr) == (
            0,
            "img:9",
            0.5,
        )

    def test_passes_of_the_old_process_do_not_count_while_an_update_waits(self) -> None:
        step = run(BLOCKED["Updating stays: process not restarted"])
        assert step.record.pass_streak == 0


class TestOrdersAndErrors:
    @pytest.mark.parametrize("phase", [p for p in PHASES if p != "Ready"])
    def test_drain_of_a_member_that_is_not_ready_is_a_clear_error(self, phase: str) -> None:
        case = Case(phase, phase, event="drain", reason="scale-down")
        with pytest.raises(ValueError, match=f"is {phase}; drain does not apply"):
            run(case)

    @pytest.mark.parametrize("phase", [p for p in PHASES if p != "Warming"])
    def test_retire_of_a_member_that_is_not_warming_is_a_clear_error(self, phase: str) -> None:
        with pytest.raises(ValueError, match=f"is {phase}; retire does not apply"):
            run(Case(phase, phase, event="retire"))

    def test_retire_terminates_without_cooldown(self) -> None:
        step = run(Case("Warming", "Terminating", event="retire"))
        terminate = next(e for e in step.effects if isinstance(e, TerminatePod))
        assert terminate.cooldown_datacenter is None
        assert step.record.drain_reason == "scale-down"

    def test_replacement_wired_for_a_member_that_is_not_flagged_is_a_clear_error(self) -> None:
        with pytest.raises(ValueError, match="replacement_wired does not apply"):
            run(Case("Ready", "Ready", event="replacement_wired"))

    @pytest.mark.parametrize(
        ("reason", "image", "message"),
        [
            ("replace", None, "reason must be update or scale-down"),
            ("update", None, "needs the new image"),
        ],
    )
    def test_drain_with_a_bad_order_is_refused_and_changes_nothing(
        self, reason: str, image: str | None, message: str
    ) -> None:
        with pytest.raises(ValueError, match=message):
            run(Case("Ready", "Ready", event="drain", reason=reason, image=image))


class TestRehydration:
    def test_machine_states_are_exactly_the_persisted_phases(self) -> None:
        assert list(MemberMachine.states_map) == list(PHASES)
        assert [s.value for s in MemberMachine.final_states] == ["Gone"]

    @pytest.mark.parametrize("phase", PHASES)
    def test_rehydrates_in_its_phase_without_running_entry_actions(self, phase: str) -> None:
        record = member(phase)
        view = MemberView(record)
        machine = MemberMachine(view)
        assert machine.current_state_value == phase
        assert view.record() == record
        assert (view.effects, view.moves) == ([], [])

    @pytest.mark.parametrize("phase", [p for p in PHASES if p != "Gone"])
    def test_an_observe_where_nothing_applies_keeps_phase_and_emits_nothing(
        self, phase: str
    ) -> None:
        step = observe(member(phase), signals=signals(), now=T0 + dt.timedelta(seconds=1))
        assert (step.record.phase, step.effects) == (phase, ())

    @pytest.mark.parametrize("phase", ["Bogus", "ready", ""])
    def test_a_record_cannot_carry_a_phase_the_machine_does_not_have(self, phase: str) -> None:
        with pytest.raises(ValidationError, match=r"phase\n  Input should be 'Warming', 'Ready'"):
            member("Ready").replace(phase=phase)

    def test_new_pod_starts_warming_and_an_adopted_wired_one_starts_ready(self) -> None:
        fresh = new_member(POD, now=T0, replacement_for="old1")
        adopted = new_member(POD, now=T0, slot=4, adopted=True)
        assert (fresh.phase, fresh.slot, fresh.replacement_for) == ("Warming", None, "old1")
        assert (adopted.phase, adopted.slot, adopted.adopted) == ("Ready", 4, True)
        assert (fresh.datacenter, fresh.gpu_type, fresh.image) == (
            "EU-RO-1",
            "NVIDIA GeForce RTX 4090",
            "img:1",
        )


def test_updating_record_uses_a_last_probe_to_detect_restart() -> None:
    """A restart seen in an earlier loop still counts (the record is the memory)."""
    record = member("Updating", pass_streak=2, last_probe=last_probe(250.0))
    step = observe(
        record, signals=signals(probe=probe(process_start=250.0), offered_slot=1), now=T0
    )
    assert step.record.phase == "Ready"


def fresh_run(case: Case) -> MemberStep:
    """The same event on a newly built machine (the driver reuses one per thread)."""
    record = member(case.phase, **case.record)
    now = T0 + dt.timedelta(seconds=case.after)
    sig = signals(**case.signals)
    if case.event == "observe":
        record = refresh(record, sig, now)
    if case.event == "observe_unlisted":
        record = refresh(record, sig, now, listing=False)
    view = MemberView(record)
    MemberMachine(view).send(
        case.event, signals=sig, now=now, reason=case.reason, image=case.image
    )
    return MemberStep(record=view.record(), effects=tuple(view.effects), moves=tuple(view.moves))


@pytest.mark.parametrize("case", [_param(n, c) for n, c in (FIRES | BLOCKED).items()])
def test_a_reused_machine_decides_exactly_like_a_fresh_one(case: Case) -> None:
    run(FIRES["Warming->Gone missing_for_loops"])  # a machine that reached a final state
    with pytest.raises(ValueError, match="does not apply"):
        run(Case("Warming", "Warming", event="drain", reason="scale-down"))
    run(FIRES["Ready->Draining drain update"])  # leaves a different member behind
    assert run(case) == fresh_run(case)


@pytest.mark.parametrize(
    "case", [_param(n, c) for n, c in (FIRES | BLOCKED).items() if c.event == "observe"]
)
def test_may_move_says_whether_sending_observe_takes_a_transition(case: Case) -> None:
    record = member(case.phase, **case.record)
    now = T0 + dt.timedelta(seconds=case.after)
    sig = signals(**case.signals)
    machine = MemberMachine(MemberView(refresh(record, sig, now)))
    answer = machine.may_move("observe", signals=sig, now=now, reason=None, image=None)
    assert answer == bool(fresh_run(case).moves)


def test_a_quiet_member_is_not_dispatched_through_the_library(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The driver asks may_move first: a Ready member with nothing new costs no send."""

    def no_send(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("a quiet member was sent observe")

    record = member("Ready", slot=2)
    monkeypatch.setattr(MemberMachine, "send", no_send)
    step = observe(record, signals=signals(probe=probe()), now=T0 + dt.timedelta(seconds=30))
    assert (step.record.phase, step.record.slot, step.effects, step.moves) == ("Ready", 2, (), ())
    assert step.record.pass_streak == record.pass_streak + 1  # this loop's facts, folded in


class TestWithoutTheListing:
    """observe_unlisted: a loop whose RunPod listing could not be read."""

    def test_only_the_probe_is_folded_in_and_no_missing_listing_is_counted(self) -> None:
        record = member("Ready", slot=2, missing_loops=1, pass_streak=2)
        step = observe_unlisted(
            record, signals=signals(pod=None, probe=probe()), now=T0 + dt.timedelta(seconds=30)
        )
        assert (step.record.phase, step.record.slot, step.moves) == ("Ready", 2, ())
        assert (step.record.missing_loops, step.record.pass_streak) == (1, 3)

    @pytest.mark.parametrize("phase", ["Warming", "Draining", "Updating", "Terminating"])
    def test_no_lifecycle_move_is_taken_whatever_is_due(self, phase: str) -> None:
        record = member(phase, missing_loops=5, hard_failures=3, pass_streak=9)
        step = observe_unlisted(
            record,
            signals=signals(pod=None, probe=hard_probe(), offered_slot=2),
            now=T0 + dt.timedelta(hours=5),
        )
        assert (step.record.phase, step.effects, step.moves) == (phase, (), ())

    def test_the_last_wired_pod_and_a_pool_wide_failure_stay_in_nginx(self) -> None:
        record = member("Ready", slot=2, hard_failures=1)
        for kept in ({"last_wired": True}, {"pool_wide": True}):
            step = observe_unlisted(
                record,
                signals=signals(pod=None, probe=hard_probe(), **kept),
                now=T0 + dt.timedelta(seconds=30),
            )
            assert (step.record.slot, step.moves) == (2, ()), kept

    def test_they_leave_nginx_once_another_pod_passing_shows_the_network_works(self) -> None:
        record = member("Ready", slot=2, hard_failures=1)
        for rank in ({"last_wired": True}, {"pool_wide": True}):
            step = observe_unlisted(
                record,
                signals=signals(pod=None, probe=hard_probe(), network_ok=True, **rank),
                now=T0 + dt.timedelta(seconds=30),
            )
            assert step.record.slot is None, rank
            assert step.record.quarantine is not None, rank
