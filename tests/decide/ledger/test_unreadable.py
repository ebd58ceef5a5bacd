"""Owned pods whose RunPod answer did not read: held, their facts kept, reported
(rpp/decide/ledger/unreadable.py).

Such a pod's facts come from its member record where the answer lacked them, and its
cost counts at least the record's or the pool's estimate, so caps never read a hole as
free; nothing acts on it; UnreadablePods names it and what was odd.
"""

from __future__ import annotations

import dataclasses

from rpp.decide.ledger.unreadable import SHOWN, held, report, with_known_facts
from rpp.decide.state.conditions import Cond
from rpp.model.observations import RunPodPod
from rpp.model.status import PoolStatus
from tests.decide.builders import NOW, member, pod, pool_spec
from tests.decide.ledger.conftest import IMAGE, condition_of, conditions

ODD = "gpu.count: 'two'"


def odd_pod(pod_id: str) -> RunPodPod:
    """What the RunPod client keeps of a pod whose fields did not read: safe defaults."""
    return pod(
        pod_id,
        unreadable=ODD,
        image="",
        datacenter=None,
        gpu_type=None,
        cost_per_hr=0.0,
        created_at=None,
    )


def test_a_pod_that_reads_is_passed_through_unchanged() -> None:
    readable = pod("pod1", cost_per_hr=0.1)
    assert with_known_facts([readable], status=PoolStatus(), spec=pool_spec()) == (readable,)


def test_an_unreadable_members_facts_come_from_its_record() -> None:
    record = member(
        "pod1",
        gpu_type="NVIDIA RTX A6000",
        cost_per_hr=0.79,
        created_at=NOW,
        datacenter="EU-SE-1",
        image=IMAGE,
    )
    (known,) = with_known_facts(
        [odd_pod("pod1")], status=PoolStatus(members=(record,)), spec=pool_spec()
    )

    assert (known.datacenter, known.gpu_type, known.image, known.created_at) == (
        "EU-SE-1",
        "NVIDIA RTX A6000",
        IMAGE,
        NOW,
    )
    assert known.cost_per_hr == 0.79  # the record's price, above the estimate (0.7)
    assert known.unreadable == ODD  # still held


def test_an_unreadable_pod_never_costs_less_than_the_pools_estimate() -> None:
    record = member("pod1", cost_per_hr=0.2)
    (known,) = with_known_facts(
        [odd_pod("pod1")], status=PoolStatus(members=(record,)), spec=pool_spec()
    )
    assert known.cost_per_hr == 0.7


def test_an_unreadable_pod_status_does_not_know_costs_the_estimate_and_has_no_image() -> None:
    (known,) = with_known_facts([odd_pod("pod1")], status=PoolStatus(), spec=pool_spec())
    assert (known.cost_per_hr, known.image, known.datacenter) == (0.7, "", None)


def test_what_an_unreadable_answer_did_say_is_kept_over_the_record() -> None:
    answer = dataclasses.replace(pod("pod1", unreadable=ODD), cost_per_hr=2.5)
    record = member("pod1", cost_per_hr=0.79, datacenter="EU-SE-1")
    (known,) = with_known_facts([answer], status=PoolStatus(members=(record,)), spec=pool_spec())
    assert (known.cost_per_hr, known.datacenter) == (2.5, "EU-RO-1")


def test_only_the_pods_whose_answer_did_not_read_are_held() -> None:
    pods = [pod("pod1"), pod("pod2", unreadable=ODD), pod("pod3")]
    assert held(pods) == frozenset({"pod2"})


def test_unreadable_pods_are_named_with_what_was_odd() -> None:
    conds = conditions()
    report(conds, [pod("pod1"), pod("pod2", unreadable=ODD)])
    found = condition_of(conds, Cond.UNREADABLE_PODS)
    assert found is not None
    status, reason, message = found
    assert (status, reason) == ("True", "OddFields")
    assert "for 1 pool pod(s)" in message
    assert f"pod2 (rpp-web-pod2): {ODD}" in message
    assert "pod1" not in message


def test_many_unreadable_pods_are_named_a_few_and_counted() -> None:
    conds = conditions()
    report(conds, [pod(f"pod{i}", unreadable=ODD) for i in range(SHOWN + 2)])
    found = condition_of(conds, Cond.UNREADABLE_PODS)
    assert found is not None
    assert found[2].count(ODD) == SHOWN
    assert "; and 2 more." in found[2]


def test_unreadable_pods_are_not_mentioned_in_a_pool_that_never_had_one() -> None:
    conds = conditions()
    report(conds, [pod("pod1")])
    assert condition_of(conds, Cond.UNREADABLE_PODS) is None


def test_unreadable_pods_clear_once_every_answer_reads_again() -> None:
    conds = conditions()
    report(conds, [pod("pod1", unreadable=ODD)])
    later = conditions(conds.working.current)
    report(later, [pod("pod1")])
    found = condition_of(later, Cond.UNREADABLE_PODS)
    assert found is not None
    assert found[:2] == ("False", "AllRead")
