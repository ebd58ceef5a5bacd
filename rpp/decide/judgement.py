"""The pool's health judgement for one loop, and the conditions it raises.

Where it sits: decide, between membership and the member machines. It feeds this
loop's probes, Prometheus values and RunPod machine notices to the health rules
(rpp/decide/health.py, pure), and turns what the rules cannot see or what they found
pool-wide into conditions:

- PrometheusUnavailable: a query the pool configures could not be answered, so the
  rules that need it (RelativeLatency, ErrorRate) are off this loop; missing data
  neither starts nor ends a breach, so nobody is flagged for Prometheus' trouble.
- PoolWideDegradation: every Ready pod is degraded at once; nothing is replaced.
- HostNotice: RunPod has a note or maintenance window on a pool pod's machine.
"""

from __future__ import annotations

import datetime as dt

from rpp.decide.conditions import Cond, Conditions
from rpp.decide.health import MemberObservation, PoolHealth, judge_pool, thresholds_from_spec
from rpp.model.members import Phase
from rpp.model.observations import HostNotice, PoolObservation
from rpp.model.spec import RunPodPoolSpec
from rpp.model.status import PoolStatus

# Phases whose pods the health rules judge (a warming pod has its warm-up timeout).
JUDGED = frozenset({Phase.READY, Phase.FLAGGED})


def judge(
    *,
    spec: RunPodPoolSpec,
    status: PoolStatus,
    obs: PoolObservation,
    now: dt.datetime,
    conds: Conditions,
) -> PoolHealth:
    reading = obs.prometheus
    wants = [
        name
        for name, query in (
            ("latencyQuery (RelativeLatency)", spec.prometheus.latency_query),
            ("errorRatioQuery (ErrorRate)", spec.prometheus.error_ratio_query),
        )
        if query
    ]
    # The autoscaler reports its own query (AutoscalingMetricUnavailable).
    health_problems = [p for p in reading.problems if not p.startswith("autoscaling.")]
    if wants and health_problems:
        why = "; ".join(health_problems)
        conds.set(
            Cond.PROMETHEUS_UNAVAILABLE,
            true=True,
            reason="QueryFailed",
            message=f"{why}; the rules that need {', '.join(wants)} are off this loop",
        )
    else:
        conds.clear(Cond.PROMETHEUS_UNAVAILABLE, reason="Answered", message="Prometheus answered")
    judged = [m for m in status.members if m.phase in JUDGED]
    observations = {
        m.pod_id: MemberObservation(
            probe=obs.probes.get(m.pod_id),
            metrics=reading.per_pod.get(m.pod_id),
            notice=None if obs.notices is None else obs.notices.get(m.pod_id, HostNotice()),
        )
        for m in judged
    }
    health = judge_pool(
        thresholds=thresholds_from_spec(spec.health),
        observations=observations,
        breaches={m.pod_id: m.breaches for m in judged},
        ready=[m.pod_id for m in judged if m.phase == Phase.READY],
        now=now,
    )
    if health.pool_wide:
        conds.set(
            Cond.POOL_WIDE,
            true=True,
            reason=",".join(health.pool_wide_rules) or "Degraded",
            message=health.message or "every Ready pod is degraded",
        )
    else:
        conds.clear(
            Cond.POOL_WIDE, reason="NotPoolWide", message="not every Ready pod is degraded"
        )
    if obs.notices is not None:
        noticed = {pod: h.notice for pod, h in health.members.items() if h.notice}
        if noticed:
            action = (
                "they are replaced (health.replaceWhen.hostNotice: true)"
                if spec.health.replace_when.host_notice
                else "set health.replaceWhen.hostNotice: true to replace such pods, or "
                "replace them by terminating them in the RunPod console"
            )
            listing = "; ".join(f"{pod}: {text}" for pod, text in sorted(noticed.items()))
            conds.set(
                Cond.HOST_NOTICE,
                true=True,
                reason="MachineNotice",
                message=f"RunPod has a notice on the machine of {len(noticed)} pod(s): "
                f"{listing}; {action}",
            )
        else:
            conds.clear(Cond.HOST_NOTICE, reason="NoNotice", message="no machine notice")
    return health
