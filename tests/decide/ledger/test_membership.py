"""Owned pods status does not know come back as members, never created again
(rpp/decide/ledger/membership.py).

A pod whose name a create attempted keeps that attempt's replacement link, whether the
create was logged or only written down; a pod the slots ConfigMap wires comes back Ready
in its slot unless status gave that slot to another member since; any other owned pod
is adopted Warming.
"""

from __future__ import annotations

from rpp.decide.ledger.membership import find_new_members
from rpp.model.members import Phase
from rpp.model.records import CreateAttempt
from rpp.model.status import PoolStatus
from tests.decide.builders import NOW, PREFIX, member, pod
from tests.decide.ledger.conftest import create_intent

LOST = f"{PREFIX}lost000001"


def test_a_pod_status_already_knows_is_not_found_again() -> None:
    status = PoolStatus(members=(member("pod1", slot=8081),))
    assert find_new_members(status=status, owned=[pod("pod1")], wired={}, now=NOW) == []


def test_a_pod_nobody_asked_for_is_adopted_warming_out_of_nginx() -> None:
    (found,) = find_new_members(status=PoolStatus(), owned=[pod("pod1")], wired={}, now=NOW)
    record = found.record
    assert (record.pod_id, record.phase, record.slot, record.adopted) == (
        "pod1",
        Phase.WARMING,
        None,
        True,
    )
    assert record.since == NOW
    assert found.how == f"adopted pod {PREFIX}pod1 (pod1)"


def test_a_pod_from_a_create_that_answered_5xx_keeps_its_replacement_link() -> None:
    status = PoolStatus(
        create_log=(CreateAttempt(time=NOW, outcome="unknown", name=LOST, replacement_for="old1"),)
    )
    (found,) = find_new_members(status=status, owned=[pod("new1", name=LOST)], wired={}, now=NOW)
    assert found.record.replacement_for == "old1"
    assert not found.record.adopted
    assert found.how == (
        f"found pod {LOST} (new1) from a create that answered unknown, replacing old1"
    )


def test_a_pod_from_a_create_written_down_before_a_crash_keeps_its_replacement_link() -> None:
    status = PoolStatus(intents=(create_intent(LOST, replacement_for="old1"),))
    (found,) = find_new_members(status=status, owned=[pod("new1", name=LOST)], wired={}, now=NOW)
    assert found.record.replacement_for == "old1"
    assert "whose answer was never read" in found.how


def test_a_pod_the_slots_configmap_wires_comes_back_ready_in_its_slot() -> None:
    # A restarted controller with an empty status must not unwire a serving pool.
    found = find_new_members(
        status=PoolStatus(),
        owned=[pod("pod1"), pod("pod2")],
        wired={8082: "pod1", 8081: "pod2"},
        now=NOW,
    )
    assert [(f.record.pod_id, f.record.phase, f.record.slot) for f in found] == [
        ("pod1", Phase.READY, 8082),
        ("pod2", Phase.READY, 8081),
    ]
    assert found[0].how.endswith("already serving in slot 8082")


def test_a_slot_status_gave_to_another_member_since_stays_with_that_member() -> None:
    status = PoolStatus(members=(member("pod9", slot=8081),))
    (found,) = find_new_members(
        status=status, owned=[pod("pod9"), pod("pod1")], wired={8081: "pod1"}, now=NOW
    )
    assert (found.record.pod_id, found.record.phase, found.record.slot) == (
        "pod1",
        Phase.WARMING,
        None,
    )


def test_a_pod_wired_in_two_slots_comes_back_in_the_lowest_and_leaves_the_other_free() -> None:
    found = find_new_members(
        status=PoolStatus(),
        owned=[pod("pod1")],
        wired={8083: "pod1", 8081: "pod1"},
        now=NOW,
    )
    assert [f.record.slot for f in found] == [8081]


def test_an_adopted_record_takes_its_facts_from_the_listing() -> None:
    listing = pod("pod1", datacenter="EU-SE-1", cost_per_hr=1.25, image="img:2")
    (found,) = find_new_members(status=PoolStatus(), owned=[listing], wired={}, now=NOW)
    record = found.record
    assert (record.datacenter, record.cost_per_hr, record.image, record.created_at) == (
        "EU-SE-1",
        1.25,
        "img:2",
        listing.created_at,
    )
