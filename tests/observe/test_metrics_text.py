"""Reading a pod's metrics page: required metrics and the process start time."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from rpp.observe.metrics_text import MetricsPage, MetricsTextError, parse_metrics_page_within

CREATED_ONLY = """\
# HELP app_requests_total Requests.
# TYPE app_requests_total counter
app_requests_total 12.0
# HELP app_requests_created Requests.
# TYPE app_requests_created gauge
app_requests_created 1.7e+09
# HELP app_latency_seconds_created Latency.
# TYPE app_latency_seconds_created gauge
app_latency_seconds_created 1.6999e+09
"""


def parse(text: str) -> MetricsPage:
    """The prober's parse, without a deadline."""
    return asyncio.run(parse_metrics_page_within(text, deadline=math.inf))


def process_start_time(text: str) -> float | None:
    return parse(text).process_start


def test_earliest_created_sample_is_the_process_start() -> None:
    assert process_start_time(CREATED_ONLY) == 1.6999e9


def test_process_start_time_seconds_wins_over_created_samples() -> None:
    text = CREATED_ONLY + (
        "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.65e+09\n"
    )
    later = CREATED_ONLY + (
        "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.75e+09\n"
    )
    assert process_start_time(text) == 1.65e9
    assert process_start_time(later) == 1.75e9


def test_page_without_start_or_created_has_no_process_start() -> None:
    page = parse("# TYPE queue gauge\nqueue 3\n")
    assert page.process_start is None
    assert page.has_metric("queue")


def test_zero_or_nan_created_values_are_not_start_times() -> None:
    text = "a_created 0\nb_created NaN\nc_created 1.8e9\n"
    assert process_start_time(text) == 1.8e9


def test_required_metric_matches_family_or_sample_name() -> None:
    page = parse(CREATED_ONLY)
    assert page.has_metric("app_requests")
    assert page.has_metric("app_requests_total")
    assert not page.has_metric("vllm_num_requests_waiting")


def test_page_from_prometheus_client_reads_like_a_real_service() -> None:
    registry = CollectorRegistry()
    Counter("served", "Served.", registry=registry).inc()
    Gauge("process_start_time_seconds", "Start.", registry=registry).set(1.72e9)
    page = parse(generate_latest(registry).decode())
    assert page.process_start == 1.72e9
    assert page.has_metric("served_total")


@pytest.mark.parametrize(
    "garbage",
    ["<html><body>502 Bad Gateway</body></html>", 'metric{label="unterminated 1\n'],
)
def test_text_that_is_not_prometheus_format_raises_one_clear_error(garbage: str) -> None:
    with pytest.raises(MetricsTextError, match="not Prometheus text format"):
        parse(garbage)


@given(st.lists(st.floats(min_value=1e9, max_value=2e9), min_size=1, max_size=8))
def test_process_start_is_the_minimum_of_created_samples(values: list[float]) -> None:
    text = "".join(f"m{i}_created {v!r}\n" for i, v in enumerate(values))
    assert process_start_time(text) == min(values)
