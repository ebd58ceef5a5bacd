"""Every Prometheus metric the controller exports: names, kinds, labels and help, in one place.

Where it sits: the model, so every layer that registers a metric reads its name here:
the pool series (rpp/controller/pool_metrics.py, set after each reconcile) and the
RunPod API-call counter (rpp/adapters/runpod/call_metrics.py, counted by the client).
The alert rules (examples/prometheus-rules.yaml, the chart's PrometheusRule), the
Grafana dashboard and docs/ query them by name. A rename here without a matching rename
there would leave an alert that can never fire, so the install tests read this module
and fail when a rule or a panel queries a name it lacks.

Names are the exposition names a scrape shows, which is also what PromQL queries: counters
carry their `_total`, and a histogram is queried through its `_bucket`, `_sum` and
`_count` series (`series_names`).

A pool's series carry `pool_namespace` beside `pool`: one controller may serve pools of
the same name in several namespaces (NAMESPACES), and a pool is its (namespace, name).
Not `namespace`: a Prometheus Operator scrape sets that target label to the controller's
own namespace, and a series label of the same name would be renamed `exported_namespace`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MetricKind = Literal["gauge", "counter", "histogram"]

POOL_NAMESPACE = "pool_namespace"
POOL = "pool"
PHASE = "phase"
TYPE = "type"
ACTION = "action"
OUTCOME = "outcome"
OPERATION = "operation"
CONFIG_MAP = "config_map"

MEMBERS = "runpod_pool_members"
READY = "runpod_pool_ready"
DESIRED = "runpod_pool_desired"
DESIRED_MIN = "runpod_pool_desired_min"
COST_PER_HOUR = "runpod_pool_cost_per_hour"
CONDITION = "runpod_pool_condition"
ACTIONS_TOTAL = "runpod_pool_actions_total"
RUNPOD_API_CALLS_TOTAL = "runpod_pool_runpod_api_calls_total"
RUNPOD_UNREADABLE_PODS = "runpod_pool_runpod_unreadable_pods"
RECONCILE_SECONDS = "runpod_pool_reconcile_seconds"
ROLLOUT_PHASE = "runpod_pool_rollout_phase"
ROLLBACKS_TOTAL = "runpod_pool_rollbacks_total"
LEADER = "runpod_pool_leader"
STATUS_WRITE_FAILURES_TOTAL = "runpod_pool_status_write_failures_total"
STATUS_WRITE_FAILING = "runpod_pool_status_write_failing"
SPEND_USD_TOTAL = "runpod_pool_spend_usd_total"
# Exported by `rpp nginx-reloader`, the sidecar in each nginx pod.
NGINX_RELOADS_TOTAL = "runpod_pool_nginx_reloads_total"
NGINX_CONFIG_REJECTED = "runpod_pool_nginx_config_rejected"
NGINX_RELOAD_SECONDS = "runpod_pool_nginx_reload_seconds"

# prometheus_client adds these to a histogram's name in the exposition.
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


@dataclass(frozen=True)
class MetricSpec:
    """One exported metric: what the controller registers and what queries may use."""

    name: str
    kind: MetricKind
    labels: tuple[str, ...]
    help: str

    def series_names(self) -> tuple[str, ...]:
        """The names a PromQL query can select for this metric."""
        if self.kind == "histogram":
            return tuple(self.name + suffix for suffix in _HISTOGRAM_SUFFIXES)
        return (self.name,)


SPECS: tuple[MetricSpec, ...] = (
    MetricSpec(
        MEMBERS,
        "gauge",
        (POOL_NAMESPACE, POOL, PHASE),
        "Pool members by phase (Warming, Ready, Flagged, Draining, Updating, Terminating).",
    ),
    MetricSpec(READY, "gauge", (POOL_NAMESPACE, POOL), "Members Ready and wired into nginx."),
    MetricSpec(
        DESIRED,
        "gauge",
        (POOL_NAMESPACE, POOL),
        "The size the pool aims for: replicas.min or the autoscaler's.",
    ),
    MetricSpec(
        DESIRED_MIN, "gauge", (POOL_NAMESPACE, POOL), "replicas.min: the pods the pool must keep."
    ),
    MetricSpec(
        COST_PER_HOUR, "gauge", (POOL_NAMESPACE, POOL), "The pool's pods' cost per hour, in USD."
    ),
    MetricSpec(
        CONDITION,
        "gauge",
        (POOL_NAMESPACE, POOL, TYPE),
        "1 while the pool's condition of this type is True, else 0.",
    ),
    MetricSpec(
        ACTIONS_TOTAL,
        "counter",
        (POOL_NAMESPACE, POOL, ACTION, OUTCOME),
        "Actions on pods and slots, by action and how they ended (planned in DryRun).",
    ),
    MetricSpec(
        RUNPOD_API_CALLS_TOTAL,
        "counter",
        (OPERATION, OUTCOME),
        "RunPod API calls by operation (OpenAPI operationId) and outcome.",
    ),
    MetricSpec(
        RUNPOD_UNREADABLE_PODS,
        "gauge",
        (),
        "Pods in RunPod's last listing with fields the controller could not read: no pool "
        "acts on what they say; the pool owning one names it in UnreadablePods.",
    ),
    MetricSpec(
        RECONCILE_SECONDS,
        "histogram",
        (POOL_NAMESPACE, POOL),
        "Time one reconcile of one pool took, seconds.",
    ),
    MetricSpec(LEADER, "gauge", (), "1 on the replica holding the leader Lease, else 0."),
    MetricSpec(
        ROLLOUT_PHASE,
        "gauge",
        (POOL_NAMESPACE, POOL, PHASE),
        "1 for the phase the release of spec.image is in (Canary, Baking, Rolling, RolledBack, "
        "Done), else 0.",
    ),
    MetricSpec(
        ROLLBACKS_TOTAL,
        "counter",
        (POOL_NAMESPACE, POOL),
        "Pods put back on their old image in place: a canary that failed its bake, or an "
        "update that did not start.",
    ),
    MetricSpec(
        STATUS_WRITE_FAILURES_TOTAL,
        "counter",
        (POOL_NAMESPACE, POOL),
        "Writes of the pool's status the API server refused (a 409 that outlasted the "
        "retries, a 5xx, a timeout).",
    ),
    MetricSpec(
        STATUS_WRITE_FAILING,
        "gauge",
        (POOL_NAMESPACE, POOL),
        "1 while the pool's last status write failed (StatusWriteFailing), else 0.",
    ),
    MetricSpec(
        SPEND_USD_TOTAL,
        "counter",
        (POOL_NAMESPACE, POOL),
        "USD RunPod billed the pool's pods (listPodBilling, status.spend), counted from this "
        "process's first billing reading on; it lags the pods by RunPod's billing delay.",
    ),
)

# What `rpp nginx-reloader` exports on its own /metrics (a sidecar of each nginx pod).
RELOADER_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec(
        NGINX_RELOADS_TOTAL,
        "counter",
        (CONFIG_MAP, OUTCOME),
        "nginx reloads for a slots ConfigMap change: ok, rejected (nginx kept its running "
        "config) or error (nginx could not be signalled).",
    ),
    MetricSpec(
        NGINX_CONFIG_REJECTED,
        "gauge",
        (CONFIG_MAP,),
        "1 while nginx runs older slots than the ConfigMap holds because it rejected the "
        "newer ones, else 0.",
    ),
    MetricSpec(
        NGINX_RELOAD_SECONDS,
        "histogram",
        (CONFIG_MAP,),
        "From a slots ConfigMap change seen to nginx serving it, seconds.",
    ),
)

BY_NAME: dict[str, MetricSpec] = {spec.name: spec for spec in (*SPECS, *RELOADER_SPECS)}


def queryable_names() -> frozenset[str]:
    """Every series name a rule or a dashboard panel may select."""
    return frozenset(name for spec in SPECS for name in spec.series_names())
