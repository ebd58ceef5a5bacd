"""The canary's bake judged against synthetic per-pod series whose answers are known.

Each series is what Prometheus would answer for every pod, loop after loop (30 s apart):
the canary's error ratio, latency and request rate, and the same for each pod still on
the old image. `bake` folds them through `tally` as the release step does every loop,
then asks `judge` for the verdict. Covered: a good release, more errors, slower
answers, too few requests, no data (probes only), a flagged canary, a slow peer, and
load changes that hit both sides alike, which must not move the verdict.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpp.decide.release.canary import CanaryLimits, judge, sides, tally
from rpp.model.observations import PodMetrics
from rpp.model.rollout_records import BakeTally, JudgedBy, Verdict, VerdictResult

START = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
LOOP_S = 30
LIMITS = CanaryLimits(
    bake_s=600, max_error_ratio_increase=0.02, max_latency_ratio=1.5, min_requests=100
)
Loop = tuple[PodMetrics, Sequence[PodMetrics]]  # (the canary, its peers) at one instant


def pod(
    error: float | None = 0.0, latency: float | None = 0.25, rate: float | None = 0.5
) -> PodMetrics:
    return PodMetrics(error_ratio=error, latency_s=latency, request_rate=rate)


def steady(canary: PodMetrics, peers: Sequence[PodMetrics], loops: int) -> list[Loop]:
    return [(canary, peers)] * loops


def bake(series: Sequence[Loop]) -> tuple[BakeTally, dt.datetime]:
    """The tally after every loop of `series`, and the time of the last loop."""
    tallied = BakeTally(started_at=START)
    now = START
    for canary, peers in series:
        now += dt.timedelta(seconds=LOOP_S)
        tallied = tally(tallied, canary=canary, peers=peers, now=now)
    return tallied, now


def verdict_of(
    series: Sequence[Loop],
    *,
    flagged: str | None = None,
    flagged_by: JudgedBy = "probes",
    queries: bool = True,
) -> Verdict:
    tallied, now = bake(series)
    return judge(
        tallied, limits=LIMITS, now=now, flagged=flagged, flagged_by=flagged_by, queries=queries
    )


OLD = [pod(), pod(), pod()]


def test_a_good_release_passes_once_the_bake_is_over_with_its_numbers() -> None:
    series = steady(pod(error=0.01, latency=0.26), [pod(0.01, 0.25)] * 3, loops=20)
    result = verdict_of(series)
    assert result.result is VerdictResult.PASSED
    assert result.judged_by == "metrics"
    assert result.window == 600
    assert result.canary is not None
    assert result.peers is not None
    # 0.5 requests/s for 20 loops of 30 s: 300 requests; three peers served 900.
    assert (result.canary.requests, result.peers.requests) == (300, 900)
    assert result.canary.error_ratio == pytest.approx(0.01)
    assert result.canary.latency == pytest.approx(0.26)
    assert result.peers.latency == pytest.approx(0.25)
    assert "as good as the old pods" in result.message
    assert "old pods (3)" in result.message


def test_a_good_release_is_still_baking_before_the_bake_is_over() -> None:
    result = verdict_of(steady(pod(), OLD, loops=19))
    assert result.result is VerdictResult.BAKING
    assert "30s of 10m left" in result.message


def test_thirty_percent_errors_fail_as_soon_as_min_requests_were_served() -> None:
    # 0.5 requests/s: 15 per loop, so 100 requests after 7 loops (3.5 minutes).
    series = steady(pod(error=0.3), OLD, loops=7)
    result = verdict_of(series)
    assert result.result is VerdictResult.FAILED
    assert result.judged_by == "metrics"
    assert "error ratio 30.0% against 0.0% on the old pods (+30.0%, at most +2.0%)" in (
        result.message
    )
    assert "105 requests" in result.message
    assert verdict_of(series[:6]).result is VerdictResult.BAKING, "90 requests are not enough"


def test_an_error_increase_within_the_limit_passes() -> None:
    series = steady(pod(error=0.029), [pod(error=0.01)] * 3, loops=20)
    assert verdict_of(series).result is VerdictResult.PASSED


def test_three_times_slower_answers_fail_on_latency_against_the_peers_median() -> None:
    result = verdict_of(steady(pod(latency=0.75), OLD, loops=10))
    assert result.result is VerdictResult.FAILED
    assert "latency 0.75s against 0.25s on the old pods (3.00x, at most 1.5x)" in result.message


def test_one_slow_old_pod_does_not_move_the_peers_median() -> None:
    peers = [pod(latency=0.25), pod(latency=0.25), pod(latency=2.0)]
    assert verdict_of(steady(pod(latency=0.3), peers, loops=20)).result is VerdictResult.PASSED
    assert verdict_of(steady(pod(latency=0.5), peers, loops=20)).result is VerdictResult.FAILED


def test_a_load_spike_that_slows_every_pod_alike_does_not_fail_the_canary() -> None:
    """Minutes 3 to 7 every pod answers four times slower and 10% fail (a dependency is
    struggling): a fixed threshold on the canary would fire, the comparison does not."""
    series: list[Loop] = []
    for i in range(20):
        spike = 6 <= i < 14
        factor, errors = (4.0, 0.10) if spike else (1.0, 0.0)
        canary = pod(error=errors, latency=0.27 * factor, rate=0.5 * (3 if spike else 1))
        peers = [pod(error=errors, latency=0.25 * factor, rate=0.5 * (3 if spike else 1))] * 3
        series.append((canary, peers))
    assert max(c.latency_s or 0 for c, _ in series) > 1.5 * 0.27 * 2
    result = verdict_of(series)
    assert result.result is VerdictResult.PASSED
    assert result.canary is not None
    assert result.peers is not None
    assert result.canary.latency is not None
    assert result.peers.latency is not None
    assert result.canary.latency / result.peers.latency == pytest.approx(0.27 / 0.25)


def test_a_bad_canary_still_fails_when_a_load_spike_hits_every_pod() -> None:
    series: list[Loop] = []
    for i in range(20):
        factor = 4.0 if 6 <= i < 14 else 1.0
        series.append((pod(latency=0.5 * factor), [pod(latency=0.25 * factor)] * 3))
    result = verdict_of(series)
    assert result.result is VerdictResult.FAILED
    assert "(2.00x, at most 1.5x)" in result.message


@settings(max_examples=60, deadline=None)
@given(
    load=st.lists(st.floats(min_value=0.2, max_value=20.0), min_size=20, max_size=20),
    canary_ratio=st.sampled_from([0.9, 1.2, 1.4, 1.6, 2.0, 3.0]),
)
def test_any_load_pattern_that_hits_both_sides_alike_leaves_the_latency_verdict_alone(
    load: list[float], canary_ratio: float
) -> None:
    quiet = steady(pod(latency=0.25 * canary_ratio), OLD, loops=20)
    loaded = [(pod(latency=0.25 * canary_ratio * f), [pod(latency=0.25 * f)] * 3) for f in load]
    expected = VerdictResult.FAILED if canary_ratio > 1.5 else VerdictResult.PASSED
    assert verdict_of(quiet).result is expected
    assert verdict_of(loaded).result is expected


def test_too_few_requests_at_the_end_of_the_bake_keep_it_baking_until_there_are_enough() -> None:
    quiet = pod(rate=0.1)  # 3 requests a loop: 60 after 10 minutes
    result = verdict_of(steady(quiet, OLD, loops=20))
    assert result.result is VerdictResult.WAITING
    assert "until it has served 100 requests" in result.message
    assert "60 requests" in result.message
    assert verdict_of(steady(quiet, OLD, loops=34)).result is VerdictResult.PASSED


def test_without_request_counts_a_failure_waits_for_the_whole_bake() -> None:
    series = steady(pod(error=0.3, rate=None), [pod(rate=None)] * 3, loops=20)
    assert verdict_of(series[:19]).result is VerdictResult.BAKING
    result = verdict_of(series)
    assert result.result is VerdictResult.FAILED
    assert "requests not counted" in result.message


def test_without_request_counts_a_good_canary_passes_and_says_why_min_requests_was_not_used() -> (
    None
):
    result = verdict_of(steady(pod(rate=None), [pod(rate=None)] * 3, loops=20))
    assert result.result is VerdictResult.PASSED
    assert "set prometheus.requestRateQuery to require rollout.canary.minRequests" in (
        result.message
    )


def test_without_any_data_the_canary_is_judged_by_probes_only_and_says_so() -> None:
    blank = PodMetrics()
    series = steady(blank, [blank] * 3, loops=20)
    result = verdict_of(series)
    assert result.result is VerdictResult.PASSED
    assert result.judged_by == "probes"
    assert "Prometheus had no data for the canary and its peers" in result.message
    unset = verdict_of(series, queries=False)
    assert "the pool sets no prometheus.errorRatioQuery or latencyQuery" in unset.message
    assert verdict_of(series[:5]).judged_by == "probes"


def test_a_canary_flagged_by_a_health_rule_fails_by_probes_whatever_its_numbers() -> None:
    result = verdict_of(steady(pod(), OLD, loops=3), flagged="Unreachable: probe timed out")
    assert result.result is VerdictResult.FAILED
    assert result.judged_by == "probes"
    assert result.message.startswith("a health rule flagged it: Unreachable: probe timed out; ")
    assert "canary 0.0% errors, 0.25s, 45 requests" in result.message
    by_metrics = verdict_of(
        steady(pod(), OLD, loops=3), flagged="ErrorRate: 30% 5xx", flagged_by="metrics"
    )
    assert (by_metrics.result, by_metrics.judged_by) == (VerdictResult.FAILED, "metrics")


def test_loops_without_data_on_one_side_are_left_out_of_the_comparison() -> None:
    """The window is the same for both sides: a loop counts only with both."""
    series = steady(pod(error=0.5), [PodMetrics()] * 3, loops=10)
    series += steady(pod(error=0.0), OLD, loops=10)
    tallied, _ = bake(series)
    canary, peers = sides(tallied)
    assert tallied.error_loops == 10
    assert (canary.error_ratio, peers.error_ratio) == (0.0, 0.0)


def test_a_tally_survives_the_status_round_trip() -> None:
    tallied, _ = bake(steady(pod(error=0.3), OLD, loops=4))
    assert BakeTally.from_stored(tallied.stored(), "status.rollout.bake") == tallied
