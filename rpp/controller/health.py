"""Whether the controller loop keeps completing: the answer /healthz gives.

Where it sits: the controller, beside the loop. The loop (rpp/controller/loop.py)
records here when it starts and stops leading, when a loop completes or fails, and
which pools are reconciling; the HTTP API (rpp/controller/http_api.py) asks `stalled`
on every /healthz. A replica that leads but has not completed a loop for longer than
its allowance answers 503 with the reason, so Kubernetes restarts a controller that is
stuck rather than one that is merely busy. A standby has nothing to complete and is
always healthy.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LoopProgress:
    """What the loop did last, on the event loop's clock (seconds)."""

    leading_since: float | None = None
    completed_at: float | None = None
    last_error: str | None = None
    busy: dict[str, float] = field(default_factory=dict)
    """Pools reconciling now, and since when."""

    def started_leading(self, now: float) -> None:
        self.leading_since = now

    def stopped_leading(self) -> None:
        self.leading_since = None

    def completed(self, now: float) -> None:
        self.completed_at = now
        self.last_error = None

    def stalled(self, *, now: float, interval: float, allowed: float) -> str | None:
        """None while the loop completes on time; otherwise why it does not."""
        if self.leading_since is None:
            return None  # standby: nothing to complete
        last = max(self.completed_at or self.leading_since, self.leading_since)
        if (late := now - last) <= allowed:
            return None
        parts = [
            f"the reconcile loop has not completed for {late:.0f}s "
            f"(interval {interval:g}s, allowed {allowed:g}s)"
        ]
        if self.busy:
            busy = ", ".join(f"{n} for {now - t:.0f}s" for n, t in sorted(self.busy.items()))
            parts.append(f"still reconciling {busy}")
        if self.last_error:
            parts.append(f"last error: {self.last_error}")
        return "; ".join(parts)
