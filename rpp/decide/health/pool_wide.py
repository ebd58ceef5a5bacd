"""Judging the rules: each pod's breaches and flags, then whether the pool as a whole
is degraded (PoolWideDegradation).

Where it sits: decide, in the health concern, over the registry of rules
(rpp/decide/health/registry.py) and under the `judge` step (judgement.py). Pure
functions of (the active rules, this loop's observations, the persisted breach
starts, now). The member machine and the pool steps consume the result: `flagged`
rules feed the Ready -> Flagged guard, `breaches` go back to the member's status
record, and `PoolHealth.pool_wide` blocks every replacement. Nothing here names a
rule: it applies whichever rules it is given, in the order given.

Each rule looks at one observation and answers breach, pass, or no data (each rule's
file says when). Thresholds are strict ("above"): a value exactly at the threshold
passes. A breach starts at the first breaching observation and is persisted per member
per rule. A pass ends it; no data leaves it as it was (neither starts nor ends it), so a
Prometheus outage never resets a pod's clock and never condemns it. A pod is flagged for
a rule when this loop's observation breaches it and `now - start >= duration`: breached
continuously for the full duration, and still in breach on fresh evidence. A rule the
spec switches off (HostNotice without `hostNotice: true`) is not judged at all, and a
breach it had is dropped; a host notice is still reported (`MemberHealth.notice`) for
the HostNotice condition.

Degraded means at least one rule is in breach now, whether or not for its full duration.
That is what PoolWideDegradation counts: when every Ready pod (at least two: one pod
alone says nothing about a shared cause) is degraded, alike (a rule they all breach) and
together (their breaches of it started within `TOGETHER` of each other), and RunPod
reports none of them exited or failed, the cause is probably shared (RunPod, the
network) and nothing is replaced. Breaches minutes apart, or of different rules, are
independent failures, each replaced on its own. The hold is bounded: once it has lasted
`health.poolWideHold` (counted from the persisted breach starts, so it survives a
restart), the worst pod is released to its replacement; when that replacement passes
its probes, not every Ready pod is degraded any more and the hold ends for every pod.
"""

from __future__ import annotations

import bisect
import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from rpp.decide.health.rule import ActiveRule, MemberObservation

MIN_PODS_FOR_POOL_WIDE: Final = 2
TOGETHER: Final = dt.timedelta(seconds=60)
"""Breaches that start this close are "together": two loops at the default 30 s interval
(one shared cause reaches every pod within a probe round or two)."""


@dataclass(frozen=True, kw_only=True)
class MemberHealth:
    """One pod's judgement this loop."""

    breaches: Mapping[str, dt.datetime]  # rule -> breach start, for rules in breach now
    flagged: tuple[str, ...]  # rules breached for their full duration, in the rules' order
    reasons: Mapping[str, str]  # rule -> human text, for rules in breach now
    notice: str | None = None  # the active host notice, for the HostNotice condition

    @property
    def degraded(self) -> bool:
        return bool(self.breaches)


@dataclass(frozen=True, kw_only=True)
class PoolHealth:
    members: Mapping[str, MemberHealth]
    pool_wide: bool = False
    pool_wide_rules: tuple[str, ...] = ()
    message: str | None = None  # the PoolWideDegradation condition's message
    expired: bool = False  # the hold ran out: one pod, the worst, is being replaced
    released: str | None = None  # the worst pod, let go this loop

    def holds(self, pod_id: str) -> bool:
        """PoolWideDegradation keeps this pod from being flagged or unwired."""
        return self.pool_wide and pod_id != self.released

    @property
    def blocks_replacement(self) -> bool:
        """No replacement at all: the hold has not run out yet."""
        return self.pool_wide and not self.expired


def judge_member(
    *,
    rules: Sequence[ActiveRule],
    observation: MemberObservation,
    peer_latencies: Sequence[float],
    breaches: Mapping[str, dt.datetime],
    now: dt.datetime,
) -> MemberHealth:
    """Apply every active rule to one pod and carry its breach starts forward."""
    new_breaches: dict[str, dt.datetime] = {}
    flagged: list[str] = []
    reasons: dict[str, str] = {}
    for active in rules:
        rule = active.rule.name
        check = active.rule.check(observation, peer_latencies=peer_latencies, limits=active.limits)
        start = breaches.get(rule)
        if check.breach is None:  # no data: a breach under way stays, none starts
            if start is None:
                continue
        elif not check.breach:
            continue
        start = start or now
        new_breaches[rule] = start
        elapsed = (now - start).total_seconds()
        duration = active.limits.duration_s
        # Flag only on a breach seen this loop: never replace a pod on stale evidence.
        if check.breach and elapsed >= duration:
            flagged.append(rule)
        detail = check.detail or "no data this loop; still in breach since the last data"
        # A rule that flags at once (HostNotice) has no duration worth showing.
        timing = f" (breached {elapsed:.0f}s of {duration:.0f}s)" if duration > 0 else ""
        reasons[rule] = detail + timing
    notice = observation.notice
    return MemberHealth(
        breaches=new_breaches,
        flagged=tuple(flagged),
        reasons=reasons,
        notice=notice.describe() if notice is not None and notice.active else None,
    )


