"""What the RunPod client counts: `runpod_pool_runpod_api_calls_total{operation, outcome}`
and `runpod_pool_runpod_unreadable_pods`, the odd pods of the last listing.

Why a module of its own, in the adapter: only the RunPod client sees each request (and
each retry), so it counts them itself; the pool series are set elsewhere, from the
status a reconcile wrote (rpp/controller/pool_metrics.py). Like every metric, its name,
labels and help are defined once, in rpp/model/metric_names.py.

Every HTTP request the client sends to RunPod (each retry attempt is a request) is
counted once, labelled with the OpenAPI operationId (`listPods`, `createPod`, ...,
`hostNotices` for the GraphQL query) and the `CallOutcome` it ended in. A rate-limit wait
the client serves locally, without a request, is not a call and is not counted.

A listing's pods with fields the client could not read (issue 15: one foreign pod
with `gpu.count: "two"` once stopped every pool) are skipped by every pool that does
not own them; the gauge says how many there were, so they are seen, not silent.

The metrics live in a `CollectorRegistry`: the global one in the controller, a fresh
one per test. prometheus_client refuses to register one metric name twice in a
registry, so one set is created per registry and shared by every client using it.
"""

from __future__ import annotations

import threading
import weakref

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge

from rpp.adapters.runpod.answers import CallOutcome
from rpp.model import metric_names

METRIC = metric_names.BY_NAME[metric_names.RUNPOD_API_CALLS_TOTAL]
UNREADABLE = metric_names.BY_NAME[metric_names.RUNPOD_UNREADABLE_PODS]

_lock = threading.Lock()
_metrics: weakref.WeakKeyDictionary[CollectorRegistry, tuple[Counter, Gauge]] = (
    weakref.WeakKeyDictionary()
)


class ApiCallMetrics:
    """Counts RunPod API calls by operation and outcome, and odd listed pods, in one
    registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        target = REGISTRY if registry is None else registry
        with _lock:
            found = _metrics.get(target)
            if found is None:
                found = (
                    Counter(METRIC.name, METRIC.help, METRIC.labels, registry=target),
                    Gauge(UNREADABLE.name, UNREADABLE.help, UNREADABLE.labels, registry=target),
                )
                _metrics[target] = found
        self._counter, self._unreadable = found
        self._registry = target

    def record(self, operation: str, outcome: CallOutcome) -> None:
        self._counter.labels(operation=operation, outcome=outcome.value).inc()

    def unreadable_pods(self, count: int) -> None:
        """The odd pods of the listing just read (skipped, or marked unreadable)."""
        self._unreadable.set(count)

    def value(self, operation: str, outcome: CallOutcome) -> float:
        """The current count; for tests and the simulator's reports."""
        labels = {"operation": operation, "outcome": outcome.value}
        return self._registry.get_sample_value(METRIC.name, labels) or 0.0
