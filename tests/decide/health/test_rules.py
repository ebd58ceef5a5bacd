"""Each rule's check on its own (rpp/decide/health/rules/, one file per rule): breach
with the words that say why, pass, and no data, at the threshold's edges."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from rpp.decide.health.rule import NO_DATA, Check, HealthRule, Limits, MemberObservation
from rpp.decide.health.rules.error_rate import ErrorRate
from rpp.decide.health.rules.host_notice import HostNotice as HostNoticeRule
from rpp.decide.health.rules.relative_latency import RelativeLatency
from rpp.decide.health.rules.slow_scrape import SlowScrape
from rpp.decide.health.rules.unreachable import Unreachable
from rpp.model import spec
from rpp.model.observations import HostNotice, PodMetrics, ProbeResult
from tests.decide.health.pod_observations import NOTICE, PEERS, PROBE_ERROR, seen


def check(
    rule: HealthRule, observation: MemberObservation, *, peers: Sequence[float] = PEERS
) -> Check:
    """The rule's check with the limits the default spec (hostNotice: true) gives it."""
    limits = rule.limits(spec.ReplaceWhen(host_notice=True))
    assert limits is not None
    return rule.check(observation, peer_latencies=peers, limits=limits)


@dataclass(frozen=True)
class Case:
    """One rule with an observation that breaches it (and the words), one that passes,
    and one without its data."""

    rule: HealthRule
    breach: MemberObservation
    detail: str
    ok: MemberObservation
    missing: MemberObservation


CASES = [
    Case(
        Unreachable(),
        seen(passed=False),
        PROBE_ERROR,
        seen(),
        MemberObservation(metrics=PodMetrics(0.1, 0.0), notice=HostNotice()),
    ),
    Case(
        SlowScrape(),
        seen(scrape_s=2.5),
        "metrics probe took 2.50s (limit 2s)",
        seen(scrape_s=1.0),
        seen(scrape_s=None),
    ),
    Case(
        RelativeLatency(),
        seen(latency_s=1.5),
        "average request time 1.500s is 6.0x the median 0.250s of 3 other pods (limit 4x)",
        seen(latency_s=0.3),
        seen(latency_s=None),
    ),
    Case(
        ErrorRate(),
        seen(error_ratio=0.2),
        "5xx share 20.00% over errorRatioQuery's window (limit 5.00%)",
        seen(error_ratio=0.0),
        seen(error_ratio=None),
    ),
    Case(
        HostNoticeRule(),
        seen(notice=NOTICE),
        "RunPod host notice: machine note: We have detected a critical error on this machine",
        seen(notice=HostNotice()),
        seen(notice=None),
    ),
]
every_rule = pytest.mark.parametrize("case", CASES, ids=[c.rule.name for c in CASES])


@every_rule
def test_a_breaching_observation_is_a_breach_that_says_why(case: Case) -> None:
    assert check(case.rule, case.breach) == Check(True, case.detail)


@every_rule
def test_a_healthy_observation_passes(case: Case) -> None:
    # A pass's words are never shown (HostNotice's describes the empty notice).
    assert check(case.rule, case.ok).breach is False


@every_rule
def test_an_observation_without_the_rule_s_data_is_no_data(case: Case) -> None:
    assert check(case.rule, case.missing) == NO_DATA


def test_unreachable_without_the_probe_s_words_still_says_the_probe_failed() -> None:
    failed = MemberObservation(
        probe=ProbeResult(
            passed=False,
            health_ok=False,
            metrics_ok=False,
            health_latency_s=None,
            metrics_latency_s=None,
        )
    )
    assert check(Unreachable(), failed) == Check(True, "probe failed")


@pytest.mark.parametrize(("scrape_s", "breached"), [(1.999, False), (2.0, False), (2.001, True)])
def test_slow_scrape_is_strictly_above_its_threshold(scrape_s: float, breached: bool) -> None:
    assert check(SlowScrape(), seen(scrape_s=scrape_s)).breach is breached


def test_slow_scrape_leaves_a_metrics_page_that_never_answered_to_unreachable() -> None:
    assert check(SlowScrape(), seen(passed=False, scrape_s=None)) == NO_DATA


@pytest.mark.parametrize(("ratio", "breached"), [(0.0499, False), (0.05, False), (0.0501, True)])
def test_error_rate_is_strictly_above_its_threshold(ratio: float, breached: bool) -> None:
    assert check(ErrorRate(), seen(error_ratio=ratio)).breach is breached


@pytest.mark.parametrize(("latency", "breached"), [(0.999, False), (1.0, False), (1.001, True)])
def test_relative_latency_is_strictly_above_its_multiple_of_the_peer_median(
    latency: float, breached: bool
) -> None:
    assert check(RelativeLatency(), seen(latency_s=latency)).breach is breached


def test_relative_latency_needs_two_other_pods_with_data() -> None:
    assert check(RelativeLatency(), seen(latency_s=9.0), peers=[0.1]) == NO_DATA
    assert check(RelativeLatency(), seen(latency_s=9.0), peers=[0.1, 0.1]).breach


def test_relative_latency_against_idle_peers_is_no_data() -> None:
    assert check(RelativeLatency(), seen(latency_s=1.0), peers=[0.0, 0.0]) == NO_DATA


def test_a_maintenance_window_is_a_host_notice() -> None:
    window = HostNotice(maintenance_note="host upgrade")
    found = check(HostNoticeRule(), seen(notice=window))
    assert found.breach
    assert "maintenance ? to ? (host upgrade)" in found.detail


def test_host_notice_is_off_unless_the_spec_says_host_notice_true() -> None:
    assert HostNoticeRule().limits(spec.ReplaceWhen()) is None
    assert HostNoticeRule().limits(spec.ReplaceWhen(host_notice=True)) == Limits(duration_s=0)


def test_the_limits_a_rule_is_given_are_the_ones_it_checks_against() -> None:
    strict = Limits(threshold=0.01, duration_s=300.0)
    found = ErrorRate().check(seen(error_ratio=0.02), peer_latencies=PEERS, limits=strict)
    assert found == Check(True, "5xx share 2.00% over errorRatioQuery's window (limit 1.00%)")
