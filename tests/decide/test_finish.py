"""The end of every branch: the summary, the plan, the write-ahead, the Decision
(rpp/decide/finish.py).

Manage stores the status with one intent per RunPod write before act (and says so in
`needs_write_ahead`); DryRun keeps the plan in status and logs `would:` lines; Observe
keeps only the finalizer's effects. A Manage pool gets the finalizer, a pool in another
mode loses it. Ready counts only wired Ready members whose probes do not fail hard.
"""

from __future__ import annotations

from rpp.decide.finish import finish
from rpp.model.effects import (
    AddFinalizer,
    CreatePod,
    RecordEvent,
    RemoveFinalizer,
    TerminatePod,
)
from rpp.model.members import Phase
from rpp.model.observations import PoolObject
from tests.decide.builders import (
    NOW,
    PREFIX,
    loop_state,
    member,
    observation,
    pod,
    pool_spec,
    pool_status,
    wired,
)

CREATE = CreatePod(pool="web", name=f"{PREFIX}new0000001", reason="the pool wants 2")
TERMINATE = TerminatePod(pod_id="a", name=f"{PREFIX}a", reason="flagged")
EVENT = RecordEvent(type="Normal", reason="Why", message="because")


def test_a_managed_loop_stores_its_intents_before_act_and_counts_events_as_no_act() -> None:
    loop = loop_state()
    loop.effects += [CREATE, EVENT]

    decision = finish(loop, generation=3, desired=2)

    assert decision.needs_write_ahead
    assert [i.key for i in decision.status.intents] == [("create", CREATE.name)]
    assert EVENT in decision.effects
    assert EVENT not in decision.acts
    assert CREATE in decision.acts
    assert decision.status.planned_actions == ()
    assert (decision.status.observed_generation, decision.status.desired) == (3, 2)
    assert decision.status.mode == "Manage"


def test_a_managed_loop_with_only_slots_and_events_needs_no_write_ahead() -> None:
    loop = loop_state()
    loop.effects.append(EVENT)
    decision = finish(loop, generation=1, desired=2)
    assert not decision.needs_write_ahead
    assert decision.status.intents == ()


def test_a_dry_run_keeps_the_plan_in_status_and_logs_what_it_would_do() -> None:
    loop = loop_state(spec=pool_spec(dryRun=True), obs=observation(pool=PoolObject()))
    loop.effects += [CREATE, TERMINATE]

    decision = finish(loop, generation=1, desired=2)

    assert not decision.needs_write_ahead
    assert decision.status.intents == ()
    assert [a.action for a in decision.status.planned_actions] == ["create", "terminate"]
    assert decision.status.planned == 2
    assert [n.text for n in decision.log] == [
        "would: " + CREATE.describe(),
        "would: " + TERMINATE.describe(),
    ]


def test_an_observed_pool_carries_out_nothing_but_dropping_the_finalizer() -> None:
    loop = loop_state(spec=pool_spec(templateId=None))  # no template: Observe
    loop.effects += [CREATE, EVENT]

    decision = finish(loop, generation=1, desired=2)

    assert len(decision.effects) == 1
    assert isinstance(decision.effects[0], RemoveFinalizer)
    assert decision.status.planned_actions == ()
    assert decision.status.intents == ()


def test_a_managed_pool_without_the_finalizer_gets_it() -> None:
    loop = loop_state(obs=observation(pool=PoolObject(finalizer=False)))
    decision = finish(loop, generation=1, desired=2)
    (added,) = [e for e in decision.effects if isinstance(e, AddFinalizer)]
    assert "deletionPolicy Delete" in added.reason


def test_a_pool_being_deleted_gets_no_finalizer_bookkeeping_here() -> None:
    loop = loop_state(
        spec=pool_spec(dryRun=True), obs=observation(pool=PoolObject(deleting_since=NOW))
    )
    decision = finish(loop, generation=1, desired=0)
    assert not [e for e in decision.effects if isinstance(e, AddFinalizer | RemoveFinalizer)]


def test_ready_counts_wired_ready_members_whose_probes_do_not_fail_hard() -> None:
    status = pool_status(
        wired("a", 8081),
        wired("b", 8082, hard_failures=2),  # kept in nginx while the controller may be blind
        member("c", Phase.READY),  # quarantined: out of nginx
        member("d", Phase.WARMING),
    )
    decision = finish(loop_state(status=status), generation=1, desired=2)
    assert decision.status.ready == 1


def test_cost_per_hour_is_what_runpod_bills_plus_pods_created_and_not_listed_yet() -> None:
    status = pool_status(member("new", Phase.WARMING, cost_per_hr=0.5, unconfirmed_since=NOW))
    loop = loop_state(status=status)
    loop.own([pod("a", cost_per_hr=0.69), pod("b", cost_per_hr=0.7)])
    decision = finish(loop, generation=1, desired=2)
    assert decision.status.cost_per_hour == 1.89
