"""RelativeLatency: the pod answers requests many times slower than its peers.

Where it sits: one health rule (rpp/decide/health/rule.py's interface), listed in
rpp/decide/health/registry.py. Breach: the pod's average request time
(prometheus.latencyQuery) is above `threshold` times the median of the OTHER judged
pods' (strictly above; default 4x). Compared with peers rather than a fixed limit, so a
model that is slow everywhere flags nobody. No data: no Prometheus value for the pod,
fewer than MIN_PEERS other pods with one, or idle peers (median 0). Limits:
spec.health.replaceWhen.relativeLatency (default 4x for 10 minutes).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Final

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

MIN_PEERS: Final = 2  # fewer other pods with data make no median worth comparing with


class RelativeLatency(HealthRule):
    name = "RelativeLatency"
    section = "health.replaceWhen.relativeLatency"
    needs = Needs.PROMETHEUS
    query_field = "latencyQuery"

    def limits(self, replace_when: spec.ReplaceWhen) -> Limits:
        return Limits.of(replace_when.relative_latency)

    def query(self, prometheus: spec.Prometheus) -> str | None:
        return prometheus.latency_query

    def check(
        self, observation: MemberObservation, *, peer_latencies: Sequence[float], limits: Limits
    ) -> Check:
        metrics = observation.metrics
        if metrics is None or metrics.latency_s is None or len(peer_latencies) < MIN_PEERS:
            return NO_DATA
        median = statistics.median(peer_latencies)
        if median <= 0:  # idle peers: no basis for "N times slower"
            return NO_DATA
        latency = metrics.latency_s
        if not latency > limits.threshold * median:
            return PASS
        return Check(
            True,
            f"average request time {latency:.3f}s is {latency / median:.1f}x the median "
            f"{median:.3f}s of {len(peer_latencies)} other pods "
            f"(limit {limits.threshold:g}x)",
        )
