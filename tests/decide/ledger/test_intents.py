"""Write intent before acting, and settle what a stopped loop left (rpp/decide/ledger/intents.py).

A loop that creates, terminates or updates a pod stores one intent per RunPod write
before it acts; fold removes each once its outcome is known. A crash in between leaves
intents behind, and the next loop settles them from RunPod's listing before it decides
anything: a create is adopted or, after `SETTLE_AFTER`, counted as unknown (it counts
toward the hourly cap either way); a terminate or update is done when its pod is gone,
an update landed when its pod runs the image, and any other is sent again.
"""

from __future__ import annotations

import datetime as dt

import pytest

from rpp.decide.ledger.intents import (
    SETTLE_AFTER,
    attempts_by_name,
    ceil_second,
    done,
    intent_for,
    pending_replacements,
    settle,
    write_ahead,
)
from rpp.machines.rollout import UPDATE_BACKOFF
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
from rpp.model.members import Phase, UpdateProgress, UpdateStep
from rpp.model.records import CreateAttempt, Intent
from rpp.model.results import EffectResult, Result
from rpp.model.status import PoolStatus
from tests.decide.builders import NOW, PREFIX, member, pod
from tests.decide.ledger.conftest import (
    IMAGE,
    NEW_IMAGE,
    create_intent,
    terminate_intent,
    update_intent,
)

NEW_POD = f"{PREFIX}new0000001"

CREATE = CreatePod(pool="web", name=NEW_POD, reason="replacement", replacement_for="old1")
TERMINATE = TerminatePod(pod_id="pod1", name=f"{PREFIX}pod1", reason="flagged")
UPDATE = UpdatePod(
    pod_id="pod2", name=f"{PREFIX}pod2", image=NEW_IMAGE, from_image=IMAGE, reason="release"
)


# --- what is written down ------------------------------------------------------------


def test_a_create_is_written_down_with_its_name_and_the_member_it_replaces() -> None:
    intent = intent_for(CREATE, NOW)
    assert intent == Intent(
        action="create",
        time=NOW,
        name=NEW_POD,
        replacement_for="old1",
        purpose="replacement",
    )


def test_a_terminate_is_written_down_by_pod_id() -> None:
    intent = intent_for(TERMINATE, NOW)
    assert intent is not None
    assert (intent.action, intent.pod, intent.purpose) == ("terminate", "pod1", "flagged")
    assert intent.key == ("terminate", "pod1")


def test_an_update_is_written_down_with_the_image_asked_for_and_whether_it_rolls_back() -> None:
    rollback = UpdatePod(
        pod_id="pod2",
        name=f"{PREFIX}pod2",
        image=IMAGE,
        from_image=NEW_IMAGE,
        reason="canary failed",
        rollback=True,
    )
    intent = intent_for(rollback, NOW)
    assert intent is not None
    assert (intent.action, intent.pod, intent.image, intent.rollback) == (
        "update",
        "pod2",
        IMAGE,
        True,
    )


