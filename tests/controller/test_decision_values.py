"""Decide hands the controller its decisions as values; the controller works none out.

Whether a loop's status must be stored ahead of acting (`Decision.needs_write_ahead`),
which effects count as acts (`Decision.acts`: a loop that carried one out is not decided
again on a re-read pool), and what an invalid pool's status says
(rpp/decide/invalid_spec.py) are decide's answers, read off the decision by
rpp/controller/reconcile.py and rpp/controller/pool_specs.py.
"""

from __future__ import annotations

import datetime as dt

from rpp.decide.invalid_spec import decide_invalid
from rpp.decide.pool import Decision, decide
from rpp.decide.state.conditions import READY, Cond
from rpp.model.effects import CreatePod, RecordEvent
from rpp.model.observations import PoolObject, PoolObservation, SecretState
from rpp.model.spec_load import load_pool
from rpp.model.status import PoolStatus
from tests.stories.world_kit import pool_manifest

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
POOL = "inference"


def first_loop(*, dry_run: bool, status: PoolStatus | None = None) -> Decision:
    """A new pool of two and no pods yet: the loop creates one."""
    pool, problems = load_pool(pool_manifest(dryRun=dry_run, replicas={"min": 2, "max": 2}))
    assert pool is not None, problems
    obs = PoolObservation(
        pods=(),
        secret=SecretState(configured=True),
        pool=PoolObject(finalizer=True),
    )
    return decide(
        pool=POOL, generation=1, spec=pool.spec, status=status or PoolStatus(), obs=obs, now=NOW
    )


def condition(status: PoolStatus, kind: str) -> tuple[str, str, str]:
    (found,) = [c for c in status.conditions if c.type == kind]
    return found.status, found.reason, found.message


def test_a_managed_create_needs_its_intents_stored_before_act() -> None:
    decision = first_loop(dry_run=False)
    assert any(isinstance(e, CreatePod) for e in decision.effects)
    assert decision.needs_write_ahead
    assert decision.status.intents  # what is stored ahead is the decided status


def test_a_planned_create_needs_no_write_ahead() -> None:
    decision = first_loop(dry_run=True)
    assert any(isinstance(e, CreatePod) for e in decision.effects)
    assert not decision.needs_write_ahead


def test_events_are_not_acts_and_every_other_effect_is() -> None:
    # The spec was invalid the loop before: its fix is an Event beside the create.
    fixed = decide_invalid(
        status=PoolStatus(),
        problems=["spec.image: empty"],
        reason="ValidationFailed",
        generation=1,
        deleting=False,
        now=NOW - dt.timedelta(minutes=1),
    )
    decision = first_loop(dry_run=False, status=fixed.status)
    assert any(isinstance(e, RecordEvent) for e in decision.effects)
    assert decision.acts == tuple(e for e in decision.effects if not isinstance(e, RecordEvent))
    assert any(isinstance(e, CreatePod) for e in decision.acts)


def test_an_invalid_spec_is_decided_with_every_problem_and_not_ready() -> None:
    decided = decide_invalid(
        status=PoolStatus(),
        problems=["spec.replicas.min: must be at least 0", "spec.image: empty"],
        reason="ValidationFailed",
        generation=3,
        deleting=False,
        now=NOW,
    )
    invalid, reason, message = condition(decided.status, Cond.INVALID_SPEC)
    assert (invalid, reason) == ("True", "ValidationFailed")
    assert "2 problem(s)" in message
    assert "spec.image: empty" in message
    assert condition(decided.status, READY)[0] == "False"
    assert decided.status.observed_generation == 3
    assert [(e.type, e.reason) for e in decided.events] == [("Warning", Cond.INVALID_SPEC)]


def test_an_invalid_pool_being_deleted_is_told_how_its_pods_wait() -> None:
    decided = decide_invalid(
        status=PoolStatus(),
        problems=["spec.image: empty"],
        reason="ValidationFailed",
        generation=1,
        deleting=True,
        now=NOW,
    )
    message = condition(decided.status, Cond.INVALID_SPEC)[2]
    assert message.startswith("the pool is being deleted")
    assert "remove the finalizer" in message
