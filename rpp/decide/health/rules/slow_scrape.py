"""SlowScrape: the pod's metrics page answered, but slowly.

Where it sits: one health rule (rpp/decide/health/rule.py's interface), listed in
rpp/decide/health/registry.py. Breach: the metrics probe took longer than the threshold
(strictly above; default 2 s). No data: no probe, or a metrics request that never
answered (that is Unreachable's to judge). Limits: spec.health.replaceWhen.slowScrape
(default 2 s for 10 minutes).
"""

from __future__ import annotations

from collections.abc import Sequence

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


class SlowScrape(HealthRule):
    name = "SlowScrape"
    section = "health.replaceWhen.slowScrape"
    needs = Needs.METRICS_PAGE

    def limits(self, replace_when: spec.ReplaceWhen) -> Limits:
        return Limits.of(replace_when.slow_scrape)

    def check(
        self, observation: MemberObservation, *, peer_latencies: Sequence[float], limits: Limits
    ) -> Check:
        probe = observation.probe
        # A metrics request that never answered gives no latency: Unreachable covers it.
        if probe is None or probe.metrics_latency_s is None:
            return NO_DATA
        latency = probe.metrics_latency_s
        if not latency > limits.threshold:
            return PASS  # the words are for a breach only
        return Check(True, f"metrics probe took {latency:.2f}s (limit {limits.threshold:g}s)")
