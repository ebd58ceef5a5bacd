"""ReconcileFailed: the condition a pool gets when its own reconcile broke.

Where it sits: the controller, outside observe -> decide -> act. The loop
(rpp/controller/loop.py) isolates pools from each other: when one pool's reconcile
raises (a bug) or overruns its time budget, the loop calls `failed`, and the pool gets
a `ReconcileFailed` condition (with Ready False and Stalled True: a reconcile that raises
usually raises again until the controller is fixed), a Warning Event and its condition
gauge set, while the other pools carry on. The next reconcile of that pool that completes calls
`recovered`, which clears the condition with a Normal Event. Decide never sets or
clears this condition: it cannot see its own failures.

The condition is written alone over the freshest status (rpp/controller/status_write.py
re-reads on a conflict), so it never erases what a reconcile wrote in between.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rpp.adapters.clock import Clock
from rpp.adapters.kube.api import EventType, KubeApi, KubeError
from rpp.adapters.logs import fields, layer_logger
from rpp.controller.pool_metrics import PoolMetrics
from rpp.controller.reconcile import PoolResult
from rpp.controller.status_write import write_status
from rpp.decide.progress import SEE_STALLED, Verdict
from rpp.decide.state.conditions import READY, RECONCILING, STALLED
from rpp.model.codec import StatusFormatError
from rpp.model.records import bounded
from rpp.model.status import PoolStatus

log = layer_logger("rpp.controller")

RECONCILE_FAILED = "ReconcileFailed"
"""The condition a pool gets when its reconcile raised or overran; cleared by the next one."""
MESSAGE_LIMIT = 300


class ReconcileFailures:
    """Sets and clears ReconcileFailed for any pool; one per controller loop."""

    def __init__(self, *, kube: KubeApi, clock: Clock, metrics: PoolMetrics | None) -> None:
        self.kube = kube
        self.clock = clock
        self.metrics = metrics

    async def failed(self, obj: Mapping[str, Any], *, reason: str, message: str) -> PoolResult:
        """Raise ReconcileFailed on the pool `obj` (its reconcile raised or overran)."""
        name = _name(obj)
        message = bounded(message, MESSAGE_LIMIT)
        if self.metrics is not None:
            self.metrics.condition_set(self._key(name), type_=RECONCILE_FAILED, true=True)
        status, written = await self._set_condition(
            name, obj, true=True, reason=reason, message=message
        )
        await self._event(obj, type_="Warning", reason=RECONCILE_FAILED, message=message)
        return PoolResult(name, None, (), status, written, error=message)

    async def recovered(self, result: PoolResult) -> None:
        """Clear ReconcileFailed once a reconcile of the pool completes."""
        if self.metrics is not None:
            self.metrics.condition_set(self._key(result.pool), type_=RECONCILE_FAILED, true=False)
        cond = result.status.condition(RECONCILE_FAILED) if result.status else None
        if cond is None or cond.status != "True":
            return
        try:
            obj = await self.kube.get_pool(result.pool)
        except KubeError as err:
            log.warning(
                "cannot clear %s: %s", RECONCILE_FAILED, err, extra=fields(pool=result.pool)
            )
            return
        message = "the last reconcile completed"
        await self._set_condition(
            result.pool, obj, true=False, reason="Reconciled", message=message
        )
        await self._event(
            obj, type_="Normal", reason=f"{RECONCILE_FAILED}Cleared", message=message
        )

    def forget(self, name: str) -> None:
        """A deleted pool: its condition gauge goes too."""
        if self.metrics is not None:
            self.metrics.condition_forget(self._key(name), type_=RECONCILE_FAILED)

    def _key(self, name: str) -> tuple[str, str]:
        """The pool's (namespace, name): one ReconcileFailures serves one namespace."""
        return (self.kube.settings.namespace, name)

    async def _event(
        self, obj: Mapping[str, Any], *, type_: EventType, reason: str, message: str
    ) -> None:
        try:
            await self.kube.emit_event(
                dict(obj), type_=type_, reason=reason, message=message, now=self.clock.now()
            )
        except KubeError as err:
            log.warning("event not recorded: %s", err, extra=fields(pool=_name(obj)))

    async def _set_condition(
        self, name: str, obj: Mapping[str, Any], *, true: bool, reason: str, message: str
    ) -> tuple[PoolStatus | None, bool]:
        """Write only this condition over the freshest status."""

        async def compose(fresh: Mapping[str, Any]) -> PoolStatus | None:
            try:
                status = PoolStatus.from_stored(fresh.get("status") or {})
            except StatusFormatError as err:
                log.error(
                    "status unreadable, %s not written: %s", reason, err, extra=fields(pool=name)
                )
                return None
            generation = int((fresh.get("metadata") or {}).get("generation") or 0)
            status = status.with_condition(
                type=RECONCILE_FAILED,
                status="True" if true else "False",
                reason=reason,
                message=message,
                now=self.clock.now(),
                generation=generation,
            )
            if not true:
                # The reconcile that completed wrote Ready, Reconciling and Stalled on
                # their merits.
                return status
            # This generation was seen, and what came of it is ReconcileFailed: kstatus
            # (Flux, cli-utils) then says Failed instead of waiting out its timeout on
            # an observedGeneration that never moves.
            status = status.replace(observed_generation=generation)
            summary = (
                (READY, Verdict(False, RECONCILE_FAILED, message)),
                (RECONCILING, SEE_STALLED),
                (STALLED, Verdict(True, RECONCILE_FAILED, message)),
            )
            for kind, verdict in summary:
                status = status.with_condition(
                    type=kind,
                    status="True" if verdict.true else "False",
                    reason=verdict.reason,
                    message=verdict.message,
                    now=self.clock.now(),
                    generation=generation,
                )
            return status

        status = await compose(obj)
        if status is None:
            return None, False
        done = await write_status(
            self.kube, name=name, obj=obj, status=status, on_conflict=compose
        )
        return done.status, done.written


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", "?"))
