"""Unreachable: the pod's health or metrics probe failed.

Where it sits: one health rule (rpp/decide/health/rule.py's interface), listed in
rpp/decide/health/registry.py. Breach: the health or the metrics probe failed, with the
probe's error as the reason. No data: no probe this loop. Limits:
spec.health.replaceWhen.unreachable (duration only; default 2 minutes).

The member machine also unwires a pod at once when its probes fail hard (quarantine,
rpp/machines/member.py); this rule is what gets it replaced.
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


class Unreachable(HealthRule):
    name = "Unreachable"
    section = "health.replaceWhen.unreachable"
    needs = Needs.PROBE

    def limits(self, replace_when: spec.ReplaceWhen) -> Limits:
        return Limits(duration_s=replace_when.unreachable.duration)

    def check(
        self, observation: MemberObservation, *, peer_latencies: Sequence[float], limits: Limits
    ) -> Check:
        probe = observation.probe
        if probe is None:
            return NO_DATA
        if probe.passed:
            return PASS
        return Check(True, probe.error or "probe failed")
