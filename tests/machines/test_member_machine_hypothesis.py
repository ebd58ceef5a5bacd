"""Random loops through the member machine: it never reaches an undefined state, its
record always survives the JSON round trip exactly, and effects come only from
transitions.

The driver's shortcut for quiet loops (`MemberMachine.may_move`, asked before sending
`observe`) agrees with sending, on every random loop.

"Effects come only from transitions", precisely: every event takes at most one move,
and an event that takes none ("nothing applies this loop") emits nothing and keeps the
phase. A move that changes phase may emit only the effect types the architecture table
lists for it (ALLOWED). A move that keeps the phase is one of the three declared
self-transitions, each recognisable by the record change it makes: Flagged unwire (one
Unwire of the slot it had; the slot is cleared), Updating rollback (UpdatePod with
rollback=True and an Event; the update is marked rollback), Updating resend (one
UpdatePod to the image the update was going to, after a loop stopped before RunPod
answered; the update's clock restarts), Terminating retry (one TerminatePod;
terminate_requested_at moves to now).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from rpp.machines.member import MemberMachine
from rpp.machines.member_step import MemberStep, drain, let_go, observe, replacement_wired
from rpp.machines.member_view import MemberView
from rpp.machines.signals import MemberSignals, refresh
from rpp.model.codec import stamp
from rpp.model.effects import RecordEvent, TerminatePod, Unwire, UpdatePod, Wire
from rpp.model.members import (
    PHASES,
    DrainReason,
    MemberRecord,
    Phase,
    UpdateProgress,
    UpdateStep,
)
from rpp.model.observations import ProbeResult
from tests.machines.test_member_machine import POD, SETTINGS, T0

RULES = ("Unreachable", "SlowScrape", "RelativeLatency", "ErrorRate", "HostNotice")
LIVE = ("Warming", "Ready", "Flagged", "Draining", "Updating", "Terminating")
ALLOWED: dict[tuple[str, str, str], set[type]] = {
    **{(phase, "Gone", "observe"): {Unwire, RecordEvent} for phase in LIVE},
    ("Warming", "Ready", "observe"): {Wire},
    ("Warming", "Terminating", "observe"): {TerminatePod, RecordEvent, Unwire},
    ("Ready", "Flagged", "observe"): {RecordEvent, Unwire},
    ("Ready", "Draining", "drain"): {Unwire},
    ("Flagged", "Draining", "replacement_wired"): {Unwire},
    ("Flagged", "Terminating", "observe"): {TerminatePod, RecordEvent},
    ("Flagged", "Terminating", "let_go"): {TerminatePod, RecordEvent},
    ("Flagged", "Draining", "let_go"): {Unwire, RecordEvent},
    ("Draining", "Updating", "observe"): {UpdatePod},
    ("Draining", "Terminating", "observe"): {TerminatePod},
    ("Updating", "Ready", "observe"): {Wire, RecordEvent},
    ("Updating", "Terminating", "observe"): {TerminatePod, RecordEvent},
}
UNWIRED_PHASES = {"Warming", "Draining", "Updating", "Terminating", "Gone"}


@dataclass(frozen=True)
class Loop:
    """One loop's random facts and the pool's random order for the member."""

    after: int
    order: str  # observe | drain | replacement_wired | let_go (used only when it applies)
    listed: bool
    probe: ProbeResult | None
    flagged: tuple[str, ...]
    pool_wide: bool
    last_wired: bool
    offered_slot: int | None
    update_refused: bool
    drain_reason: str
    image: str
    unconfirmed: str | None = None


# Weighted toward healthy pods and few breaches, so long lives (updates that finish,
# flagged pods that get unwired) are reached, not only quick deaths.
probes = st.one_of(
    st.none(),
    st.builds(
        lambda passed, start: ProbeResult(
            passed=passed,
            health_ok=passed,
            metrics_ok=passed,
            health_latency_s=0.05,
            metrics_latency_s=0.1,
            process_start=start,
        ),
        st.sampled_from([True, True, True, False]),
        st.sampled_from([200.0, 200.0, 100.0, None]),
    ),
)

loops = st.builds(
    Loop,
    after=st.sampled_from([0, 1, 30, 30, 30, 120, 149, 150, 299, 300, 600, 899, 900, 3600]),
    order=st.sampled_from(["observe", "observe", "drain", "replacement_wired", "let_go"]),
    listed=st.sampled_from([True] * 6 + [False]),
    probe=probes,
    flagged=st.sampled_from(
        [(), (), (), ("Unreachable",), ("SlowScrape",), ("ErrorRate", "HostNotice")]
    ),
    pool_wide=st.booleans(),
    last_wired=st.booleans(),
    offered_slot=st.one_of(st.none(), st.integers(0, 5)),
    update_refused=st.booleans(),
    drain_reason=st.sampled_from(["update", "scale-down"]),
    image=st.sampled_from(["img:1", "img:2"]),
    unconfirmed=st.sampled_from([None, None, None, "terminate", "update"]),
)


@st.composite
def starts(draw: st.DrawFn) -> MemberRecord:
    """A consistent record in any live phase (as status written by the pool would hold)."""
    phase = draw(st.sampled_from(LIVE))
    slot = {"Ready": draw(st.integers(0, 5)), "Flagged": draw(st.none() | st.integers(0, 5))}
    update = None
    if phase in ("Updating", "Draining") and (phase == "Updating" or draw(st.booleans())):
        update = UpdateProgress(
            from_image="img:1",
            to_image="img:2",
            step=UpdateStep.RESTART if phase == "Updating" else UpdateStep.DRAIN,
            started_at=T0 if phase == "Updating" else None,
            process_start_before=draw(st.sampled_from([None, 100.0])),
            rollback=phase == "Updating" and draw(st.booleans()),
        )
    return MemberRecord(
        pod_id=POD.id,
        name=POD.name,
        phase=Phase(phase),
        since=T0,
        slot=slot.get(phase),
        datacenter="EU-RO-1",
        image="img:1",
        pass_streak=draw(st.integers(0, 4)),
        missing_loops=draw(st.integers(0, 1)),
        drain_reason=draw(st.sampled_from([DrainReason.REPLACE, DrainReason.SCALE_DOWN]))
        if phase == "Draining"
        else None,
        update=update,
    )


def signals_of(loop: Loop) -> MemberSignals:
    return MemberSignals(
        settings=SETTINGS,
        pod=POD if loop.listed else None,
        probe=loop.probe,
        breaches=dict.fromkeys(loop.flagged, T0),
        flagged=loop.flagged,
        reasons={rule: f"{rule} breached" for rule in loop.flagged},
        pool_wide=loop.pool_wide,
        last_wired=loop.last_wired,
        offered_slot=loop.offered_slot,
        update_refused=loop.update_refused,
        unconfirmed=loop.unconfirmed,
    )


def drive(record: MemberRecord, loop: Loop, now: dt.datetime) -> MemberStep:
    sig = signals_of(loop)
    if loop.order == "let_go" and record.phase == "Flagged":
        return let_go(record, reason="the pool has enough", signals=sig, now=now)
    if loop.order == "drain" and record.phase == "Ready":
        return drain(record, reason=loop.drain_reason, image=loop.image, signals=sig, now=now)
    if loop.order == "replacement_wired" and record.phase == "Flagged":
        return replacement_wired(record, signals=sig, now=now)
    return observe(record, signals=sig, now=now)


def check_effects_come_from_transitions(
    before: MemberRecord, step: MemberStep, now: dt.datetime
) -> None:
    assert len(step.moves) <= 1
    after = step.record
    if not step.moves:
        assert (after.phase, step.effects) == (before.phase, ())
        return
    move = step.moves[0]
    kinds = [type(e) for e in step.effects]
    if move.changed_phase:
        allowed = ALLOWED[(move.source, move.target, move.event)]
        assert set(kinds) <= allowed, (move, kinds)
    elif step.effects:
        if move.source == "Flagged":
            assert before.slot is not None
            assert step.effects == (
                Unwire(pod_id=before.pod_id, slot=before.slot, reason="unreachable"),
            )
            assert after.slot is None
        elif move.source == "Updating" and kinds == [UpdatePod]:
            assert isinstance(step.effects[0], UpdatePod)
            assert before.update is not None
            assert step.effects[0].image == before.update.running_image
            assert step.effects[0].rollback == before.update.rollback
            assert after.update == before.update.replace(started_at=stamp(now))
        elif move.source == "Updating":
            assert kinds == [UpdatePod, RecordEvent]
            assert isinstance(step.effects[0], UpdatePod)
            assert step.effects[0].rollback
            assert before.update is not None
            assert not before.update.rollback
            assert after.update is not None
            assert after.update.rollback
        else:
            assert move.source == "Terminating"
            assert kinds == [TerminatePod]
            assert after.terminate_requested_at == stamp(now)
    for effect in step.effects:
        if isinstance(effect, Wire):
            assert effect.slot == after.slot
        if isinstance(effect, Unwire):
            assert effect.slot == before.slot


@settings(max_examples=200, deadline=None)
@given(start=starts(), sequence=st.lists(loops, min_size=1, max_size=25))
def test_random_loops_keep_the_machine_defined_persistable_and_effects_on_transitions(
    start: MemberRecord, sequence: list[Loop]
) -> None:
    record, now = start, T0
    for loop in sequence:
        now += dt.timedelta(seconds=loop.after)
        step = drive(record, loop, now)
        assert step.record.phase in PHASES
        stored = json.loads(json.dumps(step.record.stored()))
        assert MemberRecord.from_stored(stored, "status.members[0]") == step.record
        check_effects_come_from_transitions(record, step, now)
        if step.record.phase in UNWIRED_PHASES:
            assert step.record.slot is None, step
        if step.record.phase == "Ready":
            assert step.record.slot is not None, step
        record = step.record
        if step.gone:
            break


@settings(max_examples=200, deadline=None)
@given(start=starts(), sequence=st.lists(loops, min_size=1, max_size=25))
def test_may_move_agrees_with_sending_observe_on_random_loops(
    start: MemberRecord, sequence: list[Loop]
) -> None:
    record, now = start, T0
    for loop in sequence:
        now += dt.timedelta(seconds=loop.after)
        sig = signals_of(loop)
        refreshed = refresh(record, sig, now)
        asked = MemberMachine(MemberView(refreshed))
        answer = asked.may_move("observe", signals=sig, now=now, reason=None, image=None)
        sent = MemberMachine(MemberView(refreshed))
        sent.send("observe", signals=sig, now=now, reason=None, image=None)
        assert answer == bool(sent.view.moves), (refreshed, loop)
        record = drive(record, loop, now).record
        if record.phase == "Gone":
            break
