"""The working state of one decide call (rpp/decide/state/loop_state.py): the pool's pods
taken once and looked up by id, the explanation lines steps add, the signals of a pool
order, and the transitions a step's phase change leaves in the log, the status history
and the list the reconciler reports (in Manage only: a DryRun plans, it moves nothing)."""

from __future__ import annotations

import pytest

from rpp.decide.state.conditions import Conditions
from rpp.decide.state.loop_state import LoopState, Note, Transition, settings_for
from rpp.decide.state.working_status import WorkingStatus
from rpp.machines import member_step
from rpp.model.effects import TerminatePod
from rpp.model.members import Phase
from rpp.model.observations import ProbeResult
from tests.decide.builders import (
    NOW,
    POOL,
    PROXY_URL,
    flagged,
    loop_state,
    member,
    observation,
    pod,
    pool_spec,
    pool_status,
)

PASSED = ProbeResult(
    passed=True, health_ok=True, metrics_ok=True, health_latency_s=0.1, metrics_latency_s=0.1
)


def test_a_loops_conditions_must_write_to_the_loops_own_status() -> None:
    spec = pool_spec()
    working = WorkingStatus(pool_status())
    elsewhere = Conditions(WorkingStatus(pool_status()), now=NOW, generation=1)
    with pytest.raises(ValueError, match="must write to the loop's WorkingStatus"):
        LoopState(
            POOL,
            spec,
            observation(),
            NOW,
            elsewhere,
            PROXY_URL,
            settings_for(spec),
            status=working,
        )


def test_the_member_machines_durations_come_from_the_spec() -> None:
    spec = pool_spec(health={"warmupTimeout": "10m"}, drain={"period": "45s"})
    settings = settings_for(spec)
    assert settings.warmup_timeout_s == 600.0
    assert settings.update_timeout_s == 600.0  # an update gets a warm-up's time
    assert settings.drain_period_s == 45.0
    assert settings.canary_bake_s == spec.rollout.canary.bake


def test_owned_pods_keep_the_listings_order_and_the_first_of_a_repeated_id_is_found() -> None:
    loop = loop_state()
    first, other, again = pod("a", cost_per_hr=0.5), pod("b"), pod("a", cost_per_hr=0.9)
    loop.own([first, other, again])
    assert loop.owned == (first, other, again)
    assert loop.pod("a") is first
    assert loop.pod("missing") is None
    loop.own([other])  # taken again: the index follows
    assert loop.pod("a") is None


def test_a_note_keeps_its_pod_and_effect_as_fields_not_text(loop: LoopState) -> None:
    loop.note("created", pod="a", effect="CreatePod")
    loop.note("nothing to do")
    assert loop.log == [Note("created", pod="a", effect="CreatePod"), Note("nothing to do")]


def test_plain_signals_carry_the_listing_and_the_probe_only_when_asked() -> None:
    listed = pod("a")
    loop = loop_state(obs=observation(listed, probes={"a": PASSED}))
    loop.own([listed])
    signals = loop.plain("a")
    assert (signals.pod, signals.probe) == (listed, None)
    assert loop.plain("a", probe=True).probe == PASSED
    assert signals.settings == loop.settings


def retire(loop: LoopState, pod_id: str = "w") -> tuple[Phase, Phase]:
    """A pool order: the warming member `pod_id` is not needed and terminates."""
    before = member(pod_id, Phase.WARMING)
    step = member_step.retire(before, signals=loop.plain(pod_id), now=loop.now)
    after = loop.order(before, step)
    return before.phase, after.phase


def test_a_pool_order_in_manage_takes_its_effects_and_notes_its_transition() -> None:
    loop = loop_state()
    assert retire(loop) == (Phase.WARMING, Phase.TERMINATING)
    assert any(isinstance(e, TerminatePod) and e.pod_id == "w" for e in loop.effects)
    (moved,) = loop.transitions
    assert (moved.pod, moved.source, moved.target) == ("w", "Warming", "Terminating")
    # The machine's own words: its Event's message, then what else it does.
    assert moved.reason == (
        "pod w (rpp-web-w) is not needed: the pool shrinks; "
        "terminate pod w (rpp-web-w): pod w (rpp-web-w) is not needed: the pool shrinks"
    )
    (entry,) = loop.status.current.history
    assert (entry.action, entry.outcome, entry.pod, entry.time) == (
        "transition",
        "Warming -> Terminating",
        "w",
        NOW,
    )
    assert loop.log[-1] == Note(f"Warming -> Terminating: {moved.reason}", pod="w")


def test_a_pool_order_in_dry_run_plans_its_effects_and_moves_nothing_in_status() -> None:
    loop = loop_state(spec=pool_spec(dryRun=True))
    retire(loop)
    assert any(isinstance(e, TerminatePod) for e in loop.effects)
    assert loop.transitions == []
    assert loop.status.current.history == ()


def test_a_drain_transition_says_why_it_drains_first(loop: LoopState) -> None:
    before = flagged("f", slot=8081)
    step = member_step.replacement_wired(before, signals=loop.plain("f"), now=NOW)
    loop.transition(before, step)
    assert loop.transitions == [
        Transition(
            "f",
            "Flagged",
            "Draining",
            "draining (replace); unwire pod f from slot 8081: its replacement is wired",
        )
    ]


def test_a_step_that_keeps_its_phase_and_rewires_nothing_is_no_transition(
    loop: LoopState,
) -> None:
    same = member("a", Phase.READY, slot=8081)
    step = member_step.MemberStep(record=same, effects=(), moves=())
    loop.transition(same, step)
    assert loop.transitions == []
    assert loop.log == []
    assert loop.status.current.history == ()
