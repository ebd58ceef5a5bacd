"""The `judge` step (rpp/decide/health/judgement.py): this loop's probes, Prometheus
values and RunPod notices fed to the rules the spec switches on, and the conditions
about what they could not see or found pool-wide."""

from __future__ import annotations

import datetime as dt
from typing import Any

from rpp.decide.health import judgement
from rpp.decide.health.pool_wide import PoolHealth
from rpp.decide.state.conditions import Cond
from rpp.model.members import Phase
from rpp.model.observations import (
    PodMetrics,
    PodStatus,
    PoolObservation,
    PrometheusReading,
)
from rpp.model.status import Condition, PoolStatus
from tests.decide import builders
from tests.decide.health.pod_observations import NOTICE, probe

LATENCY_Q = "avg_latency{job='$job'}"
ERRORS_Q = "error_ratio{job='$job'}"
RATE_Q = "request_rate{job='$job'}"
UNREACHABLE_PROMETHEUS = "latencyQuery: connection refused; RelativeLatency is off this loop"
NO_SERIES = "latencyQuery: the query returned no series; RelativeLatency is off this loop"


def run(
    *,
    status: PoolStatus,
    obs: PoolObservation,
    now: dt.datetime = builders.NOW,
    **spec_changes: Any,
) -> tuple[PoolHealth, PoolStatus]:
    """One `judge` step of the default pool (with `spec_changes`): its verdict and the
    status with the conditions it set."""
    loop = builders.loop_state(
        spec=builders.pool_spec(**spec_changes), status=status, obs=obs, now=now
    )
    health = judgement.judge(spec=loop.spec, status=status, obs=obs, now=now, conds=loop.conds)
    return health, loop.status.current


def prometheus(**queries: str) -> dict[str, Any]:
    return {"prometheus": {"job": "web-pods", **queries}}


def condition(status: PoolStatus, cond: Cond) -> Condition:
    found = status.condition(cond.value)
    assert found is not None, f"no {cond.value} condition"
    return found


def reading(*problems: str, no_data: frozenset[str] = frozenset()) -> PrometheusReading:
    return PrometheusReading(problems=problems, no_data=no_data)


def test_a_query_that_could_not_be_asked_names_the_rules_that_are_off() -> None:
    _, status = run(
        status=builders.pool_status(builders.wired("a", 8081)),
        obs=builders.observation(prometheus=reading(UNREACHABLE_PROMETHEUS)),
        **prometheus(latencyQuery=LATENCY_Q, errorRatioQuery=ERRORS_Q, requestRateQuery=RATE_Q),
    )
    unavailable = condition(status, Cond.PROMETHEUS_UNAVAILABLE)
    assert unavailable.status == "True"
    assert unavailable.reason == "QueryFailed"
    assert unavailable.message == (
        f"{UNREACHABLE_PROMETHEUS}; the rules that need latencyQuery (RelativeLatency), "
        "errorRatioQuery (ErrorRate), requestRateQuery (the canary's request count) "
        "are off this loop"
    )


def test_only_the_queries_the_pool_sets_are_named() -> None:
    _, status = run(
        status=builders.pool_status(builders.wired("a", 8081)),
        obs=builders.observation(prometheus=reading(UNREACHABLE_PROMETHEUS)),
        **prometheus(errorRatioQuery=ERRORS_Q),
    )
    message = condition(status, Cond.PROMETHEUS_UNAVAILABLE).message
    assert message.endswith("the rules that need errorRatioQuery (ErrorRate) are off this loop")


def test_an_empty_answer_while_pods_serve_is_no_data() -> None:
    _, status = run(
        status=builders.pool_status(builders.wired("a", 8081), builders.member("b")),
        obs=builders.observation(
            prometheus=reading(NO_SERIES, no_data=frozenset({"latencyQuery"}))
        ),
        **prometheus(latencyQuery=LATENCY_Q),
    )
    unavailable = condition(status, Cond.PROMETHEUS_UNAVAILABLE)
    assert unavailable.status == "True"
    assert unavailable.reason == "NoData"
    assert unavailable.message.startswith(
        "Prometheus answered, but latencyQuery: the query returned no series, while "
        "1 pod(s) serve in nginx (a)"
    )


def test_an_empty_answer_before_any_pod_serves_clears_the_condition() -> None:
    raised = builders.pool_status(builders.member("a")).with_condition(
        type=Cond.PROMETHEUS_UNAVAILABLE.value,
        status="True",
        reason="QueryFailed",
        message="earlier",
        now=builders.NOW - builders.HOUR,
    )
    _, status = run(
        status=raised,
        obs=builders.observation(
            prometheus=reading(NO_SERIES, no_data=frozenset({"latencyQuery"}))
        ),
        **prometheus(latencyQuery=LATENCY_Q),
    )
    unavailable = condition(status, Cond.PROMETHEUS_UNAVAILABLE)
    assert (unavailable.status, unavailable.reason) == ("False", "NothingServes")


