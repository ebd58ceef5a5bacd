"""Hand-built observations of one pod for the health tests: a probe, Prometheus values
and a RunPod notice, as observe hands them to decide (rpp/decide/health/rule.py's
`MemberObservation`).

Plain functions, so a test module can build its parametrized cases at import time;
conftest.py offers what a test body needs as fixtures (`judge`, typed `Judge` here).
Every moment is counted from T0, the moment every decide unit test decides at
(tests/decide/builders.py's NOW).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Protocol

from rpp.decide.health.pool_wide import MemberHealth
from rpp.decide.health.registry import RULES
from rpp.decide.health.rule import HealthRule, MemberObservation
from rpp.model import spec
from rpp.model.observations import HostNotice, PodMetrics, ProbeResult
from tests.decide.builders import NOW

T0 = NOW
PEERS = (0.25, 0.25, 0.3)  # median 0.25: RelativeLatency's limit is 1.0 s at 4x
NOTICE = HostNotice(note="We have detected a critical error on this machine")
PROBE_ERROR = "health /health: HTTP 502"


def at(seconds: float) -> dt.datetime:
    """T0 plus `seconds`."""
    return T0 + dt.timedelta(seconds=seconds)


def probe(*, passed: bool = True, metrics_latency_s: float | None = 0.1) -> ProbeResult:
    """One probe of the pod: both paths passed or both failed with PROBE_ERROR."""
    return ProbeResult(
        passed=passed,
        health_ok=passed,
        metrics_ok=passed,
        health_latency_s=0.05,
        metrics_latency_s=metrics_latency_s,
        error=None if passed else PROBE_ERROR,
    )


def seen(
    *,
    latency_s: float | None = 0.1,
    scrape_s: float | None = 0.1,
    error_ratio: float | None = 0.0,
    passed: bool = True,
    notice: HostNotice | None = None,
) -> MemberObservation:
    """A pod observed this loop: healthy by default, each value changeable; None is no
    data for that value."""
    return MemberObservation(
        probe=probe(passed=passed, metrics_latency_s=scrape_s),
        metrics=PodMetrics(latency_s=latency_s, error_ratio=error_ratio),
        notice=notice,
    )


class Judge(Protocol):
    """The `judge` fixture (conftest.py): judge_member for one pod, defaults filled in."""

    def __call__(
        self,
        observation: MemberObservation,
        *,
        now: dt.datetime = T0,
        breaches: Mapping[str, dt.datetime] | None = None,
        replace_when: spec.ReplaceWhen | None = None,
        peers: Sequence[float] = PEERS,
        rules: Sequence[HealthRule] = RULES,
    ) -> MemberHealth: ...
