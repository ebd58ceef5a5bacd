"""The canary's bake: is the first pod on a new image as good as its peers?

Where it sits: decide, pure. Each loop of a bake, the release step
(rpp/decide/release/steps.py) hands this module the canary's Prometheus values and those of
its peers, the Ready pods still on the old image, read at the same instant from the
pool's own `prometheus.errorRatioQuery`, `latencyQuery` and `requestRateQuery`; `tally`
adds them to the running sums kept in `status.rollout.bake`, and `judge` turns the sums
into a verdict with its numbers. Nothing here reads a clock or a network.

The canary is judged against its peers, not against fixed thresholds, and over the
same window: each loop adds the canary's value and its peers' value of that instant
(their mean error ratio, their median latency) to the two sides' sums. A load spike,
a slow dependency or a quiet night moves both sides alike, so the comparison holds
where a fixed threshold would fire, or stay silent, for the wrong reason.

The verdict, with `rollout.canary` (`CanaryLimits`):

- Failed, by probes: a health rule flagged the canary (Unreachable, SlowScrape...).
- Failed, by metrics: its error ratio is above its peers' by more than
  `maxErrorRatioIncrease`, or its latency above `maxLatencyRatio` times theirs, once
  the evidence is enough: `minRequests` served when requests are counted, else the
  whole bake.
- Baking until `bake` has passed; then Passed, or WaitingForRequests while fewer than
  `minRequests` were counted (the bake goes on until they are).
- Without data for both sides (no queries, no Prometheus, no answers) it is judged by
  probes only, and the verdict says so.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from rpp.model import spec
from rpp.model.observations import PodMetrics
from rpp.model.rollout_records import BakeTally, JudgedBy, Side, Verdict, VerdictResult


@dataclass(frozen=True, kw_only=True)
class CanaryLimits:
    """`spec.rollout.canary` in seconds and plain numbers."""

    bake_s: float = 600.0
    max_error_ratio_increase: float = 0.02
    max_latency_ratio: float = 1.5
    min_requests: int = 100

    @classmethod
    def from_spec(cls, canary: spec.Canary) -> CanaryLimits:
        return cls(
            bake_s=canary.bake,
            max_error_ratio_increase=canary.max_error_ratio_increase,
            max_latency_ratio=canary.max_latency_ratio,
            min_requests=canary.min_requests,
        )


def tally(
    bake: BakeTally, *, canary: PodMetrics | None, peers: Sequence[PodMetrics], now: dt.datetime
) -> BakeTally:
    """The bake's sums with this loop's values added (a loop without data adds nothing).

    The error ratio counts when the canary and at least one peer have one; the latency
    likewise. Requests are each side's rate times the seconds since the last loop.
    """
    changes: dict[str, object] = {"last_at": now, "peers": max(bake.peers, len(peers))}
    since = bake.last_at or bake.started_at
    seconds = max(0.0, (now - since).total_seconds())
    mine = canary or PodMetrics()
    errors = [p.error_ratio for p in peers if p.error_ratio is not None]
    if mine.error_ratio is not None and errors:
        changes["error_loops"] = bake.error_loops + 1
        changes["canary_error_sum"] = bake.canary_error_sum + mine.error_ratio
        changes["peers_error_sum"] = bake.peers_error_sum + statistics.fmean(errors)
    latencies = [p.latency_s for p in peers if p.latency_s is not None]
    if mine.latency_s is not None and latencies:
        changes["latency_loops"] = bake.latency_loops + 1
        changes["canary_latency_sum"] = bake.canary_latency_sum + mine.latency_s
        changes["peers_latency_sum"] = bake.peers_latency_sum + statistics.median(latencies)
    if mine.request_rate is not None:
        changes["canary_requests"] = (bake.canary_requests or 0.0) + mine.request_rate * seconds
    rates = [p.request_rate for p in peers if p.request_rate is not None]
    if rates:
        changes["peers_requests"] = (bake.peers_requests or 0.0) + sum(rates) * seconds
    return bake.replace(**changes)


def sides(bake: BakeTally) -> tuple[Side, Side]:
    """The canary's and its peers' numbers over the window so far."""
    e, lat = bake.error_loops, bake.latency_loops
    canary = Side(
        error_ratio=bake.canary_error_sum / e if e else None,
        latency=bake.canary_latency_sum / lat if lat else None,
        requests=None if bake.canary_requests is None else round(bake.canary_requests),
    )
    peers = Side(
        error_ratio=bake.peers_error_sum / e if e else None,
        latency=bake.peers_latency_sum / lat if lat else None,
        requests=None if bake.peers_requests is None else round(bake.peers_requests),
    )
    return canary, peers


def judge(
    bake: BakeTally,
    *,
    limits: CanaryLimits,
    now: dt.datetime,
    flagged: str | None = None,
    flagged_by: JudgedBy = "probes",
    queries: bool = True,
) -> Verdict:
    """The canary's verdict at `now` (see the module docstring for the rules).

    `flagged` is the health rule (and its reason) that flagged the canary, if one did,
    and `flagged_by` what that rule reads (ErrorRate and RelativeLatency read metrics);
    `queries` is False when the pool sets neither errorRatioQuery nor latencyQuery,
    which only changes how a probes-only verdict explains itself.
    """
    window = max(0.0, (now - bake.started_at).total_seconds())
    canary, peers = sides(bake)

    def verdict(result: VerdictResult, judged_by: JudgedBy, message: str) -> Verdict:
        return Verdict(
            result=result,
            judged_by=judged_by,
            message=message,
            window=round(window),
            canary=canary,
            peers=peers,
        )

    numbers = _numbers(canary, peers, bake=bake, window=window)
    if flagged:
        return verdict(
            VerdictResult.FAILED, flagged_by, f"a health rule flagged it: {flagged}; {numbers}"
        )
    by_metrics = bake.error_loops > 0 or bake.latency_loops > 0
    counted = bake.canary_requests is not None
    failure = _failure(canary, peers, limits=limits)
    enough = (bake.canary_requests or 0.0) >= limits.min_requests if counted else None
    if failure and (enough or (enough is None and window >= limits.bake_s)):
        return verdict(VerdictResult.FAILED, "metrics", f"{failure}; {numbers}")
    bake_text = _minutes(limits.bake_s)
    if window < limits.bake_s:
        left = _minutes(limits.bake_s - window)
        how = "" if by_metrics else f"; {_probes_only(queries)} so far"
        return verdict(
            VerdictResult.BAKING,
            "metrics" if by_metrics else "probes",
            f"baking, {left} of {bake_text} left; {numbers}{how}",
        )
    if not by_metrics:
        return verdict(
            VerdictResult.PASSED,
            "probes",
            f"{_probes_only(queries)}: it passed its probes for the whole {bake_text} bake",
        )
    if enough is False:
        return verdict(
            VerdictResult.WAITING,
            "metrics",
            f"the bake goes on until it has served {limits.min_requests} requests; {numbers}",
        )
    if not counted:
        numbers += " (requests not counted: set prometheus.requestRateQuery to require "
        numbers += "rollout.canary.minRequests)"
    return verdict(VerdictResult.PASSED, "metrics", f"as good as the old pods; {numbers}")


def _failure(canary: Side, peers: Side, *, limits: CanaryLimits) -> str | None:
    """What makes the canary worse than its peers beyond the limits, if anything."""
    found = []
    if canary.error_ratio is not None and peers.error_ratio is not None:
        increase = canary.error_ratio - peers.error_ratio
        if increase > limits.max_error_ratio_increase:
            found.append(
                f"error ratio {canary.error_ratio:.1%} against {peers.error_ratio:.1%} on "
                f"the old pods (+{increase:.1%}, at most +{limits.max_error_ratio_increase:.1%})"
            )
    if canary.latency is not None and peers.latency:
        ratio = canary.latency / peers.latency
        if ratio > limits.max_latency_ratio:
            found.append(
                f"latency {canary.latency:.3g}s against {peers.latency:.3g}s on the old pods "
                f"({ratio:.2f}x, at most {limits.max_latency_ratio:g}x)"
            )
    return " and ".join(found) or None


def _numbers(canary: Side, peers: Side, *, bake: BakeTally, window: float) -> str:
    """`canary 30.0% errors, 0.25s, 40 requests; old pods (2) 0.0% errors, ...; window 10m`."""

    def side(s: Side) -> str:
        parts = [
            "no error ratio" if s.error_ratio is None else f"{s.error_ratio:.1%} errors",
            "no latency" if s.latency is None else f"{s.latency:.3g}s",
            "requests not counted" if s.requests is None else f"{s.requests:g} requests",
        ]
        return ", ".join(parts)

    return (
        f"canary {side(canary)}; old pods ({bake.peers}) {side(peers)}; window {_minutes(window)}"
    )


def _minutes(seconds: float) -> str:
    """570 -> "9m30s", 600 -> "10m", 45 -> "45s": how long, as a person says it."""
    minutes, rest = divmod(round(seconds), 60)
    if not minutes:
        return f"{rest}s"
    return f"{minutes}m{rest:02d}s" if rest else f"{minutes}m"


def _probes_only(queries: bool) -> str:
    if not queries:
        return (
            "judged by probes only (the pool sets no prometheus.errorRatioQuery or latencyQuery)"
        )
    return "judged by probes only (Prometheus had no data for the canary and its peers)"
