"""The autoscaler's pure arithmetic: recommendation, tolerance, clamping, and windows
that count only once covered (rpp/decide/capacity/autoscale.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pytest

from rpp.decide.capacity.autoscale import recommend, scale
from rpp.model.spec import RunPodPoolSpec
from rpp.model.spec_load import load_spec
from rpp.model.status import PoolStatus
from rpp.model.timestamps import UTC

T0 = dt.datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("ready", "value", "current", "expected"),
    [
        (2, 4.0, 2, 2),  # at target
        (2, 4.3, 2, 2),  # within 10%: unchanged
        (2, 3.7, 3, 3),  # within 10% below: unchanged
        (2, 6.0, 2, 3),  # ceil(2 x 6 / 4)
        (2, 40.0, 2, 5),  # clamped to max
        (4, 0.1, 4, 2),  # clamped to min
        (0, 40.0, 3, 3),  # no ready pod: no information, size stays
    ],
)
def test_recommendation_is_hpa_style(
    ready: int, value: float, current: int, expected: int
) -> None:
    assert recommend(ready=ready, value=value, target=4.0, current=current, lo=2, hi=5) == expected


def spec() -> RunPodPoolSpec:
    resolved, problems = load_spec(
        "p",
        {
            "replicas": {"min": 2, "max": 5},
            "nginx": {"slotPorts": 6},
            "limits": {"maxPods": 10},
            "autoscaling": {
                "enabled": True,
                "query": "q",
                "target": 4,
                "scaleUpStabilization": "2m",
                "scaleDownStabilization": "30m",
            },
        },
    )
    assert problems == []
    assert resolved is not None
    return resolved


def run(values: Sequence[float | None], *, ready: int = 2) -> list[int]:
    status, sizes = PoolStatus(), []
    for i, value in enumerate(values):
        result = scale(
            spec=spec(),
            status=status,
            value=value,
            ready=ready,
            now=T0 + dt.timedelta(seconds=30 * i),
        )
        status = result.status
        sizes.append(result.size)
    return sizes


def test_a_window_counts_only_once_it_is_covered() -> None:
    # High from the first sample: no growth until 2 minutes of samples exist.
    sizes = run([12.0] * 6)
    assert sizes[:4] == [2, 2, 2, 2]
    assert sizes[4] > 2


def test_growth_takes_the_lowest_recommendation_in_the_window() -> None:
    sizes = run([4.0] * 4 + [12.0, 8.0, 12.0, 12.0, 12.0])
    # Samples 30 s apart: when the 2m window first holds only recommendations above 2,
    # they are 5 (12 -> ceil(6) clamped), 4 (8) and 5: the pool grows to the lowest, 4.
    assert sizes[:5] == [2, 2, 2, 2, 2]
    assert max(sizes) == 4


def test_missing_value_keeps_the_size_and_says_why() -> None:
    status = PoolStatus()
    result = scale(spec=spec(), status=status, value=None, ready=2, now=T0)
    assert result.size == 2
    assert result.unavailable == "no value"


def test_recommendations_kept_are_the_window_plus_the_one_in_force_at_its_start() -> None:
    status = PoolStatus()
    for i in range(100):  # 50 minutes of samples, windows of 2m and 30m
        status = scale(
            spec=spec(), status=status, value=4.0, ready=2, now=T0 + dt.timedelta(seconds=30 * i)
        ).status
    assert status.autoscaling is not None
    times = [r.time for r in status.autoscaling.recommendations]
    now = T0 + dt.timedelta(seconds=30 * 99)
    assert (now - times[0]).total_seconds() >= 1800
    assert all((now - t).total_seconds() < 1800 for t in times[1:])
