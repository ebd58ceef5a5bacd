"""HostNotice: RunPod has a note or a maintenance window on the pod's machine.

Where it sits: one health rule (rpp/decide/health/rule.py's interface), listed in
rpp/decide/health/registry.py. On only with spec.health.replaceWhen.hostNotice: true,
and then it flags at once (no duration: the machine will not get better by waiting).
Breach: an active notice, described as RunPod gave it. No data: RunPod's notices were
not read this loop. Off, a notice is no breach at all: rpp/decide/health/judgement.py
still reports it in the HostNotice condition.
"""

from __future__ import annotations

from collections.abc import Sequence

from rpp.decide.health.rule import (
    NO_DATA,
    Check,
    HealthRule,
    Limits,
    MemberObservation,
    Needs,
)
from rpp.model import spec


class HostNotice(HealthRule):
    name = "HostNotice"
    section = "health.replaceWhen.hostNotice"
    needs = Needs.RUNPOD_NOTICE

    def limits(self, replace_when: spec.ReplaceWhen) -> Limits | None:
        return Limits(duration_s=0.0) if replace_when.host_notice else None

    def check(
        self, observation: MemberObservation, *, peer_latencies: Sequence[float], limits: Limits
    ) -> Check:
        notice = observation.notice
        if notice is None:
            return NO_DATA
        return Check(notice.active, f"RunPod host notice: {notice.describe()}")
