"""Surge-first replacement (rpp/decide/capacity/surge_first.py), its three moments one by
one: ask (which flagged member gets the loop's create), link (the created pod joins
paired with the member it replaces) and drain (a flagged member leaves only once its
replacement is Ready and wired)."""

from __future__ import annotations

from rpp.decide.capacity import surge_first
from rpp.model.effects import CreatePod, Unwire
from rpp.model.members import DrainReason, Phase
from tests.decide.builders import (
    DATACENTERS,
    GPU,
    HOUR,
    NOW,
    POOL,
    PREFIX,
    flagged,
    loop_state,
    member,
    observation,
    pod,
    pool_spec,
    pool_status,
    wired,
)


def create(name: str, *, replacement_for: str | None) -> CreatePod:
    return CreatePod(
        pool=POOL,
        name=name,
        reason="why",
        replacement_for=replacement_for,
        gpu_types=(GPU,),
        datacenters=DATACENTERS,
    )


# --- moment 1: ask -------------------------------------------------------------------------


def test_a_member_is_being_replaced_by_a_live_member_or_a_create_written_down() -> None:
    members = [
        member("w", Phase.WARMING, replacement_for="f1"),
        member("g", Phase.GONE, replacement_for="f2"),  # its replacement died: need open
        member("r", Phase.READY),
    ]
    assert surge_first.being_replaced(members) == frozenset({"f1"})
    assert surge_first.being_replaced(members, covered=["f3"]) == frozenset({"f1", "f3"})


def test_the_oldest_flag_is_replaced_first() -> None:
    newer = flagged("a", since=NOW - HOUR)
    older = flagged("b", since=NOW - 2 * HOUR)
    assert surge_first.next_to_replace([wired("r", 8081), newer, older], pool_wide=False) == older


def test_a_flagged_member_with_a_replacement_on_its_way_is_not_asked_for_again() -> None:
    older = flagged("b", since=NOW - 2 * HOUR)
    newer = flagged("a", since=NOW - HOUR)
    replacing = member("w", Phase.WARMING, replacement_for="b")
    chosen = surge_first.next_to_replace([older, newer, replacing], pool_wide=False)
    assert chosen == newer
    written = surge_first.next_to_replace(
        [older, newer], pool_wide=False, covered=frozenset({"a", "b"})
    )
    assert written is None


def test_no_replacement_is_asked_for_while_pool_wide_degradation_holds() -> None:
    assert surge_first.next_to_replace([flagged("f")], pool_wide=True) is None
    assert surge_first.next_to_replace([flagged("f")], pool_wide=False) is not None


# --- moment 2: link --------------------------------------------------------------------------


def test_a_created_replacement_joins_warming_and_paired_and_waits_for_its_listing() -> None:
    status = pool_status(wired("r", 8081), flagged("f", slot=8082))
    made = pod("n", created_at=NOW)
    after = surge_first.link_created(
        status, effect=create(made.name, replacement_for="f"), pod=made, now=NOW
    )
    new = after.member("n")
    assert new is not None
    assert (new.phase, new.since, new.unconfirmed_since) == (Phase.WARMING, NOW, NOW)
    assert new.replacement_for == "f"
    assert (new.name, new.cost_per_hr, new.datacenter) == (f"{PREFIX}n", 0.69, DATACENTERS[0])
    old = after.member("f")
    assert old is not None
    assert old.replaced_by == "n"
    assert old.phase == Phase.FLAGGED  # it keeps serving until its replacement is wired


def test_a_create_for_the_pools_size_pairs_nobody() -> None:
    status = pool_status(flagged("f", slot=8082))
    made = pod("n", created_at=NOW)
    after = surge_first.link_created(
        status, effect=create(made.name, replacement_for=None), pod=made, now=NOW
    )
    assert [m.pod_id for m in after.members] == ["f", "n"]
    assert after.member("f") == status.member("f")
    new = after.member("n")
    assert new is not None
    assert new.replacement_for is None


# --- moment 3: drain -------------------------------------------------------------------------


def test_a_flagged_member_drains_once_its_replacement_is_ready_and_wired() -> None:
    old = flagged("f", slot=8081)
    repl = wired("n", 8082, replacement_for="f")
    loop = loop_state(obs=observation(pod("f"), pod("n")))
    loop.own(loop.obs.pods or ())
    planned = [old, repl]
    surge_first.drain_replaced(loop, planned)
    drained = planned[0]
    assert (drained.phase, drained.drain_reason) == (Phase.DRAINING, DrainReason.REPLACE)
    assert drained.replaced_by == "n"
    assert drained.slot is None
    assert planned[1] == repl
    assert Unwire(pod_id="f", slot=8081, reason="its replacement is wired") in loop.effects
    assert [(t.pod, t.source, t.target) for t in loop.transitions] == [
        ("f", "Flagged", "Draining")
    ]


def test_a_flagged_member_keeps_serving_while_its_replacement_is_not_wired_yet() -> None:
    old = flagged("f", slot=8081)
    loop = loop_state()
    for not_yet in (
        member("n", Phase.WARMING, replacement_for="f"),
        member("n", Phase.READY, replacement_for="f"),  # Ready, out of nginx
    ):
        planned = [old, not_yet]
        surge_first.drain_replaced(loop, planned)
        assert planned == [old, not_yet]
    assert loop.effects == []


def test_a_flagged_member_whose_pod_runpod_did_not_read_is_held_in_place() -> None:
    old = flagged("f", slot=8081)
    planned = [old, wired("n", 8082, replacement_for="f")]
    loop = loop_state()
    loop.held = frozenset({"f"})
    surge_first.drain_replaced(loop, planned)
    assert planned[0] == old
    assert loop.effects == []


def test_a_drain_ordered_in_dry_run_plans_its_effects_but_moves_no_phase_in_status() -> None:
    planned = [flagged("f", slot=8081), wired("n", 8082, replacement_for="f")]
    loop = loop_state(spec=pool_spec(dryRun=True))
    surge_first.drain_replaced(loop, planned)
    assert any(isinstance(e, Unwire) for e in loop.effects)
    assert loop.transitions == []
