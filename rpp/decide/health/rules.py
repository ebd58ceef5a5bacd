"""The health rules: is a pod degraded, and has it been degraded long enough to replace?

Part of decide: pure functions of (thresholds, this loop's observations, the persisted
breach starts, now). No I/O, no clock. The member machine and the pool steps consume
the result: `flagged` rules feed the Ready -> Flagged guard, `breaches` go back to the
member's status record, and `PoolHealth.pool_wide` blocks every replacement.

Each rule looks at one observation and answers breach, pass, or no data:

| rule            | breach (defaults: spec.health.replaceWhen)      | no data when        |
|-----------------|-------------------------------------------------|---------------------|
| Unreachable     | health or metrics probe failed                  | no probe            |
| SlowScrape      | metrics probe answered slower than 2s           | no metrics answer   |
| RelativeLatency | avg request time > 4x median of the OTHER pods  | < 2 peers with data |
| ErrorRate       | 5xx share > 5%                                  | no Prometheus value |
| HostNotice      | machine note or maintenance (hostNotice: true)  | notice unknown      |

Thresholds are strict ("above"): a value exactly at the threshold passes. A breach
starts at the first breaching observation and is persisted per member per rule. A pass
ends it; no data leaves it as it was (neither starts nor ends it), so a Prometheus outage
never resets a pod's clock and never condemns it. A pod is flagged for a rule when this
loop's observation breaches it and `now - start >= duration`: breached continuously for
the full duration, and still in breach on fresh evidence. A HostNotice
without `hostNotice: true` is no breach at all: it is reported (`MemberHealth.notice`)
for the HostNotice condition only.

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
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from rpp.model import spec
from rpp.model.observations import HostNotice, PodMetrics, ProbeResult


class Rule(StrEnum):
    UNREACHABLE = "Unreachable"
    SLOW_SCRAPE = "SlowScrape"
    RELATIVE_LATENCY = "RelativeLatency"
    ERROR_RATE = "ErrorRate"
    HOST_NOTICE = "HostNotice"


MIN_PEERS: Final = 2  # RelativeLatency needs at least this many other pods with data
MIN_PODS_FOR_POOL_WIDE: Final = 2
TOGETHER: Final = dt.timedelta(seconds=60)
"""Breaches that start this close are "together": two loops at the default 30 s interval
(one shared cause reaches every pod within a probe round or two)."""


@dataclass(frozen=True, kw_only=True)
class RuleThresholds:
    """One rule's limit and how long it must be breached; `threshold` unused by some."""

    threshold: float = 0.0
    duration_s: float


@dataclass(frozen=True, kw_only=True)
class HealthThresholds:
    """spec.health.replaceWhen, in seconds and plain numbers."""

    unreachable: RuleThresholds = RuleThresholds(duration_s=120.0)
    slow_scrape: RuleThresholds = RuleThresholds(threshold=2.0, duration_s=600.0)
    relative_latency: RuleThresholds = RuleThresholds(threshold=4.0, duration_s=600.0)
    error_rate: RuleThresholds = RuleThresholds(threshold=0.05, duration_s=300.0)
    host_notice_replaces: bool = False  # a notice flags at once when True

    def duration_s(self, rule: Rule) -> float:
        return {
            Rule.UNREACHABLE: self.unreachable.duration_s,
            Rule.SLOW_SCRAPE: self.slow_scrape.duration_s,
            Rule.RELATIVE_LATENCY: self.relative_latency.duration_s,
            Rule.ERROR_RATE: self.error_rate.duration_s,
            Rule.HOST_NOTICE: 0.0,
        }[rule]


def thresholds_from_spec(health: spec.Health) -> HealthThresholds:
    """Adapter from the pool spec's `health` block."""
    when = health.replace_when
    return HealthThresholds(
        unreachable=RuleThresholds(duration_s=when.unreachable.duration),
        slow_scrape=RuleThresholds(
            threshold=when.slow_scrape.threshold, duration_s=when.slow_scrape.duration
        ),
        relative_latency=RuleThresholds(
            threshold=when.relative_latency.threshold, duration_s=when.relative_latency.duration
        ),
        error_rate=RuleThresholds(
            threshold=when.error_rate.threshold, duration_s=when.error_rate.duration
        ),
        host_notice_replaces=when.host_notice,
    )


@dataclass(frozen=True, kw_only=True)
class MemberObservation:
    """This loop's facts about one pod; None = not known this loop (no data)."""

    probe: ProbeResult | None = None
    metrics: PodMetrics | None = None
    notice: HostNotice | None = None  # HostNotice() with nothing set = known clear


@dataclass(frozen=True, kw_only=True)
class MemberHealth:
    """One pod's judgement this loop."""

    breaches: Mapping[str, dt.datetime]  # rule -> breach start, for rules in breach now
    flagged: tuple[str, ...]  # rules breached for their full duration, in Rule order
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


@dataclass(frozen=True)
class _Check:
    breach: bool | None  # None = no data
    detail: str = ""  # why, for a breach (a pass's detail is never shown)


_PASS = _Check(False)
_NO_DATA = _Check(None)


