"""The `size` step: the autoscaler, HPA-style, on one Prometheus value per loop.

Where it sits: decide, before the pool steps that create and shrink, because it sets
the size they aim for. Each loop the pool's autoscaling.query gives one value (e.g. the
average queue per pod). The recommendation is ceil(ready pods x value / target),
clamped to [replicas.min, replicas.max], and the current size while the value is
within 10% of the target, as an HPA does.

Stabilization: the pool grows only when every recommendation over
scaleUpStabilization is above the current size, to the lowest of them (a new pod takes
minutes, a shorter spike is not worth one); it shrinks to the highest recommendation
over scaleDownStabilization, one pod at a time through the drain (pool steps). A window
counts only once it is covered: the recommendation in force at its start is kept with
the ones inside it, so a controller that just started, or restarted, does not act on a
single sample. Everything is in status.autoscaling (value, size, recommendations with
their times), so a restart keeps both windows.

Without a value (no Prometheus, no data) the size stays put and
AutoscalingMetricUnavailable says why.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass

from rpp.model.records import Autoscaling, Recommendation
from rpp.model.spec import RunPodPoolSpec
from rpp.model.status import PoolStatus

TOLERANCE = 0.1


@dataclass(frozen=True)
class Scaling:
    """The size this loop aims for, the status to keep, and why (for the condition)."""

    size: int
    status: PoolStatus
    unavailable: str | None = None  # why there is no value this loop
    note: str = ""


def recommend(*, ready: int, value: float, target: float, current: int, lo: int, hi: int) -> int:
    """ceil(ready x value / target) clamped to [lo, hi]; `current` within tolerance."""
    if ready <= 0:
        return current
    ratio = value / target
    if abs(ratio - 1.0) <= TOLERANCE:
        return max(lo, min(hi, current))
    return max(lo, min(hi, math.ceil(ready * ratio)))


def _window(
    recs: Sequence[Recommendation], now: dt.datetime, seconds: float
) -> list[Recommendation] | None:
    """The recommendations in force over the last `seconds`, or None if not covered yet."""
    start = now - dt.timedelta(seconds=seconds)
    inside = [r for r in recs if r.time > start]
    before = [r for r in recs if r.time <= start]
    if not before:
        return None
    return [before[-1], *inside]


def scale(
    *, spec: RunPodPoolSpec, status: PoolStatus, value: float | None, ready: int, now: dt.datetime
) -> Scaling:
    """The pool's size for this loop (replicas.min when autoscaling is off)."""
    cfg, replicas = spec.autoscaling, spec.replicas
    if not cfg.enabled:
        return Scaling(replicas.min, status.replace(autoscaling=None))
    current_state = status.autoscaling or Autoscaling()
    current = max(replicas.min, min(replicas.max, current_state.size or replicas.min))
    keep_s = max(cfg.scale_up_stabilization, cfg.scale_down_stabilization)
    recs = list(current_state.recommendations)
    if value is None or math.isnan(value):
        kept = current_state.replace(value=None, size=current)
        return Scaling(current, status.replace(autoscaling=kept), unavailable="no value")
    rec = recommend(
        ready=ready,
        value=value,
        target=cfg.target,
        current=current,
        lo=replicas.min,
        hi=replicas.max,
    )
    recs.append(Recommendation(time=now, size=rec))
    up = _window(recs, now, cfg.scale_up_stabilization)
    down = _window(recs, now, cfg.scale_down_stabilization)
    size, note = current, ""
    if up is not None and all(r.size > current for r in up):
        size = min(r.size for r in up)
        note = (
            f"grow to {size}: every recommendation for {cfg.scale_up_stabilization:g}s is higher"
        )
    elif down is not None and max(r.size for r in down) < current:
        size = max(r.size for r in down)
        note = (
            f"shrink to {size}: the highest recommendation for {cfg.scale_down_stabilization:g}s"
        )
    # Keep the window plus the recommendation in force at its start.
    older = [r for r in recs if (now - r.time).total_seconds() >= keep_s]
    recent = [r for r in recs if (now - r.time).total_seconds() < keep_s]
    kept_recs = tuple(older[-1:] + recent)
    autoscaling = Autoscaling(value=value, size=size, recommendations=kept_recs)
    return Scaling(size, status.replace(autoscaling=autoscaling), note=note)
