"""The machines step: every member's machine once, slots offered fairly
(rpp/decide/members.py).

A member RunPod created and does not list yet is not moved (never counted missing); one
whose RunPod answer does not read is held, its probe folded in and nothing else; free
slots go to warming members by age, and each slot to one member only.
"""

from __future__ import annotations

import datetime as dt

from rpp.decide.health.pool_wide import PoolHealth
from rpp.decide.members import drive
from rpp.model.effects import Wire
from rpp.model.members import Phase
from rpp.model.observations import ProbeResult
from tests.decide.builders import (
    NOW,
    loop_state,
    member,
    observation,
    pod,
    pool_spec,
    pool_status,
    wired,
)

PASSED = ProbeResult(
    passed=True, health_ok=True, metrics_ok=True, health_latency_s=0.1, metrics_latency_s=0.1
)
NO_VERDICT = PoolHealth(members={})  # the health rules judged no member this loop


def test_a_member_created_and_not_listed_yet_is_not_counted_missing() -> None:
    created = member("new", Phase.WARMING, unconfirmed_since=NOW)
    loop = loop_state(status=pool_status(created))
    loop.awaiting = frozenset({"new"})

    planned, real = drive(loop, NO_VERDICT, None)

    assert planned == real == [created]
    assert not loop.effects


def test_a_member_whose_answer_does_not_read_is_held_with_its_probe_folded_in() -> None:
    held = wired("odd", 8081, pass_streak=3)
    loop = loop_state(status=pool_status(held), obs=observation(probes={"odd": PASSED}))
    loop.own([pod("odd", unreadable="gpu.count: 'two'")])
    loop.held = frozenset({"odd"})

    planned, real = drive(loop, NO_VERDICT, None)

    (kept,) = planned
    assert kept == real[0]
    assert (kept.phase, kept.slot, kept.pass_streak) == (Phase.READY, 8081, 4)
    assert not loop.effects
    assert not loop.transitions


def test_a_free_slot_goes_to_the_warming_member_that_waited_longest() -> None:
    spec = pool_spec(nginx={"slotPorts": 3}, replicas={"min": 2, "max": 2})
    older = member("old", Phase.WARMING, since=NOW - dt.timedelta(minutes=5), pass_streak=2)
    newer = member("new", Phase.WARMING, since=NOW - dt.timedelta(minutes=2), pass_streak=2)
    status = pool_status(wired("a", 8081), wired("b", 8082), newer, older)
    loop = loop_state(
        spec=spec,
        status=status,
        obs=observation(probes=dict.fromkeys(("a", "b", "old", "new"), PASSED)),
    )
    loop.own([pod(p) for p in ("a", "b", "old", "new")])

    planned, _ = drive(loop, NO_VERDICT, None)

    wires = [e for e in loop.effects if isinstance(e, Wire)]
    assert [(w.pod_id, w.slot) for w in wires] == [("old", 8083)]
    by_id = {m.pod_id: m for m in planned}
    assert (by_id["old"].phase, by_id["old"].slot) == (Phase.READY, 8083)
    assert (by_id["new"].phase, by_id["new"].slot) == (Phase.WARMING, None)
