"""One fake inference process's metrics, and its /metrics page rendered only as it changes.

Where it sits: outside observe -> decide -> act, inside the fake inference pod
(rpp/sim/inference.py), which counts its requests here and serves `page()` on its metrics
path. The prober reads that page every loop, and the simulator probes every pod every
loop while app traffic moves the counters in between: prometheus_client's
`generate_latest` re-rendered the whole page each time, 12 s of a simulated day of 10
pods. So the page is kept as text, one part per metric family, and a part is written
again only when its values changed; each sample line's name and labels are written once
per process, and only its value is formatted again, with prometheus_client's own
`floatToGoString`.

The page is what prometheus_client's `generate_latest` renders for the same values, byte
for byte (tests/sim/test_pod_metrics.py renders both after the same requests): a counter of
requests, one of 5xx answers, a request-duration histogram, an in-flight gauge, each
counter and the histogram with its `*_created` sample, and `process_start_time_seconds`.
Every `*_created` sample is the process start, which is what a restarted process shows
and what restart detection reads (rpp/observe/metrics_text.py). A restart is a new
`ProcessMetrics`, as it is a new process.
"""

from __future__ import annotations

import functools
from bisect import bisect_left
from collections.abc import Callable
from typing import cast

from prometheus_client import utils

# prometheus_client's own number format ("3.0", "1.7672256e+09", "+Inf"); it is untyped.
# Kept per value: a page is mostly the same few counts (the histogram's buckets).
_go = functools.lru_cache(maxsize=4096)(cast(Callable[[float], str], utils.floatToGoString))

# Buckets around what the health rules care about: tens of ms to tens of seconds.
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

START = "process_start_time_seconds"
REQUESTS = "app_requests"
FAILED = "app_requests_failed"
DURATION = "app_request_duration_seconds"
QUEUE = "app_queue_length"

HELP = {
    START: "Start time of the process.",
    REQUESTS: "App requests served.",
    FAILED: "App requests answered with a 5xx.",
    DURATION: "Time to answer an app request.",
    QUEUE: "App requests in flight.",
}


def _header(name: str, kind: str, help_text: str) -> str:
    return f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n"


class ProcessMetrics:
    """The counters of one process, and its metrics page (`page`), kept up to date."""

    def __init__(self, *, start: float) -> None:
        self.start = start
        self.requests = 0
        self.failed = 0
        self.in_flight = 0
        self.bucket_counts = [0] * (len(LATENCY_BUCKETS) + 1)  # the last one is +Inf
        self.duration_sum = 0.0
        created = _go(start)
        self._bucket_prefixes = [
            f'{DURATION}_bucket{{le="{_go(bound)}"}} '
            for bound in (*LATENCY_BUCKETS, float("inf"))
        ]
        # The families' text in page order; None where a count moved since the last page.
        self._parts: dict[str, str | None] = {
            START: _header(START, "gauge", HELP[START]) + f"{START} {created}\n",
            REQUESTS: None,
            FAILED: None,
            DURATION: None,
            QUEUE: None,
        }
        self._created = {
            name: _header(f"{name}_created", "gauge", HELP[name]) + f"{name}_created {created}\n"
            for name in (REQUESTS, FAILED, DURATION)
        }
        self._page: bytes | None = None

    # -- counting (what the service does as it serves) ----------------------------------

    def started(self) -> None:
        """A request came in: one more in flight."""
        self.in_flight += 1
        self._changed(QUEUE)

    def left(self) -> None:
        """A request is no longer in flight (answered, or given up by its client)."""
        self.in_flight -= 1
        self._changed(QUEUE)

    def answered(self, *, duration: float) -> None:
        """A request ended after `duration` seconds (counted and timed)."""
        self.requests += 1
        # The histogram counts an observation in the first bucket whose bound is >= it.
        self.bucket_counts[bisect_left(LATENCY_BUCKETS, duration)] += 1
        self.duration_sum += duration
        self._changed(REQUESTS, DURATION)

    def errored(self) -> None:
        """A request was answered with a 5xx."""
        self.failed += 1
        self._changed(FAILED)

    def _changed(self, *families: str) -> None:
        for family in families:
            self._parts[family] = None
        self._page = None

    # -- the page ------------------------------------------------------------------------

    def page(self) -> bytes:
        """The metrics page now: the parts that changed are written again, the rest kept."""
        if self._page is None:
            parts = self._parts
            for family, text in parts.items():
                if text is None:
                    parts[family] = self._render(family)
            self._page = "".join(text or "" for text in parts.values()).encode()
        return self._page

    def _render(self, family: str) -> str:
        if family == REQUESTS:
            return self._counter(REQUESTS, self.requests)
        if family == FAILED:
            return self._counter(FAILED, self.failed)
        if family == QUEUE:
            value = _go(self.in_flight)
            return _header(QUEUE, "gauge", HELP[QUEUE]) + f"{QUEUE} {value}\n"
        return self._histogram()

    def _counter(self, name: str, value: int) -> str:
        total = f"{name}_total"
        text = _header(total, "counter", HELP[name]) + f"{total} {_go(value)}\n"
        return text + self._created[name]

    def _histogram(self) -> str:
        lines = [_header(DURATION, "histogram", HELP[DURATION])]
        cumulative = 0
        for prefix, count in zip(self._bucket_prefixes, self.bucket_counts, strict=True):
            cumulative += count
            lines.append(f"{prefix}{_go(cumulative)}\n")
        lines.append(f"{DURATION}_count {_go(cumulative)}\n")
        lines.append(f"{DURATION}_sum {_go(self.duration_sum)}\n")
        lines.append(self._created[DURATION])
        return "".join(lines)