def judge_member(
    *,
    thresholds: HealthThresholds,
    observation: MemberObservation,
    peer_latencies: Sequence[float],
    breaches: Mapping[str, dt.datetime],
    now: dt.datetime,
) -> MemberHealth:
    """Apply every rule to one pod and carry its breach starts forward."""
    checks = {
        Rule.UNREACHABLE: _unreachable(observation.probe),
        Rule.SLOW_SCRAPE: _slow_scrape(observation.probe, thresholds.slow_scrape),
        Rule.RELATIVE_LATENCY: _relative_latency(
            observation.metrics, peer_latencies, thresholds.relative_latency
        ),
        Rule.ERROR_RATE: _error_rate(observation.metrics, thresholds.error_rate),
    }
    notice = observation.notice
    if thresholds.host_notice_replaces:
        checks[Rule.HOST_NOTICE] = _host_notice(notice)
    new_breaches: dict[str, dt.datetime] = {}
    flagged: list[str] = []
    reasons: dict[str, str] = {}
    for rule, check in checks.items():
        start = breaches.get(rule)
        if check.breach is None:  # no data: a breach under way stays, none starts
            if start is None:
                continue
        elif not check.breach:
            continue
        start = start or now
        new_breaches[rule] = start
        elapsed = (now - start).total_seconds()
        duration = thresholds.duration_s(rule)
        # Flag only on a breach seen this loop: never replace a pod on stale evidence.
        if check.breach and elapsed >= duration:
            flagged.append(rule)
        detail = check.detail or "no data this loop; still in breach since the last data"
        # A rule that flags at once (HostNotice) has no duration worth showing.
        timing = f" (breached {elapsed:.0f}s of {duration:.0f}s)" if duration > 0 else ""
        reasons[rule] = detail + timing
    return MemberHealth(
        breaches=new_breaches,
        flagged=tuple(flagged),
        reasons=reasons,
        notice=notice.describe() if notice is not None and notice.active else None,
    )


def judge_pool(
    *,
    thresholds: HealthThresholds,
    observations: Mapping[str, MemberObservation],
    breaches: Mapping[str, Mapping[str, dt.datetime]],
    ready: Collection[str],
    now: dt.datetime,
    hold_s: float = 1800.0,
    exited: Collection[str] = (),
    flagged: Collection[str] = (),
) -> PoolHealth:
    """Judge every member, then decide whether the trouble is pool-wide.

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
            thresholds=thresholds,
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
    rules = _shared_rules(ready_health.values())
    if not rules:
        return PoolHealth(members=members)
    # The hold began when the last pod joined the earliest shared breach.
    since = min(max(h.breaches[r] for h in ready_health.values()) for r in rules)
    held = (now - since).total_seconds()
    said = f"all {len(ready_health)} Ready pods breached {', '.join(rules)} at once"
    if held < hold_s:
        message = (
            f"{said}; the cause is probably shared (RunPod, the network), so no pod is "
            f"replaced for {_minutes(hold_s - held)} more (health.poolWideHold "
            f"{_minutes(hold_s)})"
        )
        return PoolHealth(members=members, pool_wide=True, pool_wide_rules=rules, message=message)
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
        pool_wide_rules=rules,
        message=message,
        expired=True,
        released=worst,
    )


def _shared_rules(healths: Collection[MemberHealth]) -> tuple[str, ...]:
    """The rules every pod breaches (alike) whose starts lie within TOGETHER (together)."""
    shared = set.intersection(*(set(h.breaches) for h in healths))
    together = []
    for rule in Rule:
        if rule in shared:
            starts = [h.breaches[rule] for h in healths]
            if max(starts) - min(starts) <= TOGETHER:
                together.append(rule.value)
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


def _unreachable(probe: ProbeResult | None) -> _Check:
    if probe is None:
        return _NO_DATA
    if probe.passed:
        return _PASS
    return _Check(True, probe.error or "probe failed")


def _slow_scrape(probe: ProbeResult | None, limit: RuleThresholds) -> _Check:
    # A metrics request that never answered gives no latency: Unreachable covers it.
    if probe is None or probe.metrics_latency_s is None:
        return _NO_DATA
    latency = probe.metrics_latency_s
    if not latency > limit.threshold:
        return _PASS  # the words are for a breach only
    return _Check(True, f"metrics probe took {latency:.2f}s (limit {limit.threshold:g}s)")


def _relative_latency(
    metrics: PodMetrics | None, peers: Sequence[float], limit: RuleThresholds
) -> _Check:
    if metrics is None or metrics.latency_s is None or len(peers) < MIN_PEERS:
        return _NO_DATA
    median = statistics.median(peers)
    if median <= 0:  # idle peers: no basis for "N times slower"
        return _NO_DATA
    latency = metrics.latency_s
    if not latency > limit.threshold * median:
        return _PASS
    return _Check(
        True,
        f"average request time {latency:.3f}s is {latency / median:.1f}x the median "
        f"{median:.3f}s of {len(peers)} other pods (limit {limit.threshold:g}x)",
    )


def _error_rate(metrics: PodMetrics | None, limit: RuleThresholds) -> _Check:
    if metrics is None or metrics.error_ratio is None:
        return _NO_DATA
    ratio = metrics.error_ratio
    if not ratio > limit.threshold:
        return _PASS
    return _Check(
        True,
        # The share is over the query's rate() window, not this instant: say so.
        f"5xx share {ratio:.2%} over errorRatioQuery's window (limit {limit.threshold:.2%})",
    )


def _host_notice(notice: HostNotice | None) -> _Check:
    if notice is None:
        return _NO_DATA
    return _Check(notice.active, f"RunPod host notice: {notice.describe()}")
