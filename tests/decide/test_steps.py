"""The size, create, terminate first and shrink steps (rpp/decide/steps.py), through decide.

Shrink takes one pod at a time, a flagged one first, then one not serving yet; a pod
whose RunPod answer does not read is never picked. When a flagged pod's replacement
cannot be created, one that serves nothing is terminated first; one that serves is kept
(ReplacementBlocked names it) or, with health.whenReplacementBlocked TerminateFirst,
drained first. A create the caps block says why in CreateBlocked.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from rpp.decide.pool import Decision, decide
from rpp.decide.state.conditions import Cond
from rpp.model.effects import CreatePod, TerminatePod, Unwire
from rpp.model.members import MemberRecord, Phase
from rpp.model.observations import ProbeResult, RunPodPod
from rpp.model.status import PoolStatus
from tests.decide.builders import (
    NOW,
    POOL,
    flagged,
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


def loop_over(status: PoolStatus, *pods: RunPodPod, **spec: Any) -> Decision:
    """One loop of the pool: every listed pod passes its probe."""
    obs = observation(*pods, probes={p.id: PASSED for p in pods})
    return decide(pool=POOL, generation=1, spec=pool_spec(**spec), status=status, obs=obs, now=NOW)


def terminated(decision: Decision) -> list[str]:
    return [e.pod_id for e in decision.effects if isinstance(e, TerminatePod)]


def condition(decision: Decision, kind: str) -> tuple[str, str, str] | None:
    found = decision.status.condition(kind)
    return None if found is None else (found.status, found.reason, found.message)


def error_rate(pod_id: str, *, slot: int | None) -> MemberRecord:
    """Flagged for its error rate: it still answers its probes."""
    return flagged(
        pod_id,
        slot=slot,
        since=NOW - dt.timedelta(minutes=1),  # its machine lets it wait for a replacement
        flagged_rule="ErrorRate",
        flagged_reason="5xx above 5%",
    )


def test_without_autoscaling_the_pool_aims_for_replicas_min() -> None:
    decision = loop_over(pool_status(wired("a", 8081)), pod("a"), replicas={"min": 3})
    assert decision.status.desired == 3
    assert condition(decision, Cond.AUTOSCALING_METRIC_UNAVAILABLE) is None


def test_a_pool_short_of_its_size_creates_one_pod_per_loop() -> None:
    decision = loop_over(pool_status(), replicas={"min": 3})
    creates = [e for e in decision.effects if isinstance(e, CreatePod)]
    assert len(creates) == 1


def test_a_create_the_pod_cap_blocks_says_what_the_pool_wants_and_why_not() -> None:
    status = pool_status(wired("a", 8081), wired("b", 8082))
    full = loop_over(status, pod("a"), pod("b"), limits={"maxPods": 2})
    # Two pods wanted, two serve: nothing to create, so nothing blocks.
    assert condition(full, Cond.CREATE_BLOCKED) is None

    flagged_one = pool_status(wired("a", 8081), error_rate("c", slot=8082))
    blocked = loop_over(flagged_one, pod("a"), pod("c"), limits={"maxPods": 2})
    assert not any(isinstance(e, CreatePod) for e in blocked.effects)
    found = condition(blocked, Cond.CREATE_BLOCKED)
    assert found is not None
    assert found[:2] == ("True", "MaxPodsReached")
    assert found[2].startswith("the pool wants a pod (")


def test_shrinking_takes_a_flagged_pod_first_and_does_not_replace_it() -> None:
    status = pool_status(wired("a", 8081), wired("b", 8082), error_rate("c", slot=None))
    decision = loop_over(status, pod("a"), pod("b"), pod("c"))
    assert terminated(decision) == ["c"]
    assert not any(isinstance(e, CreatePod) for e in decision.effects)


def test_shrinking_takes_a_pod_not_serving_yet_before_a_wired_one() -> None:
    status = pool_status(wired("a", 8081), wired("b", 8082), member("w", Phase.WARMING))
    decision = loop_over(status, pod("a"), pod("b"), pod("w"))
    assert terminated(decision) == ["w"]


def test_shrinking_never_picks_a_pod_whose_runpod_answer_does_not_read() -> None:
    status = pool_status(wired("a", 8081), wired("b", 8082), member("w", Phase.WARMING))
    decision = loop_over(status, pod("a"), pod("b"), pod("w", unreadable="gpu.count: 'two'"))
    assert terminated(decision) == []
    assert any("scale-down waits" in n.text for n in decision.log)


def test_a_flagged_pod_serving_nothing_goes_first_when_its_replacement_is_blocked() -> None:
    status = pool_status(wired("a", 8081), error_rate("c", slot=None))
    decision = loop_over(status, pod("a"), pod("c"), limits={"maxPods": 2})
    (terminate,) = [e for e in decision.effects if isinstance(e, TerminatePod)]
    assert terminate.pod_id == "c"
    assert "MaxPodsReached" in terminate.reason
    assert not any(isinstance(e, CreatePod) for e in decision.effects)


def test_a_flagged_pod_that_serves_is_kept_and_replacement_blocked_names_it() -> None:
    status = pool_status(wired("a", 8081), error_rate("c", slot=8082))
    decision = loop_over(status, pod("a"), pod("c"), limits={"maxPods": 2})
    assert terminated(decision) == []
    assert not any(isinstance(e, Unwire) for e in decision.effects)
    found = condition(decision, Cond.REPLACEMENT_BLOCKED)
    assert found is not None
    assert found[:2] == ("True", "MaxPodsReached")
    assert "pod c (rpp-web-c, flagged for ErrorRate) serves on" in found[2]
    assert "Raise limits.maxPods" in found[2]


def test_terminate_first_drains_a_flagged_pod_that_serves_when_its_replacement_is_blocked() -> (
    None
):
    status = pool_status(wired("a", 8081), error_rate("c", slot=8082))
    decision = loop_over(
        status,
        pod("a"),
        pod("c"),
        limits={"maxPods": 2},
        health={"whenReplacementBlocked": "TerminateFirst"},
    )
    assert [e.pod_id for e in decision.effects if isinstance(e, Unwire)] == ["c"]
    drained = decision.status.member("c")
    assert drained is not None
    assert drained.phase == Phase.DRAINING
    found = condition(decision, Cond.REPLACEMENT_BLOCKED)
    assert found is None or found[0] == "False"
