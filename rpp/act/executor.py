"""Act: carry out one pool's effects according to its mode, and report how each ended.

Where it sits: after decide, the only place effects touch RunPod or Kubernetes. The
mode decides everything:

- Manage: every effect is carried out, in decide's order. Pods are re-read from
  RunPod right before a terminate or an update, and the executor refuses when the pod
  on RunPod is not the pool's any more (the ownership safeguard). Env is merged here
  (the pod's current env, then envFromSecret on top) because RunPod replaces env
  wholesale on update and effects never carry secrets.
- DryRun: nothing changes on RunPod or in the slots; Events are still recorded.
- Observe: nothing at all.

The pool's finalizer is the exception: like its status, it is the pool object's own
bookkeeping, so AddFinalizer and RemoveFinalizer are carried out in every mode (decide
only ever removes it outside Manage, so a pool that left Manage can be deleted).

Between two effects the executor passes a `checkpoint` (a no-op in production): the
simulator uses it to kill the controller right there (rpp/sim/process.py), as a crash
between two actions would.

Every effect ends in a value (`EffectResult`), never an exception escaping to the
loop; the reconciler folds them into the status (rpp/decide/fold.py) and counts them in
runpod_pool_actions_total. Dispatch is a `match` over the closed `Effect` union ending in
`assert_never`, so mypy fails when an effect type has no branch here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, assert_never

from rpp.act.create import create_pod
from rpp.adapters.kube.api import KubeApi, KubeError
from rpp.adapters.logs import fields, layer_logger
from rpp.adapters.runpod import answers
from rpp.adapters.runpod.client import RunPodClient
from rpp.model.effects import (
    Action,
    AddFinalizer,
    CreatePod,
    Effect,
    Finalizer,
    RecordEvent,
    RemoveFinalizer,
    TerminatePod,
    Unwire,
    UpdatePod,
    Wire,
    WriteSlots,
)
from rpp.model.observations import RunPodPod
from rpp.model.pod_ownership import owns
from rpp.model.results import EffectResult, Result
from rpp.model.spec import Mode, RunPodPoolSpec

log = layer_logger("rpp.act")


def slots_metadata(pool: str, *, group: str) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations that mark a slots ConfigMap as the controller's alone.

    Nobody's manifests hold it (the controller creates it), and the annotations keep the
    GitOps tools off it where a manifest once did (0.2.x's chart and slots-bootstrap.yaml):
    Argo CD neither prunes it nor counts it against the app, Flux does not prune it.
    """
    labels = {
        "app.kubernetes.io/managed-by": "runpod-pool-controller",
        "app.kubernetes.io/part-of": "runpod-pool-controller",
        "app.kubernetes.io/component": "nginx-slots",
        f"{group}/pool": pool,
    }
    annotations = {
        f"{group}/written-by": "runpod-pool-controller: it creates and rewrites this "
        "ConfigMap; do not edit, apply or template it",
        "argocd.argoproj.io/compare-options": "IgnoreExtraneous",
        "argocd.argoproj.io/sync-options": "Prune=false",
        "kustomize.toolkit.fluxcd.io/prune": "disabled",
    }
    return labels, annotations


BETWEEN_EFFECTS = "between-effects"
Checkpoint = Callable[[str], Awaitable[None]]
"""Called with a point's name where a crash would matter (between two effects)."""


async def _no_checkpoint(point: str) -> None:
    return None


# Event reasons for actions, by action and whether it worked.
_ACTION_REASONS = {
    "create": ("PodCreated", "CreateFailed"),
    "terminate": ("PodTerminating", "TerminateFailed"),
    "update": ("PodUpdating", "UpdateRefused"),
    "write-slots": ("SlotsWritten", "SlotsWriteFailed"),
    "finalizer": ("", "FinalizerFailed"),  # the decision's own Events tell a success
}


