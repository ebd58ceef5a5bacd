"""When the status is rebuilt from ground truth, and what the rebuild says
(rpp/decide/ledger/rebuild.py).

An unreadable status is always rebuilt; an empty one only while the slots ConfigMap
wires pods (a new pool's never does). The loop that rebuilds says so in an Event
(StatusRebuilt) and a history entry, counting the pods adopted and those serving.
The whole loop is exercised end to end in test_rebuild_decision.py.
"""

from __future__ import annotations

from rpp.decide.ledger.rebuild import announce, needed
from rpp.decide.state.conditions import Conditions
from rpp.decide.state.loop_state import LoopState, settings_for
from rpp.decide.state.working_status import WorkingStatus
from rpp.model.effects import RecordEvent
from rpp.model.members import Phase
from rpp.model.observations import PoolObservation
from rpp.model.proxy_hosts import DEFAULT_URL_PATTERN
from rpp.model.status import PoolStatus
from tests.decide.builders import NOW, member, pool_spec


def test_an_unreadable_status_is_rebuilt_for_the_reason_the_reconciler_gives() -> None:
    why = "status.members[0].podId: required"
    assert needed(status=PoolStatus(), unreadable=why, wired={}) == why


def test_an_empty_status_while_nginx_serves_pods_is_rebuilt_naming_them() -> None:
    why = needed(status=PoolStatus(), unreadable=None, wired={8082: "pod2", 8081: "pod1"})
    assert why is not None
    assert "the stored status is empty while the slots ConfigMap wires pod1, pod2" in why


def test_a_status_empty_but_for_its_observed_generation_is_still_empty() -> None:
    # What the API server reads back for a status the CRD defaults.
    defaulted = PoolStatus(observed_generation=0)
    assert needed(status=defaulted, unreadable=None, wired={8081: "pod1"}) is not None


def test_an_empty_status_with_nothing_wired_is_a_new_pool_not_a_lost_one() -> None:
    assert needed(status=PoolStatus(), unreadable=None, wired={}) is None


def test_a_status_that_knows_its_members_is_not_rebuilt() -> None:
    known = PoolStatus(members=(member("pod1", slot=8081),))
    assert needed(status=known, unreadable=None, wired={8081: "pod1"}) is None


def test_the_rebuild_is_announced_with_the_pods_adopted_and_those_serving() -> None:
    spec = pool_spec()
    rebuilt = PoolStatus(
        members=(
            member("pod1", slot=8081),
            member("pod2", slot=8082),
            member("pod3", phase=Phase.WARMING),
        )
    )
    working = WorkingStatus(rebuilt)
    loop = LoopState(
        pool="web",
        spec=spec,
        obs=PoolObservation(pods=()),
        now=NOW,
        conds=Conditions(working, now=NOW, generation=1),
        proxy_url=DEFAULT_URL_PATTERN,
        settings=settings_for(spec),
        status=working,
    )

    announce(loop, "a backup restored without status")

    (event,) = loop.effects
    assert isinstance(event, RecordEvent)
    assert (event.type, event.reason) == ("Warning", "StatusRebuilt")
    assert "a backup restored without status" in event.message
    assert "3 pod(s) of the pool listed by RunPod adopted, 2 serving" in event.message
    entry = loop.status.current.history[-1]
    assert (entry.action, entry.outcome, entry.time) == ("rebuild", "ok", NOW)
    assert entry.detail.startswith("status rebuilt from ground truth: a backup restored")
    assert [n.text for n in loop.log] == [event.message]
