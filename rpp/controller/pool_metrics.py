"""The runpod_pool_* series of each pool, set after every reconcile.

Where it sits: the controller, after act. The reconciler reports each pool's written
status here (members by phase, ready, desired, cost, conditions), counts actions by how
they ended and times the reconcile; the loop sets and clears ReconcileFailed, and drops
every pool gauge when this replica stops leading (`stand_by`): a standby's old values
would keep an alert firing long after the leader moved; `rpp run` sets the leader
gauge. The controller's /metrics serves the registry with prometheus_client.
Why a module of its own: these series describe pools, and are set from what the
controller decided and wrote; the RunPod API-call counter is the RunPod client's
(rpp/adapters/runpod/call_metrics.py). Names, labels and help of both come from
rpp/model/metric_names.py, which the alert rules and the dashboard are checked against.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from rpp.decide.state.conditions import ALL_CONDITIONS
from rpp.model import metric_names as names
from rpp.model.effects import UpdatePod
from rpp.model.members import PHASES
from rpp.model.results import EffectResult
from rpp.model.rollout_records import RolloutPhase
from rpp.model.status import PoolStatus, Spend

PoolKey = tuple[str, str]
"""(namespace, name): a pool's series are labelled with both (metric_names.POOL_NAMESPACE)."""


class PoolMetrics:
    """One set of runpod_pool_* metrics in one registry (the process's, or a test's)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def spec(name: str) -> tuple[str, str, tuple[str, ...]]:
            s = names.BY_NAME[name]
            return s.name, s.help, s.labels

        def gauge(name: str) -> Gauge:
            n, h, labels = spec(name)
            return Gauge(n, h, labels, registry=registry)

        self.members = gauge(names.MEMBERS)
        self.ready = gauge(names.READY)
        self.desired = gauge(names.DESIRED)
        self.desired_min = gauge(names.DESIRED_MIN)
        self.cost = gauge(names.COST_PER_HOUR)
        self.condition = gauge(names.CONDITION)
        self.leader = gauge(names.LEADER)
        self.rollout_phase = gauge(names.ROLLOUT_PHASE)
        self.write_failing = gauge(names.STATUS_WRITE_FAILING)
        n, h, labels = spec(names.ACTIONS_TOTAL)
        self.actions = Counter(n.removesuffix("_total"), h, labels, registry=registry)
        n, h, labels = spec(names.ROLLBACKS_TOTAL)
        self.rollbacks = Counter(n.removesuffix("_total"), h, labels, registry=registry)
        n, h, labels = spec(names.STATUS_WRITE_FAILURES_TOTAL)
        self.write_failures = Counter(n.removesuffix("_total"), h, labels, registry=registry)
        n, h, labels = spec(names.SPEND_USD_TOTAL)
        self.spend = Counter(n.removesuffix("_total"), h, labels, registry=registry)
        # Per pool, the billing reading last counted: (its time, thisMonth then).
        self._spend_counted: dict[PoolKey, tuple[dt.datetime, float]] = {}
        n, h, labels = spec(names.RECONCILE_SECONDS)
        self.reconcile_seconds = Histogram(
            n,
            h,
            labels,
            registry=registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )

    def report(self, pool: PoolKey, status: PoolStatus, *, desired_min: int) -> None:
        at = _labels(pool)
        for phase in PHASES:
            if phase == "Gone":
                continue
            count = sum(1 for m in status.members if m.phase == phase)
            self.members.labels(**at, phase=phase).set(count)
        self.ready.labels(**at).set(status.ready)
        self.desired.labels(**at).set(status.desired)
        self.desired_min.labels(**at).set(desired_min)
        self.cost.labels(**at).set(status.cost_per_hour)
        raised = {c.type for c in status.conditions if c.status == "True"}
        for cond in ALL_CONDITIONS:
            self.condition.labels(**at, type=cond).set(1 if cond in raised else 0)
        self._count_spend(pool, status.spend)
        release = status.rollout.phase if status.rollout is not None else None
        for each in RolloutPhase:
            self.rollout_phase.labels(**at, phase=each.value).set(1 if each is release else 0)

    def condition_set(self, pool: PoolKey, *, type_: str, true: bool) -> None:
        """One condition's gauge, set outside a report (ReconcileFailed)."""
        self.condition.labels(**_labels(pool), type=type_).set(1 if true else 0)

    def condition_forget(self, pool: PoolKey, *, type_: str) -> None:
        with contextlib.suppress(KeyError):
            self.condition.remove(*pool, type_)

    def reconciled_in(self, pool: PoolKey, seconds: float) -> None:
        self.reconcile_seconds.labels(**_labels(pool)).observe(seconds)

    def _count_spend(self, pool: PoolKey, spend: Spend | None) -> None:
        """runpod_pool_spend_usd_total grows by what each new billing reading adds.

        A counter, not a gauge of thisMonth: spend only grows, and `increase(...[1d])`
        then gives a day's spend across a month's end (where thisMonth drops to 0) and
        across a restart (a counter reset Prometheus knows). The first reading this
        process sees is the baseline, counted as nothing: counting the month so far again
        after every restart would add it twice. A reading RunPod revised down adds nothing.
        """
        if spend is None or spend.read_at is None:
            return
        counted = self._spend_counted.get(pool)
        child = self.spend.labels(**_labels(pool))
        if counted is not None and spend.read_at > counted[0]:
            last_at, last_month = counted
            same_month = (last_at.year, last_at.month) == (spend.read_at.year, spend.read_at.month)
            added = spend.this_month - (last_month if same_month else 0.0)
            if added > 0:
                child.inc(added)
        if counted is None or spend.read_at > counted[0]:
            self._spend_counted[pool] = (spend.read_at, spend.this_month)

    def count(self, pool: PoolKey, results: Iterable[EffectResult]) -> None:
        at = _labels(pool)
        for done in results:
            effect = done.effect
            if effect.action == "event":
                continue
            self.actions.labels(**at, action=effect.action, outcome=done.result.value).inc()
            if isinstance(effect, UpdatePod) and effect.rollback and done.ok:
                self.rollbacks.labels(**at).inc()

    def status_writes(self, pool: PoolKey, *, failed: int, failing: bool) -> None:
        """After each status write: the writes it saw refused, and whether they fail."""
        if failed:
            self.write_failures.labels(**_labels(pool)).inc(failed)
        self.write_failing.labels(**_labels(pool)).set(1 if failing else 0)

    def pool_gauges(self) -> tuple[Gauge, ...]:
        """The gauges that describe pools: only the leader, which reconciles, exports them."""
        pools = (self.members, self.ready, self.desired, self.desired_min, self.cost)
        return (*pools, self.write_failing, self.condition, self.rollout_phase)

    def stand_by(self) -> None:
        """This replica stopped leading: drop every pool's gauges. The counters and the
        reconcile histogram stay, as counters do; they only stop moving."""
        for gauge in self.pool_gauges():
            gauge.clear()

    def forget(self, pool: PoolKey) -> None:
        """Drop a deleted pool's series, so dashboards do not show it forever."""
        for metric in (self.ready, self.desired, self.desired_min, self.cost, self.write_failing):
            with contextlib.suppress(KeyError):
                metric.remove(*pool)
        for phase in PHASES:
            with contextlib.suppress(KeyError):
                self.members.remove(*pool, phase)
        for cond in ALL_CONDITIONS:
            self.condition_forget(pool, type_=cond)
        for phase in RolloutPhase:
            with contextlib.suppress(KeyError):
                self.rollout_phase.remove(*pool, phase.value)
        for counter in (self.rollbacks, self.write_failures, self.spend):
            with contextlib.suppress(KeyError):
                counter.remove(*pool)
        self._spend_counted.pop(pool, None)


def _labels(pool: PoolKey) -> dict[str, str]:
    namespace, name = pool
    return {names.POOL_NAMESPACE: namespace, names.POOL: name}
