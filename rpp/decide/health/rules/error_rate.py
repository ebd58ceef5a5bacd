"""ErrorRate: too large a share of the pod's requests end in a 5xx.

Where it sits: one health rule (rpp/decide/health/rule.py's interface), listed in
rpp/decide/health/registry.py. Breach: the pod's 5xx share (prometheus.errorRatioQuery)
is above the threshold (strictly above; default 5%). No data: no Prometheus value for
the pod. Limits: spec.health.replaceWhen.errorRate (default 5% for 5 minutes).
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


class ErrorRate(HealthRule):
    name = "ErrorRate"
    section = "health.replaceWhen.errorRate"
    needs = Needs.PROMETHEUS
    query_field = "errorRatioQuery"

    def limits(self, replace_when: spec.ReplaceWhen) -> Limits:
        return Limits.of(replace_when.error_rate)

    def query(self, prometheus: spec.Prometheus) -> str | None:
        return prometheus.error_ratio_query

    def check(
        self, observation: MemberObservation, *, peer_latencies: Sequence[float], limits: Limits
    ) -> Check:
        metrics = observation.metrics
        if metrics is None or metrics.error_ratio is None:
            return NO_DATA
        ratio = metrics.error_ratio
        if not ratio > limits.threshold:
            return PASS
        return Check(
            True,
            # The share is over the query's rate() window, not this instant: say so.
            f"5xx share {ratio:.2%} over errorRatioQuery's window (limit {limits.threshold:.2%})",
        )