def action_event(done: EffectResult) -> RecordEvent | None:
    """The Event that tells `kubectl describe rpp` what an action did (wire and unwire
    are told by the slots write that carries them)."""
    reasons = _ACTION_REASONS.get(done.effect.action)
    if reasons is None:
        return None
    text = done.effect.describe()
    if done.detail:
        text += f": {done.detail}"
    if done.ok:
        if not reasons[0]:
            return None
        return RecordEvent(type="Normal", reason=reasons[0], message=text, pod_id=None)
    return RecordEvent(type="Warning", reason=reasons[1], message=text, pod_id=None)


class _NotRead(Exception):
    """A pod re-read right before a terminate or an update came back with odd fields."""


class Executor:
    """Carries out effects for any pool; one per controller process."""

    def __init__(
        self, *, runpod: RunPodClient, kube: KubeApi, checkpoint: Checkpoint = _no_checkpoint
    ) -> None:
        self.runpod = runpod
        self.kube = kube
        self.checkpoint = checkpoint

    async def execute(
        self,
        *,
        pool: Mapping[str, Any],
        spec: RunPodPoolSpec,
        effects: Sequence[Effect],
        env: Mapping[str, str],
        now: dt.datetime,
    ) -> list[EffectResult]:
        """Carry out `effects` for the pool object `pool`; `env` is envFromSecret's data."""
        mode = spec.mode
        results: list[EffectResult] = []
        for index, effect in enumerate(effects):
            if index:
                await self.checkpoint(BETWEEN_EFFECTS)
            match effect:
                case AddFinalizer() | RemoveFinalizer():
                    done = await self._finalizer(pool, effect)
                case _ if mode is Mode.OBSERVE:
                    continue
                case RecordEvent():
                    results.append(await self.record(pool, effect, now))
                    continue
                case _ if mode is Mode.DRY_RUN:
                    results.append(EffectResult(effect, Result.PLANNED, effect.describe()))
                    continue
                case _:
                    name = str((pool.get("metadata") or {}).get("name", ""))
                    done = await self._act(effect, pool=name, spec=spec, env=env, now=now)
            level = logging.INFO if done.ok else logging.WARNING
            log.log(
                level,
                "%s: %s",
                effect.describe(),
                done.detail or done.result.value,
                extra=fields(pod=effect.pod, effect=effect.action, outcome=done.result.value),
            )
            results.append(done)
            notice = action_event(done)
            if notice is not None and mode is not Mode.OBSERVE:
                results.append(await self.record(pool, notice, now))
        return results

    async def record(
        self, pool: Mapping[str, Any], effect: RecordEvent, now: dt.datetime
    ) -> EffectResult:
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
            return EffectResult(effect, Result.FAILED, str(err))
        return EffectResult(effect, Result.OK)

    async def _act(
        self,
        effect: Action,
        *,
        pool: str,
        spec: RunPodPoolSpec,
        env: Mapping[str, str],
        now: dt.datetime,
    ) -> EffectResult:
        try:
            match effect:
                case Wire() | Unwire():
                    # The slot is in status already; WriteSlots makes nginx follow.
                    return EffectResult(effect, Result.OK, effect.describe())
                case WriteSlots():
                    return await self._write_slots(effect, pool=pool, spec=spec)
                case TerminatePod():
                    return await self._terminate(spec, effect)
                case UpdatePod():
                    return await self._update(spec, effect, env)
                case CreatePod():
                    return await create_pod(
                        self.runpod, spec=spec, effect=effect, env=env, now=now
                    )
                case _:
                    assert_never(effect)
        except (answers.RunPodError, KubeError, _NotRead) as err:
            return EffectResult(effect, Result.FAILED, str(err))

    async def _write_slots(
        self, effect: WriteSlots, *, pool: str, spec: RunPodPoolSpec
    ) -> EffectResult:
        name = spec.nginx.slots_config_map
        data = dict(effect.data)
        labels, annotations = slots_metadata(pool, group=self.kube.settings.crd_group)
        current = await self.kube.read_config_map(name)
        if current is None:
            await self.kube.create_config_map(
                name, data=data, labels=labels, annotations=annotations
            )
            return EffectResult(effect, Result.OK, f"created ConfigMap {name}")
        if dict(current.data) == data:
            return EffectResult(effect, Result.OK, "already up to date")
        # Marked as the controller's on its next write, keeping whatever else marks it
        # (Helm's ownership labels of a 0.2.x install stay, so a rollback can adopt it).
        current = dataclasses.replace(
            current,
            labels={**labels, **current.labels},
            annotations={**current.annotations, **annotations},
        )
        await self.kube.replace_config_map(current, data=data)
        return EffectResult(effect, Result.OK, f"wrote ConfigMap {name}")

    async def _finalizer(self, pool: Mapping[str, Any], effect: Finalizer) -> EffectResult:
        """Add or remove the controller's finalizer, over the pool's resourceVersion; a
        finalizer someone else put there stays."""
        meta = pool.get("metadata") or {}
        ours = self.kube.settings.finalizer
        current = [str(f) for f in meta.get("finalizers") or []]
        if isinstance(effect, AddFinalizer):
            wanted = current if ours in current else [*current, ours]
        else:
            wanted = [f for f in current if f != ours]
        if wanted == current:
            return EffectResult(effect, Result.OK, "already so")
        try:
            changed = await self.kube.set_pool_finalizers(
                str(meta.get("name")),
                finalizers=wanted,
                resource_version=str(meta.get("resourceVersion", "")),
            )
        except KubeError as err:
            return EffectResult(effect, Result.FAILED, str(err))
        verb = "added" if isinstance(effect, AddFinalizer) else "removed"
        version = str((changed.get("metadata") or {}).get("resourceVersion", "")) or None
        return EffectResult(effect, Result.OK, f"{verb} finalizer {ours}", pool_version=version)

    async def _owned_pod(self, spec: RunPodPoolSpec, pod_id: str, name: str) -> RunPodPod | str:
        """The pod re-read from RunPod, or why the pool must not touch it."""
        pod = await self.runpod.get_pod(pod_id)
        if pod.unreadable is not None:
            # Env, name or status may be the odd field: nothing is sent on a guess.
            raise _NotRead(
                f"RunPod's answer for pod {pod_id} does not read ({pod.unreadable}); "
                "it is not touched until it does"
            )
        if not owns(spec, pod) or pod.name != name:
            return (
                f"refused: RunPod says pod {pod_id} is named {pod.name!r}, not {name!r} "
                f"of this pool (namePrefix {spec.name_prefix}); it is not touched"
            )
        return pod

    async def _terminate(self, spec: RunPodPoolSpec, effect: TerminatePod) -> EffectResult:
        try:
            pod = await self._owned_pod(spec, effect.pod_id, effect.name)
        except answers.NotFound:
            return EffectResult(effect, Result.GONE, "RunPod no longer has the pod")
        if isinstance(pod, str):
            return EffectResult(effect, Result.NOT_OWNED, pod)
        existed = await self.runpod.delete_pod(pod.id)
        if existed:
            return EffectResult(effect, Result.OK, "terminated")
        return EffectResult(effect, Result.GONE, "already gone")

    async def _update(
        self, spec: RunPodPoolSpec, effect: UpdatePod, env: Mapping[str, str]
    ) -> EffectResult:
        pod = await self._owned_pod(spec, effect.pod_id, effect.name)
        if isinstance(pod, str):
            return EffectResult(effect, Result.NOT_OWNED, pod)
        merged = {**pod.env, **env}
        try:
            updated = await self.runpod.update_pod(pod.id, image=effect.image, env=merged)
        except (
            answers.Rejected,
            answers.Forbidden,
            answers.Conflict,
            answers.InsufficientBalance,
        ) as err:
            return EffectResult(effect, Result.REFUSED, err.detail or str(err))
        return EffectResult(effect, Result.OK, f"now on {effect.image}", pod=updated)
