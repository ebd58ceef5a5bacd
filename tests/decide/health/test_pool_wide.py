"""Judging the rules over time and across the pool (rpp/decide/health/pool_wide.py):
breach starts, durations, flapping, missing data, and PoolWideDegradation."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rpp.decide.health.pool_wide import PoolHealth, judge_member, judge_pool
from rpp.decide.health.registry import Rule, active_rules
from rpp.decide.health.rule import (
    ActiveRule,
    MemberObservation,
)
from rpp.model import spec
from rpp.model.observations import HostNotice, PodMetrics
from tests.decide.health.pod_observations import NOTICE, PEERS, T0, Judge, at, seen

DEFAULT = spec.ReplaceWhen()
REPLACING = spec.ReplaceWhen(host_notice=True)


@dataclass(frozen=True)
class Case:
    """One rule with an observation that breaches it, one that passes, one with no data."""

    rule: Rule
    breach: MemberObservation
    ok: MemberObservation
    missing: MemberObservation
    duration_s: float
    replace_when: spec.ReplaceWhen = DEFAULT


CASES = [
    Case(
        Rule.UNREACHABLE,
        seen(passed=False),
        seen(),
        MemberObservation(metrics=PodMetrics(0.1, 0.0), notice=HostNotice()),
        120,
    ),
    Case(Rule.SLOW_SCRAPE, seen(scrape_s=2.5), seen(scrape_s=1.0), seen(scrape_s=None), 600),
    Case(
        Rule.RELATIVE_LATENCY,
        seen(latency_s=1.5),
        seen(latency_s=0.3),
        seen(latency_s=None),
        600,
    ),
    Case(
        Rule.ERROR_RATE,
        seen(error_ratio=0.2),
        seen(error_ratio=0.0),
        seen(error_ratio=None),
        300,
    ),
    Case(
        Rule.HOST_NOTICE,
        seen(notice=NOTICE),
        seen(notice=HostNotice()),
        seen(notice=None),
        0,
        REPLACING,
    ),
]
every_rule = pytest.mark.parametrize("case", CASES, ids=[c.rule.value for c in CASES])


@every_rule
def test_first_breach_starts_the_clock_and_flags_only_at_the_full_duration(
    case: Case, judge: Judge
) -> None:
    first = judge(case.breach, replace_when=case.replace_when)
    assert first.breaches == {case.rule: T0}
    assert first.degraded
    assert (case.rule in first.flagged) == (case.duration_s == 0)
    for offset, flagged in ((-0.001, False), (0.0, True), (0.001, True)):
        if case.duration_s + offset < 0:
            continue
        later = judge(
            case.breach,
            now=at(case.duration_s + offset),
            breaches=first.breaches,
            replace_when=case.replace_when,
        )
        assert later.breaches == {case.rule: T0}
        assert (case.rule in later.flagged) is flagged, offset


@every_rule
def test_a_passing_observation_ends_the_breach_and_a_new_one_starts_over(
    case: Case, judge: Judge
) -> None:
    breached = judge(case.breach, replace_when=case.replace_when).breaches
    cleared = judge(case.ok, now=at(60), breaches=breached, replace_when=case.replace_when)
    assert cleared.breaches == {}
    assert not cleared.degraded
    assert cleared.flagged == ()
    again = judge(
        case.breach, now=at(case.duration_s + 1), breaches={}, replace_when=case.replace_when
    )
    assert again.breaches == {case.rule: at(case.duration_s + 1)}


@every_rule
def test_missing_data_neither_starts_nor_ends_a_breach(case: Case, judge: Judge) -> None:
    assert case.rule not in judge(case.missing, replace_when=case.replace_when).breaches
    kept = judge(
        case.missing,
        now=at(case.duration_s + 60),
        breaches={case.rule: T0},
        replace_when=case.replace_when,
    )
    assert kept.breaches == {case.rule: T0}
    assert kept.reasons[case.rule].startswith(
        "no data this loop; still in breach since the last data"
    )
    # No fresh evidence, no replacement: the pod is flagged on the next breaching loop.
    assert case.rule not in kept.flagged
    confirmed = judge(
        case.breach,
        now=at(case.duration_s + 90),
        breaches=kept.breaches,
        replace_when=case.replace_when,
    )
    assert case.rule in confirmed.flagged


def test_a_breach_reason_carries_the_rule_s_words_and_its_progress(judge: Judge) -> None:
    health = judge(seen(passed=False), now=at(45), breaches={Rule.UNREACHABLE: T0})
    assert health.reasons["Unreachable"] == "health /health: HTTP 502 (breached 45s of 120s)"


def test_a_rule_that_flags_at_once_shows_no_progress(judge: Judge) -> None:
    health = judge(seen(notice=NOTICE), replace_when=REPLACING)
    assert health.reasons["HostNotice"] == (
        "RunPod host notice: machine note: We have detected a critical error on this machine"
    )


def test_flagged_rules_come_in_the_registry_s_order(judge: Judge) -> None:
    everything = seen(passed=False, scrape_s=3.0, error_ratio=0.5, notice=NOTICE)
    health = judge(
        everything,
        now=at(600),
        breaches=dict.fromkeys(Rule, T0),
        replace_when=REPLACING,
    )
    assert health.flagged == ("Unreachable", "SlowScrape", "ErrorRate", "HostNotice")
    assert list(health.breaches) == list(health.flagged)


def test_flapping_pod_is_never_flagged(judge: Judge) -> None:
    breaches: Mapping[str, dt.datetime] = {}
    for step in range(20):
        health = judge(seen(passed=step % 2 == 1), now=at(step * 30), breaches=breaches)
        breaches = health.breaches
        assert Rule.UNREACHABLE not in health.flagged


def test_notice_without_hostnotice_true_is_reported_but_never_a_breach(judge: Judge) -> None:
    appeared = judge(seen(notice=NOTICE), breaches={Rule.HOST_NOTICE: T0})
    assert appeared.notice == "machine note: We have detected a critical error on this machine"
    assert not appeared.degraded  # a breach under way is dropped with the rule off
    assert appeared.flagged == ()
    cleared = judge(seen(notice=HostNotice()), now=at(30))
    assert cleared.notice is None


def test_notice_with_hostnotice_true_flags_at_once_and_clears_with_the_notice(
    judge: Judge,
) -> None:
    window = HostNotice(maintenance_start=at(86400), maintenance_note="host upgrade")
    appeared = judge(seen(notice=window), replace_when=REPLACING)
    assert appeared.flagged == ("HostNotice",)
    assert "maintenance" in appeared.reasons["HostNotice"]
    cleared = judge(
        seen(notice=HostNotice()), now=at(30), breaches=appeared.breaches, replace_when=REPLACING
    )
    assert cleared.breaches == {}
    assert cleared.notice is None


def test_relative_latency_compares_with_the_median_of_the_other_pods_only(
    default_rules: tuple[ActiveRule, ...],
) -> None:
    observations = {
        p: seen(latency_s=v) for p, v in zip("abcd", (0.1, 0.1, 0.5, 0.5), strict=True)
    }
    pool = judge_pool(
        rules=default_rules, observations=observations, breaches={}, ready="abcd", now=T0
    )
    # c's peers are 0.1, 0.1, 0.5 (median 0.1): 0.5 is above 0.4. With itself counted
    # the median would be 0.3 and c would pass.
    assert Rule.RELATIVE_LATENCY in pool.members["c"].breaches
    assert "5.0x the median 0.100s of 3 other pods" in pool.members["c"].reasons["RelativeLatency"]
    assert not pool.members["a"].degraded


def test_a_single_degraded_pod_is_replaced_not_pool_wide(
    default_rules: tuple[ActiveRule, ...],
) -> None:
    pool = judge_pool(
        rules=default_rules,
        observations={"a": seen(passed=False)},
        breaches={"a": {Rule.UNREACHABLE: T0}},
        ready=["a"],
        now=at(120),
    )
    assert not pool.pool_wide
    assert pool.members["a"].flagged == ("Unreachable",)


def test_every_ready_pod_degraded_alike_and_together_is_pool_wide_and_names_the_rule(
    default_rules: tuple[ActiveRule, ...],
) -> None:
    pool = judge_pool(
        rules=default_rules,
        observations={
            "a": seen(passed=False),
            "b": seen(passed=False, error_ratio=0.5),
            "c": seen(passed=False),
        },
        breaches={"a": {Rule.UNREACHABLE: T0}, "b": {Rule.UNREACHABLE: at(30)}},
        ready=["a", "b", "c"],
        now=at(60),
    )
    assert pool.pool_wide
    assert pool.pool_wide_rules == ("Unreachable",)  # ErrorRate is b's alone
    assert pool.message is not None
    assert "all 3 Ready pods" in pool.message
    assert pool.members["a"].flagged == ()
    assert pool.released is None


def test_different_rules_are_independent_failures_not_pool_wide(
    default_rules: tuple[ActiveRule, ...],
) -> None:
    pool = judge_pool(
        rules=default_rules,
        observations={"a": seen(passed=False), "b": seen(error_ratio=0.3)},
        breaches={"a": {Rule.UNREACHABLE: T0}, "b": {Rule.ERROR_RATE: T0}},
        ready=["a", "b"],
        now=at(120),
    )
    assert not pool.pool_wide
    assert pool.members["a"].flagged == ("Unreachable",)


def test_the_same_rule_minutes_apart_is_not_pool_wide(
    default_rules: tuple[ActiveRule, ...],
) -> None:
    pool = judge_pool(
        rules=default_rules,
        observations={"a": seen(passed=False), "b": seen(passed=False)},
        breaches={"a": {Rule.UNREACHABLE: T0}, "b": {Rule.UNREACHABLE: at(180)}},
        ready=["a", "b"],
        now=at(300),
    )
    assert not pool.pool_wide
    assert pool.members["a"].flagged == ("Unreachable",)


def test_a_pod_runpod_reports_exited_is_never_held_pool_wide(
    default_rules: tuple[ActiveRule, ...],
) -> None:
    pool = judge_pool(
        rules=default_rules,
        observations={"a": seen(passed=False), "b": seen(passed=False)},
        breaches={"a": {Rule.UNREACHABLE: T0}, "b": {Rule.UNREACHABLE: T0}},
        ready=["a", "b"],
        now=at(120),
        exited=["b"],
    )
    assert not pool.pool_wide


def test_the_hold_ends_after_pool_wide_hold_by_releasing_the_worst_pod(
    default_rules: tuple[ActiveRule, ...],
) -> None:
    def judged(now: dt.datetime) -> PoolHealth:
        return judge_pool(
            rules=default_rules,
            observations={
                "a": seen(passed=False),
                "b": seen(passed=False, error_ratio=0.9),
                "c": seen(passed=False),
            },
            breaches={
                "a": {Rule.UNREACHABLE: T0},
                "b": {Rule.UNREACHABLE: T0, Rule.ERROR_RATE: T0},
                "c": {Rule.UNREACHABLE: T0},
            },
            ready=["a", "b", "c"],
            now=now,
            hold_s=1800.0,
        )

    held = judged(at(1799))
    assert held.released is None
    assert held.blocks_replacement
    assert all(held.holds(p) for p in "abc")
    over = judged(at(1800))
    assert over.pool_wide
    assert over.released == "b"  # two rules due, the others one: the worst
    assert [p for p in "abc" if over.holds(p)] == ["a", "c"]
    assert not over.blocks_replacement
    assert "health.poolWideHold" in (over.message or "")


def test_one_healthy_ready_pod_keeps_it_from_being_pool_wide(
    default_rules: tuple[ActiveRule, ...],
) -> None:
    pool = judge_pool(
        rules=default_rules,
        observations={"a": seen(passed=False), "b": seen(passed=False), "c": seen()},
        breaches={"a": {Rule.UNREACHABLE: T0}, "b": {Rule.UNREACHABLE: T0}},
        ready=["a", "b", "c"],
        now=at(120),
    )
    assert not pool.pool_wide
    assert [p for p, h in pool.members.items() if h.flagged] == ["a", "b"]


def test_healthy_pods_that_are_not_ready_do_not_count_for_pool_wide(
    default_rules: tuple[ActiveRule, ...],
) -> None:
    pool = judge_pool(
        rules=default_rules,
        observations={"a": seen(passed=False), "b": seen(passed=False), "warming": seen()},
        breaches={},
        ready=["a", "b"],
        now=T0,
    )
    assert pool.pool_wide
    assert pool.pool_wide_rules == ("Unreachable",)


OUTCOMES = st.sampled_from(["breach", "ok", "missing"])


@given(st.lists(st.tuples(st.integers(1, 200), OUTCOMES), min_size=1, max_size=30))
def test_flagged_exactly_when_breached_continuously_for_the_duration(
    steps: list[tuple[int, str]],
) -> None:
    """Against a reference model: the clock starts at the first breach after the last
    pass, missing data is skipped, and the flag needs a breach on the current loop."""
    case = CASES[3]  # ErrorRate, 300 s
    rules = active_rules(DEFAULT)
    breaches: Mapping[str, dt.datetime] = {}
    now, start = T0, None
    for gap, outcome in steps:
        now += dt.timedelta(seconds=gap)
        observation = {"breach": case.breach, "ok": case.ok, "missing": case.missing}[outcome]
        health = judge_member(
            rules=rules, observation=observation, peer_latencies=PEERS, breaches=breaches, now=now
        )
        breaches = health.breaches
        if outcome == "ok":
            start = None
        elif outcome == "breach" and start is None:
            start = now
        assert breaches.get(case.rule) == start
        expected = (
            outcome == "breach" and start is not None and (now - start).total_seconds() >= 300
        )
        assert (case.rule in health.flagged) is expected