@pytest.mark.parametrize(
    "effect",
    [
        Wire(pod_id="pod1", slot=8081),
        Unwire(pod_id="pod1", slot=8081, reason="dead"),
        WriteSlots(slots=((8081, "pod1"),)),
        RecordEvent(type="Normal", reason="Why", message="because"),
        AddFinalizer(reason="manage"),
        RemoveFinalizer(reason="observe"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_an_effect_that_writes_nothing_to_runpod_needs_no_intent(effect: Effect) -> None:
    assert intent_for(effect, NOW) is None


def test_write_ahead_stores_one_intent_per_runpod_write_and_none_for_the_rest() -> None:
    effects: list[Effect] = [
        CREATE,
        RecordEvent(type="Normal", reason="Why", message="because"),
        TERMINATE,
        UPDATE,
    ]
    status = write_ahead(PoolStatus(), effects, NOW)
    assert [i.key for i in status.intents] == [
        ("create", NEW_POD),
        ("terminate", "pod1"),
        ("update", "pod2"),
    ]


def test_writing_the_same_terminate_ahead_again_keeps_one_intent_with_the_newer_time() -> None:
    first = write_ahead(PoolStatus(), [TERMINATE], NOW - dt.timedelta(minutes=5))
    again = write_ahead(first, [TERMINATE], NOW)
    assert [(i.key, i.time) for i in again.intents] == [(("terminate", "pod1"), NOW)]


# --- fold: an outcome known ------------------------------------------------------------


@pytest.mark.parametrize("result", [Result.OK, Result.GONE, Result.FAILED, Result.REFUSED])
def test_an_effect_whose_outcome_is_known_takes_its_intent_away(result: Result) -> None:
    status = write_ahead(PoolStatus(), [TERMINATE, UPDATE], NOW)
    after = done(status, EffectResult(TERMINATE, result), NOW)
    assert [i.key for i in after.intents] == [("update", "pod2")]


def test_a_planned_effect_leaves_its_intent_in_place() -> None:
    status = write_ahead(PoolStatus(), [TERMINATE], NOW)
    assert done(status, EffectResult(TERMINATE, Result.PLANNED), NOW) == status


def test_a_create_is_logged_no_earlier_than_it_happened() -> None:
    assert ceil_second(NOW + dt.timedelta(microseconds=1)) == NOW + dt.timedelta(seconds=1)
    assert ceil_second(NOW) == NOW


# --- settling a stopped loop's creates --------------------------------------------------


def test_a_create_intent_left_by_a_crash_adopts_the_listed_pod_instead_of_creating_again() -> None:
    # Membership adopted the listed pod by the intent's name before settling.
    old = member("old1", phase=Phase.FLAGGED, slot=8081)
    new = member("new1", Phase.WARMING, replacement_for="old1").replace(name=NEW_POD)
    status = PoolStatus(
        members=(old, new),
        intents=(
            create_intent(NEW_POD, at=NOW - dt.timedelta(minutes=1), replacement_for="old1"),
        ),
    )

    settled = settle(status, owned=[pod("old1"), pod("new1", name=NEW_POD)], now=NOW)

    assert settled.status.intents == ()
    assert settled.status.create_log == (
        CreateAttempt(time=NOW, outcome="adopted", name=NEW_POD, replacement_for="old1"),
    )
    replaced = settled.status.member("old1")
    assert replaced is not None
    assert replaced.replaced_by == "new1"
    assert len(settled.notes) == 1
    assert "adopted, and counted as a create" in settled.notes[0]
    assert settled.status.history[-1].outcome == "settled"
    assert settled.unconfirmed == {}


def test_settling_an_adopted_create_keeps_a_replacement_link_the_old_member_already_has() -> None:
    old = member("old1", phase=Phase.FLAGGED, replaced_by="other9")
    new = member("new1", Phase.WARMING).replace(name=NEW_POD)
    status = PoolStatus(
        members=(old, new), intents=(create_intent(NEW_POD, replacement_for="old1"),)
    )
    settled = settle(status, owned=[pod("old1"), pod("new1", name=NEW_POD)], now=NOW)
    replaced = settled.status.member("old1")
    assert replaced is not None
    assert replaced.replaced_by == "other9"


def test_a_written_down_create_not_listed_yet_waits_and_still_counts_toward_the_hour() -> None:
    intent = create_intent(NEW_POD, at=NOW - SETTLE_AFTER + dt.timedelta(seconds=1))
    status = PoolStatus(intents=(intent,))

    settled = settle(status, owned=[], now=NOW)

    assert settled.status == status
    assert settled.notes == []
    assert settled.status.creates_in_last_hour(NOW) == 1


def test_a_written_down_create_whose_pod_never_appeared_counts_as_unknown_after_five_minutes() -> (
    None
):
    at = NOW - SETTLE_AFTER
    status = PoolStatus(intents=(create_intent(NEW_POD, at=at, replacement_for="old1"),))
    assert status.creates_in_last_hour(NOW) == 1

    settled = settle(status, owned=[], now=NOW)

    assert settled.status.intents == ()
    assert settled.status.create_log == (
        CreateAttempt(time=NOW, outcome="unknown", name=NEW_POD, replacement_for="old1"),
    )
    # No sequence of crashes passes the hourly cap: the create still counts, once.
    assert settled.status.creates_in_last_hour(NOW) == 1
    assert "outcome is unknown" in settled.notes[0]


# --- settling a stopped loop's terminates and updates -----------------------------------


def test_a_terminate_whose_pod_is_gone_is_done() -> None:
    status = PoolStatus(intents=(terminate_intent("pod1"),))
    settled = settle(status, owned=[pod("pod2")], now=NOW)
    assert settled.status.intents == ()
    assert settled.unconfirmed == {}


def test_a_terminate_whose_pod_is_still_listed_is_sent_again_by_the_member_machine() -> None:
    status = PoolStatus(members=(member("pod1"),), intents=(terminate_intent("pod1"),))
    settled = settle(status, owned=[pod("pod1")], now=NOW)
    assert settled.unconfirmed == {"pod1": "terminate"}
    # The intent stays until the terminate sent again is folded.
    assert [i.key for i in settled.status.intents] == [("terminate", "pod1")]


def test_an_update_whose_pod_runs_the_image_asked_for_landed() -> None:
    updating = member(
        "pod2",
        phase=Phase.UPDATING,
        update=UpdateProgress(
            from_image=IMAGE, to_image=NEW_IMAGE, step=UpdateStep.RESTART, refused="earlier"
        ),
    )
    status = PoolStatus(members=(updating,), intents=(update_intent("pod2"),))

    settled = settle(status, owned=[pod("pod2", image=NEW_IMAGE)], now=NOW)

    assert settled.status.intents == ()
    assert settled.unconfirmed == {}
    landed = settled.status.member("pod2")
    assert landed is not None
    assert landed.update is not None
    assert landed.update.refused is None
    assert "landed" in settled.notes[0]
    assert settled.status.backoff.update_until is None  # not a rollback


def test_a_rollback_that_landed_starts_the_update_backoff_from_when_it_was_written_down() -> None:
    intent = update_intent("pod2", rollback=True)
    status = PoolStatus(members=(member("pod2"),), intents=(intent,))
    settled = settle(status, owned=[pod("pod2", image=NEW_IMAGE)], now=NOW)
    assert settled.status.backoff.update_until == intent.time + UPDATE_BACKOFF


def test_an_update_whose_pod_still_runs_the_old_image_is_sent_again() -> None:
    status = PoolStatus(members=(member("pod2"),), intents=(update_intent("pod2"),))
    settled = settle(status, owned=[pod("pod2", image=IMAGE)], now=NOW)
    assert settled.unconfirmed == {"pod2": "update"}
    assert settled.notes == []


def test_an_update_whose_pod_is_gone_is_done() -> None:
    status = PoolStatus(intents=(update_intent("pod2"),))
    settled = settle(status, owned=[], now=NOW)
    assert settled.status.intents == ()
    assert settled.unconfirmed == {}


# --- what the rest of decide reads from the ledger --------------------------------------


def test_a_member_whose_replacement_is_written_down_is_covered_and_a_size_create_covers_none() -> (
    None
):
    status = PoolStatus(
        intents=(
            create_intent(f"{PREFIX}a", replacement_for="old1"),
            create_intent(f"{PREFIX}b"),
            terminate_intent("old2"),
        )
    )
    assert pending_replacements(status) == frozenset({"old1"})


def test_every_attempted_create_is_known_by_the_name_it_asked_for() -> None:
    status = PoolStatus(
        create_log=(
            CreateAttempt(time=NOW, outcome="unknown", name=f"{PREFIX}a", replacement_for="x"),
            CreateAttempt(time=NOW, outcome="created"),  # an older log entry without a name
        ),
        intents=(create_intent(f"{PREFIX}b", replacement_for="y"),),
    )
    attempts = attempts_by_name(status)
    assert set(attempts) == {f"{PREFIX}a", f"{PREFIX}b"}
    assert attempts[f"{PREFIX}a"] == ("a create that answered unknown", "x")
    how, replaces = attempts[f"{PREFIX}b"]
    assert how.startswith("a create written down at")
    assert replaces == "y"


def test_a_written_down_create_speaks_for_a_name_the_log_also_holds() -> None:
    # A create logged, then the same name written down again by a later loop: the newer
    # record (the intent) says what the pod is for.
    status = PoolStatus(
        create_log=(CreateAttempt(time=NOW, outcome="unknown", name=NEW_POD),),
        intents=(create_intent(NEW_POD, replacement_for="old1"),),
    )
    assert attempts_by_name(status)[NEW_POD][1] == "old1"
