"""Act: carry out one pool's effects according to its mode, and report each outcome.

Where it sits: after decide, the only place effects touch RunPod or Kubernetes. The
mode decides everything:

- Manage: every effect is carried out, in decide's order. Pods are re-read from
  RunPod right before a terminate or an update, and the executor refuses when the pod
  on RunPod is not the pool's any more (the ownership safeguard). Env is merged here
  (the pod's current env, then envFromSecret on top) because RunPod replaces env
  wholesale on update and effects never carry secrets.
- DryRun: nothing changes on RunPod or in the slots; Events are still recorded.
- Observe: nothing at all.

Every outcome is a value (`Outcome`), never an exception escaping to the loop; the
reconciler folds them into the status (rpp/decide/fold.py) and counts them in
runpod_pool_actions_total.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from rpp.adapters.kube.api import KubeApi, KubeError
from rpp.adapters.runpod import answers as oc
from rpp.adapters.runpod.candidates import create_first_available
from rpp.adapters.runpod.client import RunPodClient
from rpp.adapters.runpod.wire import PodRequest
from rpp.decide.ownership import owns
from rpp.model.effects import (
    CreatePod,
    Effect,
    RecordEvent,
    TerminatePod,
    Unwire,
    UpdatePod,
    Wire,
    WriteSlots,
)
from rpp.model.observations import RunPodPod
from rpp.model.records import CapacityRefusal
from rpp.model.results import Outcome
from rpp.model.spec import Mode, RunPodPoolSpec

log = logging.getLogger("rpp.act")

# The most candidates one create may try (each a RunPod call).
MAX_CREATE_ATTEMPTS = 12
SLOTS_LABELS = {"app.kubernetes.io/part-of": "runpod-pool-controller"}


# Event reasons for actions, by action and whether it worked.
_ACTION_REASONS = {
    "create": ("PodCreated", "CreateFailed"),
    "terminate": ("PodTerminating", "TerminateFailed"),
    "update": ("PodUpdating", "UpdateRefused"),
    "write-slots": ("SlotsWritten", "SlotsWriteFailed"),
}


def action_event(outcome: Outcome) -> RecordEvent | None:
    """The Event that tells `kubectl describe rpp` what an action did (wire and unwire
    are told by the slots write that carries them)."""
    reasons = _ACTION_REASONS.get(outcome.effect.action)
    if reasons is None:
        return None
    text = outcome.effect.describe()
    if outcome.detail:
        text += f": {outcome.detail}"
    if outcome.ok:
        return RecordEvent(type="Normal", reason=reasons[0], message=text, pod_id=None)
    return RecordEvent(type="Warning", reason=reasons[1], message=text, pod_id=None)


class Executor:
    """Carries out effects for any pool; one per controller process."""

    def __init__(self, *, runpod: RunPodClient, kube: KubeApi) -> None:
        self.runpod = runpod
        self.kube = kube

    async def execute(
        self,
        *,
        pool: Mapping[str, Any],
        spec: RunPodPoolSpec,
        effects: Sequence[Effect],
        env: Mapping[str, str],
        now: dt.datetime,
    ) -> list[Outcome]:
        """Carry out `effects` for the pool object `pool`; `env` is envFromSecret's data."""
        mode = spec.mode
        name = pool["metadata"]["name"]
        outcomes: list[Outcome] = []
        for effect in effects:
            if mode is Mode.OBSERVE:
                break
            if isinstance(effect, RecordEvent):
                outcomes.append(await self.record(pool, effect, now))
            elif mode is Mode.DRY_RUN:
                outcomes.append(Outcome(effect, "planned", effect.describe()))
            else:
                outcome = await self._act(spec, effect, env, now)
                level = logging.INFO if outcome.ok else logging.WARNING
                log.log(
                    level,
                    "pool %s: %s: %s %s",
                    name,
                    effect.describe(),
                    outcome.result,
                    outcome.detail,
                )
                outcomes.append(outcome)
                notice = action_event(outcome)
                if notice is not None:
                    outcomes.append(await self.record(pool, notice, now))
        return outcomes

    async def record(
        self, pool: Mapping[str, Any], effect: RecordEvent, now: dt.datetime
    ) -> Outcome:
        """Record one Event on the pool, in any mode (Events are how every mode speaks)."""
        try:
            await self.kube.emit_event(
                dict(pool),
                type_=effect.type,
                reason=effect.reason,
                message=effect.message,
                now=now,
            )
        except KubeError as err:
            return Outcome(effect, "failed", str(err))
        return Outcome(effect, "ok")

    async def _act(
        self, spec: RunPodPoolSpec, effect: Effect, env: Mapping[str, str], now: dt.datetime
    ) -> Outcome:
        try:
            if isinstance(effect, (Wire, Unwire)):
                # The slot is in status already; WriteSlots makes nginx follow.
                return Outcome(effect, "ok", effect.describe())
            if isinstance(effect, WriteSlots):
                return await self._write_slots(spec, effect)
            if isinstance(effect, TerminatePod):
                return await self._terminate(spec, effect)
            if isinstance(effect, UpdatePod):
                return await self._update(spec, effect, env)
            if isinstance(effect, CreatePod):
                return await self._create(spec, effect, env, now)
        except oc.RunPodError as err:
            return Outcome(effect, "failed", str(err))
        except KubeError as err:
            return Outcome(effect, "failed", str(err))
        return Outcome(effect, "failed", f"no executor for {type(effect).__name__}")

    async def _write_slots(self, spec: RunPodPoolSpec, effect: WriteSlots) -> Outcome:
        name = spec.nginx.slots_config_map
        data = dict(effect.data)
        current = await self.kube.read_config_map(name)
        if current is None:
            await self.kube.create_config_map(name, data=data, labels=SLOTS_LABELS)
            return Outcome(effect, "ok", f"created ConfigMap {name}")
        if dict(current.data) == data:
            return Outcome(effect, "ok", "already up to date")
        await self.kube.replace_config_map(current, data=data)
        return Outcome(effect, "ok", f"wrote ConfigMap {name}")

    async def _owned_pod(self, spec: RunPodPoolSpec, pod_id: str, name: str) -> RunPodPod | str:
        """The pod re-read from RunPod, or why the pool must not touch it."""
        pod = await self.runpod.get_pod(pod_id)
        if not owns(spec, pod) or pod.name != name:
            return (
                f"refused: RunPod says pod {pod_id} is named {pod.name!r}, not {name!r} "
                f"of this pool (namePrefix {spec.name_prefix}); it is not touched"
            )
        return pod

    async def _terminate(self, spec: RunPodPoolSpec, effect: TerminatePod) -> Outcome:
        try:
            pod = await self._owned_pod(spec, effect.pod_id, effect.name)
        except oc.NotFound:
            return Outcome(effect, "gone", "RunPod no longer has the pod")
        if isinstance(pod, str):
            return Outcome(effect, "not-owned", pod)
        existed = await self.runpod.delete_pod(pod.id)
        return Outcome(
            effect, "ok" if existed else "gone", "terminated" if existed else "already gone"
        )

    async def _update(
        self, spec: RunPodPoolSpec, effect: UpdatePod, env: Mapping[str, str]
    ) -> Outcome:
        pod = await self._owned_pod(spec, effect.pod_id, effect.name)
        if isinstance(pod, str):
            return Outcome(effect, "not-owned", pod)
        merged = {**pod.env, **env}
        try:
            updated = await self.runpod.update_pod(pod.id, image=effect.image, env=merged)
        except (oc.Rejected, oc.Forbidden, oc.Conflict, oc.InsufficientBalance) as err:
            return Outcome(effect, "refused", err.detail or str(err))
        return Outcome(effect, "ok", f"now on {effect.image}", pod=updated)

    async def _create(
        self, spec: RunPodPoolSpec, effect: CreatePod, env: Mapping[str, str], now: dt.datetime
    ) -> Outcome:
        request = PodRequest(
            name=effect.name,
            image=spec.image,
            template_id=spec.template_id,
            env=dict(env),
            ports=(f"{spec.port}/http",),
        )
        result = await create_first_available(
            self.runpod,
            request,
            gpu_types=effect.gpu_types or spec.gpu_types,
            datacenters=effect.datacenters,
            cloud=effect.cloud or spec.cloud,
            max_attempts=MAX_CREATE_ATTEMPTS,
        )
        if result.created:
            return Outcome(effect, "created", result.describe(), pod=result.pod)
        if result.outcome_unknown:
            return Outcome(effect, "unknown", result.describe())
        capacity = None
        if result.capacity_unavailable:
            capacity = CapacityRefusal(
                time=now,
                gpu_types=result.gpu_types,
                cloud=result.cloud,
                datacenters=result.datacenters,
                message=result.last_detail or result.describe(),
            )
        return Outcome(effect, "refused", result.describe(), capacity=capacity)
