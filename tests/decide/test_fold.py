"""What act did, folded back into the status (rpp/decide/fold.py).

A created pod joins Warming, paired with the member it replaces, its create logged (no
earlier than it happened) and priced from this loop; a refusal waits the backoff, and
only a create that may have made a pod counts toward the hour; a failed terminate is
remembered on its member; an update's refusal goes to its member, a rollback holds
updates back; every known outcome takes its intent away and lands in history.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from rpp.decide.capacity.safeguards import CREATE_BACKOFF
from rpp.decide.fold import fold
from rpp.decide.ledger.intents import write_ahead
from rpp.machines.rollout import UPDATE_BACKOFF
from rpp.model.effects import CreatePod, RecordEvent, TerminatePod, Unwire, UpdatePod, Wire
from rpp.model.members import Phase, UpdateProgress, UpdateStep
from rpp.model.records import CapacityRefusal
from rpp.model.results import EffectResult, Result
from rpp.model.status import PoolStatus
from tests.decide.builders import NOW, PREFIX, flagged, member, pod, pool_status, wired

NAME = f"{PREFIX}new0000001"
CREATE = CreatePod(pool="web", name=NAME, reason="replace old1", replacement_for="old1")
TERMINATE = TerminatePod(pod_id="old1", name=f"{PREFIX}old1", reason="flagged")
ROLLBACK = UpdatePod(
    pod_id="upd1",
    name=f"{PREFIX}upd1",
    image="img:1",
    from_image="img:2",
    reason="canary failed",
    rollback=True,
)


def before_act() -> PoolStatus:
    """The status stored ahead of act: the flagged old1 and the intents of this loop."""
    return write_ahead(
        pool_status(flagged("old1"), member("upd1", Phase.UPDATING, update=_update())),
        [CREATE, TERMINATE, ROLLBACK],
        NOW,
    )


def _update() -> UpdateProgress:
    return UpdateProgress(from_image="img:1", to_image="img:2", step=UpdateStep.RESTART)


def test_a_created_pod_joins_warming_paired_with_the_member_it_replaces() -> None:
    stored = write_ahead(pool_status(flagged("old1")), [CREATE], NOW)
    created = pod("new1", name=NAME, cost_per_hr=0.5)
    acted_at = NOW + dt.timedelta(seconds=3, microseconds=1)

    status = fold(
        stored, [EffectResult(CREATE, Result.CREATED, pod=created)], now=NOW, acted_at=acted_at
    )

    new = status.member("new1")
    assert new is not None
    assert (new.phase, new.replacement_for, new.unconfirmed_since) == (Phase.WARMING, "old1", NOW)
    old = status.member("old1")
    assert old is not None
    assert old.replaced_by == "new1"
    (logged,) = status.create_log
    assert (logged.outcome, logged.name, logged.time) == (
        "created",
        NAME,
        NOW + dt.timedelta(seconds=4),
    )
    assert status.cost_per_hour == 0.5  # counted from this loop, not the next listing
    assert status.intents == ()
    assert status.history[-1].outcome == "created"


def test_a_create_that_succeeded_clears_the_stock_refusal_and_the_backoff() -> None:
    stored = pool_status(
        last_capacity_refusal=CapacityRefusal(time=NOW, message="no stock"),
    ).replace(backoff={"createUntil": NOW})
    status = fold(
        stored, [EffectResult(CREATE, Result.CREATED, pod=pod("new1", name=NAME))], now=NOW
    )
    assert status.last_capacity_refusal is None
    assert status.backoff.create_until is None


def test_a_create_of_unknown_outcome_counts_toward_the_hour_and_waits() -> None:
    stored = write_ahead(pool_status(), [CREATE], NOW)
    status = fold(stored, [EffectResult(CREATE, Result.UNKNOWN, detail="timeout")], now=NOW)
    assert [(a.outcome, a.name, a.replacement_for) for a in status.create_log] == [
        ("unknown", NAME, "old1")
    ]
    assert status.backoff.create_until == NOW + CREATE_BACKOFF
    assert status.members == ()  # the next listing finds it by name
    assert status.intents == ()


def test_a_create_refused_for_stock_records_what_was_tried_and_does_not_count() -> None:
    refusal = CapacityRefusal(time=NOW, gpu_types=("NVIDIA GeForce RTX 4090",), message="none")
    result = EffectResult(CREATE, Result.REFUSED, capacity=refusal, prices={"A": 0.4})
    status = fold(pool_status(), [result], now=NOW)
    assert status.last_capacity_refusal == refusal
    assert status.create_log == ()
    assert status.backoff.create_until == NOW + CREATE_BACKOFF
    assert status.catalog_prices == {"A": 0.4}  # the prices read are kept for the cost cap


def test_a_create_refused_for_another_reason_waits_without_counting() -> None:
    status = fold(pool_status(), [EffectResult(CREATE, Result.FAILED, detail="401")], now=NOW)
    assert status.create_log == ()
    assert status.last_capacity_refusal is None
    assert status.backoff.create_until == NOW + CREATE_BACKOFF


def test_a_planned_effect_changes_nothing_and_keeps_its_intent() -> None:
    stored = before_act()
    results = [EffectResult(e, Result.PLANNED) for e in (CREATE, TERMINATE, ROLLBACK)]
    assert fold(stored, results, now=NOW) == stored


def test_a_failed_terminate_is_remembered_on_its_member_for_the_retry() -> None:
    status = fold(
        before_act(), [EffectResult(TERMINATE, Result.FAILED, detail="read-only key")], now=NOW
    )
    old = status.member("old1")
    assert old is not None
    assert old.terminate_error == "read-only key"
    assert status.history[-1].detail.startswith("read-only key (for: terminate pod old1")
    assert ("terminate", "old1") not in [i.key for i in status.intents]


def test_a_terminate_that_went_through_leaves_no_error_on_its_member() -> None:
    status = fold(before_act(), [EffectResult(TERMINATE, Result.OK)], now=NOW)
    old = status.member("old1")
    assert old is not None
    assert old.terminate_error is None


def test_a_rollback_sent_holds_image_updates_back() -> None:
    status = fold(before_act(), [EffectResult(ROLLBACK, Result.OK)], now=NOW)
    assert status.backoff.update_until == NOW + UPDATE_BACKOFF
    upd = status.member("upd1")
    assert upd is not None
    assert upd.update is not None
    assert upd.update.refused is None


def test_a_refused_update_is_remembered_on_its_member_so_it_rolls_back() -> None:
    update = dataclasses.replace(ROLLBACK, rollback=False, image="img:2", from_image="img:1")
    stored = write_ahead(
        pool_status(member("upd1", Phase.UPDATING, update=_update())), [update], NOW
    )
    status = fold(stored, [EffectResult(update, Result.REFUSED, detail="no such image")], now=NOW)
    upd = status.member("upd1")
    assert upd is not None
    assert upd.update is not None
    assert upd.update.refused == "no such image"
    assert status.backoff.update_until is None


def test_wires_unwires_and_events_leave_no_trace_in_the_status() -> None:
    stored = pool_status(wired("a", 8081))
    results = [
        EffectResult(Wire(pod_id="a", slot=8081), Result.OK),
        EffectResult(Unwire(pod_id="a", slot=8081, reason="dead"), Result.OK),
        EffectResult(RecordEvent(type="Normal", reason="R", message="m"), Result.OK),
    ]
    assert fold(stored, results, now=NOW) == stored
