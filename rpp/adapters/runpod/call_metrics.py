"""The RunPod API-call counter: `runpod_pool_runpod_api_calls_total{operation, outcome}`.

Why a module of its own, in the adapter: only the RunPod client sees each request (and
each retry), so it counts them itself; the pool series are set elsewhere, from the
status a reconcile wrote (rpp/controller/pool_metrics.py). Like every metric, its name,
labels and help are defined once, in rpp/model/metric_names.py.

Every HTTP request the client sends to RunPod (each retry attempt is a request) is
counted once, labelled with the OpenAPI operationId (`listPods`, `createPod`, ...,
`hostNotices` for the GraphQL query) and the `CallOutcome` it ended in. A rate-limit wait
the client serves locally, without a request, is not a call and is not counted.

The counter lives in a `CollectorRegistry`: the global one in the controller, a fresh
one per test. prometheus_client refuses to register one metric name twice in a
registry, so one counter is created per registry and shared by every client using it.
"""

from __future__ import annotations

import threading
import weakref

from prometheus_client import REGISTRY, CollectorRegistry, Counter

from rpp.adapters.runpod.answers import CallOutcome
from rpp.model import metric_names

METRIC = metric_names.BY_NAME[metric_names.RUNPOD_API_CALLS_TOTAL]

_lock = threading.Lock()
_counters: weakref.WeakKeyDictionary[CollectorRegistry, Counter] = weakref.WeakKeyDictionary()


class ApiCallMetrics:
    """Counts RunPod API calls by operation and outcome in one registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        target = REGISTRY if registry is None else registry
        with _lock:
            counter = _counters.get(target)
            if counter is None:
                counter = Counter(METRIC.name, METRIC.help, METRIC.labels, registry=target)
                _counters[target] = counter
        self._counter = counter
        self._registry = target

    def record(self, operation: str, outcome: CallOutcome) -> None:
        self._counter.labels(operation=operation, outcome=outcome.value).inc()

    def value(self, operation: str, outcome: CallOutcome) -> float:
        """The current count; for tests and the simulator's reports."""
        labels = {"operation": operation, "outcome": outcome.value}
        return self._registry.get_sample_value(METRIC.name, labels) or 0.0
