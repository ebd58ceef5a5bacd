"""The pool's health judgement for one loop, and the conditions it raises.

Where it sits: decide, between membership and the member machines. It feeds this
loop's probes, Prometheus values and RunPod machine notices to the health rules the
pool's spec switches on (rpp/decide/health/registry.py lists them; pool_wide.py judges,
pure), and turns what the rules cannot see or what they found pool-wide into conditions:

- PrometheusUnavailable: the rules that need Prometheus (those the registry lists with
  `Needs.PROMETHEUS`: RelativeLatency, ErrorRate) are off this loop, because a query
  could not be answered (QueryFailed), or because Prometheus answered without a usable
  value while pods serve in nginx (NoData: a serving pod that Prometheus has no series
  for is not scraped, or the query does not match its metrics). Before any pod serves,
  an empty answer is what a healthy Prometheus gives, so it raises nothing. Missing
  data neither starts nor ends a breach, so nobody is flagged for Prometheus' trouble.
- PoolWideDegradation: every Ready pod is degraded alike and together; nothing is
  replaced for health.poolWideHold, then the worst pod is (with an Event, once).
- HostNotice: RunPod has a note or maintenance window on a pool pod's machine.
"""

from __future__ import annotations

import datetime as dt

from rpp.decide.health.pool_wide import PoolHealth, judge_pool
from rpp.decide.health.registry import RULES, active_rules
from rpp.decide.health.rule import MemberObservation, Needs
from rpp.decide.state.conditions import Cond, Conditions
from rpp.model.effects import RecordEvent
from rpp.model.members import Phase
from rpp.model.observations import HostNotice, PodStatus, PoolObservation
from rpp.model.spec import RunPodPoolSpec
from rpp.model.status import PoolStatus

# Phases whose pods the health rules judge (a warming pod has its warm-up timeout).
JUDGED = frozenset({Phase.READY, Phase.FLAGGED})
_CLEAR = HostNotice()  # a pod RunPod has no notice for (known clear)
# What RunPod says of a pod that no shared cause explains: it stopped on its own or is gone.
_EXITED = frozenset({PodStatus.EXITED, PodStatus.ERROR, PodStatus.TERMINATED})
HOLD_EXPIRED = "HoldExpired"
"""PoolWideDegradation's reason once health.poolWideHold ran out and the worst pod is
being replaced."""


def judge(
    *,
    spec: RunPodPoolSpec,
    status: PoolStatus,
    obs: PoolObservation,
    now: dt.datetime,
    conds: Conditions,
) -> PoolHealth:
    _prometheus_condition(spec=spec, status=status, obs=obs, conds=conds)
    reading = obs.prometheus
    judged = [m for m in status.members if m.phase in JUDGED]
    observations = {
        m.pod_id: MemberObservation(
            probe=obs.probes.get(m.pod_id),
            metrics=reading.per_pod.get(m.pod_id),
            notice=None if obs.notices is None else obs.notices.get(m.pod_id, _CLEAR),
        )
        for m in judged
    }
    # An unlisted pod is gone; with no listing at all nobody is known gone.
    listed = {p.id: p.status for p in obs.pods or ()}
    gone = PodStatus.TERMINATED if obs.pods is not None else PodStatus.RUNNING
    health = judge_pool(
        rules=active_rules(spec.health.replace_when),
        observations=observations,
        breaches={m.pod_id: m.breaches for m in judged},
        ready=[m.pod_id for m in judged if m.phase == Phase.READY],
        now=now,
        hold_s=spec.health.pool_wide_hold,
        exited=[m.pod_id for m in judged if listed.get(m.pod_id, gone) in _EXITED],
        flagged=[m.pod_id for m in judged if m.phase == Phase.FLAGGED],
    )
    if health.pool_wide:
        conds.set(
            Cond.POOL_WIDE,
            true=True,
            reason=HOLD_EXPIRED
            if health.expired
            else ",".join(health.pool_wide_rules) or "Degraded",
            message=health.message or "every Ready pod is degraded",
        )
    else:
        conds.clear(
            Cond.POOL_WIDE,
            reason="NotPoolWide",
            message="not every Ready pod is degraded alike and together",
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


def hold_expired_event(before: PoolStatus, health: PoolHealth) -> RecordEvent | None:
    """The one Event for the end of the hold: the loop its worst pod is released."""
    was = before.condition(Cond.POOL_WIDE.value)
    if health.released is None or (was is not None and was.reason == HOLD_EXPIRED):
        return None
    return RecordEvent(
        type="Warning",
        reason="PoolWideHoldExpired",
        message=health.message or f"replacing the worst pod {health.released}",
        pod_id=health.released,
    )


def _prometheus_condition(
    *, spec: RunPodPoolSpec, status: PoolStatus, obs: PoolObservation, conds: Conditions
) -> None:
    """PrometheusUnavailable: QueryFailed, NoData, or cleared (see the module docstring)."""
    reading = obs.prometheus
    wants = [
        f"{rule.query_field} ({rule.name})"
        for rule in RULES
        if rule.needs is Needs.PROMETHEUS and rule.query(spec.prometheus)
    ]
    if spec.prometheus.request_rate_query:
        wants.append("requestRateQuery (the canary's request count)")
    # The autoscaler reports its own query (AutoscalingMetricUnavailable).
    problems = [p for p in reading.problems if not p.startswith("autoscaling.")]
    failed = [p for p in problems if p.split(":", 1)[0] not in reading.no_data]
    # The pods in nginx slots are Prometheus' scrape targets (/sd/<pool>).
    serving = sorted(m.pod_id for m in status.members if m.slot is not None)
    off = f"the rules that need {', '.join(wants)} are off this loop"
    if wants and failed:
        conds.set(
            Cond.PROMETHEUS_UNAVAILABLE,
            true=True,
            reason="QueryFailed",
            message=f"{'; '.join(problems)}; {off}",
        )
    elif wants and problems and serving:
        said = "; ".join(p.removesuffix(" is off this loop").rsplit("; ", 1)[0] for p in problems)
        conds.set(
            Cond.PROMETHEUS_UNAVAILABLE,
            true=True,
            reason="NoData",
            message=f"Prometheus answered, but {said}, while "
            f"{len(serving)} pod(s) serve in nginx ({', '.join(serving)}): check that "
            "Prometheus scrapes the /sd/<pool> targets and that the query matches the pods' "
            f"metrics and keeps the runpod_pod label; {off}",
        )
    elif wants and problems:
        conds.clear(
            Cond.PROMETHEUS_UNAVAILABLE,
            reason="NothingServes",
            message="no pod serves in nginx, so Prometheus has no series for the pool yet",
        )
    else:
        conds.clear(Cond.PROMETHEUS_UNAVAILABLE, reason="Answered", message="Prometheus answered")
