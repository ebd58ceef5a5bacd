"""Kubernetes-style durations: the grammar the CRD allows, parsed by durationpy, and the
shortest spelling written back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rpp.model.durations import DurationError, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("150s", 150), ("2m", 120), ("1h30m", 5400), ("500ms", 0.5), ("1.5m", 90), ("0.5ms", 0.0005)],
)
def test_durations_read_as_kubernetes_writes_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    [
        "2 minutes", "1d", "-5s", "5", "", "1w", "99999999999999h",
        # What Python alone would let through, and the API server (Go) refuses:
        " 10s ", "10s\n", "1.2345s", "\u0661\u0660s",
    ],
)  # fmt: skip
def test_what_the_crd_pattern_refuses_is_refused_with_advice(text: str) -> None:
    with pytest.raises(DurationError, match="is not a duration; write a number with a unit"):
        parse_duration(text)


def test_a_number_is_not_a_duration_string() -> None:
    with pytest.raises(DurationError, match='expected a duration string such as "150s"'):
        parse_duration(150)


@pytest.mark.parametrize(
    ("seconds", "text"), [(150, "150s"), (120, "2m"), (5400, "1h30m"), (0.5, "500ms"), (0, "0s")]
)
def test_format_writes_the_shortest_exact_spelling(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@given(millis=st.integers(min_value=0, max_value=10**9))
def test_every_formatted_duration_parses_back_to_the_same_time(millis: int) -> None:
    assert round(parse_duration(format_duration(millis / 1000)) * 1000) == millis
