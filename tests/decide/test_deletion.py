"""A pool being deleted (rpp/decide/deletion.py), one loop at a time through decide.

Delete (the default, in Manage): a serving member drains first, one serving nothing is
terminated at once, an owned pod status does not know is terminated too, and once RunPod
lists none of the pool's pods the finalizer goes. Retain, or a pool not in Manage: no
pod is touched, an Event names them, the finalizer goes at once. DeletionBlocked says
what is left, or why the deletion cannot progress.
"""

from __future__ import annotations

import datetime as dt

from rpp.decide.deletion import SHOWN
from rpp.decide.pool import Decision, decide
from rpp.decide.state.conditions import Cond
from rpp.model.effects import RecordEvent, RemoveFinalizer, TerminatePod, Unwire
from rpp.model.members import DrainReason, Phase
from rpp.model.observations import PoolObject, PoolObservation, RunPodPod
from rpp.model.records import HistoryEntry
from rpp.model.spec import RunPodPoolSpec
from rpp.model.status import PoolStatus
from tests.decide.builders import (
    NOW,
    POOL,
    member,
    observation,
    pod,
    pool_spec,
    pool_status,
    wired,
)

DELETED = PoolObject(deleting_since=NOW - dt.timedelta(minutes=1), finalizer=True)


def deleting(
    status: PoolStatus,
    *pods: RunPodPod,
    spec: RunPodPoolSpec | None = None,
    listing_down: bool = False,
) -> Decision:
    obs = (
        PoolObservation(pods=None, runpod_error="503", pool=DELETED)
        if listing_down
        else observation(*pods, pool=DELETED)
    )
    return decide(
        pool=POOL, generation=2, spec=spec or pool_spec(), status=status, obs=obs, now=NOW
    )


def condition(decision: Decision, kind: str) -> tuple[str, str, str]:
    found = decision.status.condition(kind)
    assert found is not None, kind
    return found.status, found.reason, found.message


def events(decision: Decision) -> dict[str, str]:
    return {e.reason: e.message for e in decision.effects if isinstance(e, RecordEvent)}


def test_a_serving_member_leaves_nginx_and_drains_before_it_is_terminated() -> None:
    decision = deleting(pool_status(wired("a", 8081)), pod("a"))

    a = decision.status.member("a")
    assert a is not None
    assert (a.phase, a.drain_reason, a.slot) == (Phase.DRAINING, DrainReason.POOL_DELETED, None)
    assert any(isinstance(e, Unwire) and e.pod_id == "a" for e in decision.effects)
    assert not any(isinstance(e, TerminatePod) for e in decision.effects)
    assert "1 pod(s) are drained and terminated before it goes" in events(decision)["PoolDeleting"]
    status, reason, message = condition(decision, Cond.DELETION_BLOCKED)
    assert (status, reason) == ("False", "TerminatingPods")
    assert "a (Draining)" in message


def test_a_member_that_serves_nothing_is_terminated_at_once() -> None:
    decision = deleting(pool_status(member("w", Phase.WARMING)), pod("w"))
    assert [e.pod_id for e in decision.effects if isinstance(e, TerminatePod)] == ["w"]


def test_an_owned_pod_status_does_not_know_is_terminated_with_the_pool() -> None:
    decision = deleting(pool_status(), pod("stray"))
    assert [e.pod_id for e in decision.effects if isinstance(e, TerminatePod)] == ["stray"]
    assert "stray" in events(decision)["PoolDeleting"]


def test_once_runpod_lists_none_of_the_pools_pods_the_finalizer_goes() -> None:
    decision = deleting(pool_status(member("gone", Phase.TERMINATING, missing_loops=1)))
    assert "PoolDeleted" in events(decision)
    assert any(isinstance(e, RemoveFinalizer) for e in decision.effects)
    assert decision.status.members == ()


def test_the_deletion_waits_while_runpods_pod_list_cannot_be_read() -> None:
    decision = deleting(pool_status(wired("a", 8081)), listing_down=True)
    status, reason, message = condition(decision, Cond.DELETION_BLOCKED)
    assert (status, reason) == ("True", "RunPodUnavailable")
    assert "(503)" in message
    assert not any(isinstance(e, TerminatePod | RemoveFinalizer) for e in decision.effects)


def test_a_terminate_runpod_refused_blocks_the_deletion_with_runpods_words() -> None:
    since = NOW - dt.timedelta(minutes=1)
    status = pool_status(
        member("a", Phase.TERMINATING, terminate_requested_at=since),
        history=(
            HistoryEntry(
                time=since, action="terminate", pod="a", outcome="refused", detail="read-only key"
            ),
        ),
    )
    decision = deleting(status, pod("a"))
    flag, reason, message = condition(decision, Cond.DELETION_BLOCKED)
    assert (flag, reason) == ("True", "TerminateFailed")
    assert "RunPod did not terminate pod a: read-only key" in message


def test_retain_names_the_pods_left_running_and_lets_the_pool_go() -> None:
    decision = deleting(
        pool_status(wired("a", 8081)),
        pod("a"),
        pod("stray"),
        spec=pool_spec(deletionPolicy="Retain"),
    )
    message = events(decision)["PodsRetained"]
    assert "its 2 pod(s) keep running" in message
    assert "a (rpp-web-a)" in message
    assert "stray (rpp-web-stray)" in message
    assert any(isinstance(e, RemoveFinalizer) for e in decision.effects)
    assert not any(isinstance(e, TerminatePod | Unwire) for e in decision.effects)


def test_a_dry_run_pool_deleted_warns_that_its_pods_keep_billing() -> None:
    decision = deleting(pool_status(wired("a", 8081)), pod("a"), spec=pool_spec(dryRun=True))
    (event,) = [e for e in decision.effects if isinstance(e, RecordEvent)]
    assert (event.type, event.reason) == ("Warning", "PodsLeftRunning")
    assert "in DryRun, a mode that never changes RunPod" in event.message


def test_many_pods_are_named_a_few_and_the_rest_counted() -> None:
    pods = [pod(f"p{i:02d}") for i in range(SHOWN + 3)]
    decision = deleting(pool_status(), *pods, spec=pool_spec(deletionPolicy="Retain"))
    message = events(decision)["PodsRetained"]
    assert "and 3 more" in message
    assert "p09" in message
    assert "p10" not in message