def judge_pool(
    *,
    rules: Sequence[ActiveRule],
    observations: Mapping[str, MemberObservation],
    breaches: Mapping[str, Mapping[str, dt.datetime]],
    ready: Collection[str],
    now: dt.datetime,
    hold_s: float = 1800.0,
    exited: Collection[str] = (),
    flagged: Collection[str] = (),
) -> PoolHealth:
    """Judge every member, then decide whether the trouble is pool-wide.

    `rules` are the rules the pool's spec switches on (registry.active_rules);
    `observations` holds the members the rules apply to (they are also each other's
    peers for RelativeLatency); `ready` names the Ready ones, which PoolWideDegradation
    counts; `exited` the pods RunPod reports exited, failed or gone (never a shared
    cause's doing as far as the pool can tell); `hold_s` is health.poolWideHold;
    `flagged` the members already flagged: once the hold ran out, one of them is the
    worst pod on its way out, and no other is let go meanwhile.
    """
    latencies = {
        pod: o.metrics.latency_s
        for pod, o in observations.items()
        if o.metrics is not None and o.metrics.latency_s is not None
    }
    # Finite, so they sort: observe keeps no NaN or infinite value (rpp/observe/prometheus.py).
    ordered = sorted(latencies.values())
    members = {
        pod: judge_member(
            rules=rules,
            observation=observation,
            peer_latencies=_without(ordered, latencies.get(pod)),
            breaches=breaches.get(pod, {}),
            now=now,
        )
        for pod, observation in observations.items()
    }
    ready_health = {p: members[p] for p in sorted(ready) if p in members}
    if (
        len(ready_health) < MIN_PODS_FOR_POOL_WIDE
        or not all(h.degraded for h in ready_health.values())
        or any(p in exited for p in ready_health)
    ):
        return PoolHealth(members=members)
    shared = _shared_rules(ready_health.values(), order=[a.rule.name for a in rules])
    if not shared:
        return PoolHealth(members=members)
    # The hold began when the last pod joined the earliest shared breach.
    since = min(max(h.breaches[r] for h in ready_health.values()) for r in shared)
    held = (now - since).total_seconds()
    said = f"all {len(ready_health)} Ready pods breached {', '.join(shared)} at once"
    if held < hold_s:
        message = (
            f"{said}; the cause is probably shared (RunPod, the network), so no pod is "
            f"replaced for {_minutes(hold_s - held)} more (health.poolWideHold "
            f"{_minutes(hold_s)})"
        )
        return PoolHealth(members=members, pool_wide=True, pool_wide_rules=shared, message=message)
    leaving = sorted(flagged)
    worst = None if leaving else min(ready_health, key=lambda p: _badness(ready_health[p], p))
    message = (
        f"{said}, for {_minutes(held)}, past health.poolWideHold ({_minutes(hold_s)}): "
        f"the worst pod {worst or ', '.join(leaving)} is replaced; once its replacement "
        "passes its probes the cause was not shared and the other pods are replaced as "
        "they are due"
    )
    return PoolHealth(
        members=members,
        pool_wide=True,
        pool_wide_rules=shared,
        message=message,
        expired=True,
        released=worst,
    )


def _shared_rules(healths: Collection[MemberHealth], *, order: Sequence[str]) -> tuple[str, ...]:
    """The rules every pod breaches (alike) whose starts lie within TOGETHER (together),
    in the rules' order."""
    shared = set.intersection(*(set(h.breaches) for h in healths))
    together = []
    for rule in order:
        if rule in shared:
            starts = [h.breaches[rule] for h in healths]
            if max(starts) - min(starts) <= TOGETHER:
                together.append(rule)
    return tuple(together)


def _badness(health: MemberHealth, pod_id: str) -> tuple[int, int, dt.datetime, str]:
    """Sorts the worst pod first: more rules due, more in breach, the oldest breach."""
    return (-len(health.flagged), -len(health.breaches), min(health.breaches.values()), pod_id)


def _minutes(seconds: float) -> str:
    return f"{max(seconds, 0.0) / 60:.0f}m"


def _without(ordered: list[float], value: float | None) -> list[float]:
    """The sorted latencies without one occurrence of the pod's own: its peers' latencies.

    Sliced from one sorted list per loop instead of filtered from the pool's map per pod.
    """
    if value is None:
        return ordered
    at = bisect.bisect_left(ordered, value)
    return ordered[:at] + ordered[at + 1 :]