def test_a_pool_without_prometheus_queries_raises_nothing_about_prometheus() -> None:
    _, status = run(
        status=builders.pool_status(builders.wired("a", 8081)),
        obs=builders.observation(prometheus=reading(UNREACHABLE_PROMETHEUS)),
    )
    assert status.condition(Cond.PROMETHEUS_UNAVAILABLE.value) is None


def test_the_autoscaler_s_query_is_left_to_its_own_condition() -> None:
    _, status = run(
        status=builders.pool_status(builders.wired("a", 8081)),
        obs=builders.observation(
            prometheus=reading("autoscaling.query: Prometheus is unreachable; autoscaling ...")
        ),
        **prometheus(latencyQuery=LATENCY_Q),
    )
    assert status.condition(Cond.PROMETHEUS_UNAVAILABLE.value) is None


def test_only_ready_and_flagged_pods_are_judged_with_this_loop_s_values() -> None:
    failing = probe(passed=False)
    health, _ = run(
        status=builders.pool_status(
            builders.wired("a", 8081),
            builders.flagged("b"),
            builders.member("c", Phase.WARMING),
        ),
        obs=builders.observation(
            builders.pod("a"),
            builders.pod("b"),
            builders.pod("c"),
            probes={"a": probe(), "b": failing, "c": failing},
            prometheus=PrometheusReading(per_pod={"a": PodMetrics(error_ratio=0.5)}),
        ),
    )
    assert set(health.members) == {"a", "b"}
    assert set(health.members["a"].breaches) == {"ErrorRate"}
    assert set(health.members["b"].breaches) == {"Unreachable"}


def test_the_spec_s_replace_when_decides_which_rules_judge() -> None:
    noticed = builders.observation(builders.pod("a"), probes={"a": probe()}, notices={"a": NOTICE})
    status = builders.pool_status(builders.wired("a", 8081))
    reported, reported_status = run(status=status, obs=noticed)
    assert not reported.members["a"].degraded
    assert "set health.replaceWhen.hostNotice: true" in (
        condition(reported_status, Cond.HOST_NOTICE).message
    )
    replaced, replaced_status = run(
        status=status, obs=noticed, health={"replaceWhen": {"hostNotice": True}}
    )
    assert replaced.members["a"].flagged == ("HostNotice",)
    assert "they are replaced" in condition(replaced_status, Cond.HOST_NOTICE).message


def test_ready_pods_failing_together_hold_replacement_and_the_end_of_the_hold_is_one_event() -> (
    None
):
    since = builders.NOW - dt.timedelta(minutes=31)
    down = {"Unreachable": since}
    status = builders.pool_status(
        builders.wired("a", 8081, breaches=down), builders.wired("b", 8082, breaches=down)
    )
    obs = builders.observation(
        builders.pod("a"),
        builders.pod("b"),
        probes={"a": probe(passed=False), "b": probe(passed=False)},
    )
    held, held_status = run(status=status, obs=obs, now=since + dt.timedelta(minutes=1))
    assert held.blocks_replacement
    wide = condition(held_status, Cond.POOL_WIDE)
    assert (wide.status, wide.reason) == ("True", "Unreachable")
    assert judgement.hold_expired_event(status, held) is None

    expired, expired_status = run(status=status, obs=obs)
    assert expired.released == "a"
    assert condition(expired_status, Cond.POOL_WIDE).reason == judgement.HOLD_EXPIRED
    event = judgement.hold_expired_event(status, expired)
    assert event is not None
    assert (event.reason, event.pod_id) == ("PoolWideHoldExpired", "a")
    # Said once: the loop after already carries HoldExpired.
    assert judgement.hold_expired_event(expired_status, expired) is None


def test_a_pod_runpod_reports_exited_or_no_longer_lists_is_not_a_shared_cause() -> None:
    down = {"Unreachable": builders.NOW}
    status = builders.pool_status(
        builders.wired("a", 8081, breaches=down), builders.wired("b", 8082, breaches=down)
    )
    probes = {"a": probe(passed=False), "b": probe(passed=False)}
    together = builders.observation(builders.pod("a"), builders.pod("b"), probes=probes)
    assert run(status=status, obs=together)[0].pool_wide
    exited = builders.observation(
        builders.pod("a"), builders.pod("b", status=PodStatus.EXITED), probes=probes
    )
    assert not run(status=status, obs=exited)[0].pool_wide
    unlisted = builders.observation(builders.pod("a"), probes=probes)
    assert not run(status=status, obs=unlisted)[0].pool_wide
