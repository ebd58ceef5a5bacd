"""The registry (rpp/decide/health/registry.py): every rule listed once, in the order the
status and the conditions name them, each reading its own section of the spec; and a
rule added to it is judged like the others, with nothing else changed."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pydantic import BaseModel

from rpp.decide.health.pool_wide import judge_pool
from rpp.decide.health.registry import PROMETHEUS_RULES, RULES, Rule, active_rules
from rpp.decide.health.rule import (
    NO_DATA,
    PASS,
    Check,
    HealthRule,
    Limits,
    MemberObservation,
    Needs,
)
from rpp.model import spec
from rpp.model.observations import PodMetrics
from tests.decide.health.pod_observations import T0, Judge, at, probe, seen


def test_the_registry_lists_each_rule_once_in_the_order_they_are_reported() -> None:
    names = [rule.name for rule in RULES]
    assert names == ["Unreachable", "SlowScrape", "RelativeLatency", "ErrorRate", "HostNotice"]
    assert len({type(rule) for rule in RULES}) == len(RULES)


def test_the_rule_names_code_uses_are_the_registry_s_in_its_order() -> None:
    assert [str(name) for name in Rule] == [rule.name for rule in RULES]


def _field(model: BaseModel, key: str) -> object:
    """The value a camelCase spec key names in `model`."""
    (name,) = [n for n, f in type(model).model_fields.items() if f.alias == key]
    return getattr(model, name)


def test_each_rule_names_a_section_of_spec_health_replace_when() -> None:
    replace_when = spec.Health().replace_when
    for rule in RULES:
        head, _, key = rule.section.rpartition(".")
        assert head == "health.replaceWhen", rule.name
        _field(replace_when, key)  # raises unless the spec has the section


def test_each_rule_reads_its_limits_from_its_own_section() -> None:
    custom = spec.ReplaceWhen(
        unreachable=spec.UnreachableRule(duration=30.0),
        slow_scrape=spec.SlowScrapeRule(threshold=3.0, duration=40.0),
        relative_latency=spec.RelativeLatencyRule(threshold=5.0, duration=50.0),
        error_rate=spec.ErrorRateRule(threshold=0.2, duration=60.0),
        host_notice=True,
    )
    limits = {active.rule.name: active.limits for active in active_rules(custom)}
    assert limits == {
        "Unreachable": Limits(duration_s=30.0),
        "SlowScrape": Limits(threshold=3.0, duration_s=40.0),
        "RelativeLatency": Limits(threshold=5.0, duration_s=50.0),
        "ErrorRate": Limits(threshold=0.2, duration_s=60.0),
        "HostNotice": Limits(duration_s=0.0),
    }


def test_the_default_spec_switches_every_rule_on_but_host_notice() -> None:
    active = active_rules(spec.ReplaceWhen())
    assert [a.rule.name for a in active] == [
        "Unreachable",
        "SlowScrape",
        "RelativeLatency",
        "ErrorRate",
    ]
    assert active[0].limits == Limits(duration_s=120.0)
    assert active[3].limits == Limits(threshold=0.05, duration_s=300.0)


def test_the_rules_that_read_prometheus_say_which_query_feeds_them() -> None:
    assert set(PROMETHEUS_RULES) == {"RelativeLatency", "ErrorRate"}
    prometheus = spec.Prometheus(
        job="web-pods", latency_query="latency_q", error_ratio_query="errors_q"
    )
    for rule in RULES:
        if rule.needs is Needs.PROMETHEUS:
            assert rule.query_field is not None, rule.name
            assert rule.query(prometheus) == _field(prometheus, rule.query_field)
            assert rule.query(spec.Prometheus(job="web-pods")) is None
        else:
            assert rule.query_field is None, rule.name
            assert rule.query(prometheus) is None


def test_each_rule_says_what_data_it_needs() -> None:
    assert {rule.name: rule.needs for rule in RULES} == {
        "Unreachable": Needs.PROBE,
        "SlowScrape": Needs.METRICS_PAGE,
        "RelativeLatency": Needs.PROMETHEUS,
        "ErrorRate": Needs.PROMETHEUS,
        "HostNotice": Needs.RUNPOD_NOTICE,
    }


class GpuTooHot(HealthRule):
    """A rule no file of rpp defines: breaches on the probe's health latency (standing in
    for a GPU temperature), to show a registered rule is judged like the others."""

    name = "GpuTooHot"
    section = "health.replaceWhen.gpuTooHot"
    needs = Needs.PROBE

    def limits(self, replace_when: spec.ReplaceWhen) -> Limits:
        return Limits(threshold=1.0, duration_s=60.0)

    def check(
        self, observation: MemberObservation, *, peer_latencies: Sequence[float], limits: Limits
    ) -> Check:
        probe = observation.probe
        if probe is None or probe.health_latency_s is None:
            return NO_DATA
        if not probe.health_latency_s > limits.threshold:
            return PASS
        return Check(True, f"health answered in {probe.health_latency_s:g}s")


WITH_HOT = (*RULES, GpuTooHot())


def hot(*, passed: bool = True) -> MemberObservation:
    """A pod whose health path answers in 2 s: GpuTooHot's breach, no other rule's."""
    return MemberObservation(
        probe=dataclasses.replace(probe(passed=passed), health_latency_s=2.0),
        metrics=PodMetrics(latency_s=0.1, error_ratio=0.0),
    )


def test_a_rule_added_to_the_registry_is_judged_like_every_other(judge: Judge) -> None:
    first = judge(hot(), rules=WITH_HOT)
    assert first.breaches == {"GpuTooHot": T0}
    assert first.reasons == {"GpuTooHot": "health answered in 2s (breached 0s of 60s)"}
    assert first.flagged == ()
    down_too = {**first.breaches, Rule.UNREACHABLE: T0}
    due = judge(hot(passed=False), now=at(120), breaches=down_too, rules=WITH_HOT)
    assert due.flagged == ("Unreachable", "GpuTooHot")  # in the registry's order
    assert judge(seen(), now=at(150), breaches=due.breaches, rules=WITH_HOT).breaches == {}
    # Not registered, not judged: the same pod is healthy under the real registry.
    assert not judge(hot()).degraded


def test_a_rule_added_to_the_registry_counts_for_pool_wide_degradation() -> None:
    pool = judge_pool(
        rules=active_rules(spec.ReplaceWhen(), WITH_HOT),
        observations={"a": hot(), "b": hot()},
        breaches={"a": {"GpuTooHot": T0}},
        ready=["a", "b"],
        now=at(30),
    )
    assert pool.pool_wide
    assert pool.pool_wide_rules == ("GpuTooHot",)
