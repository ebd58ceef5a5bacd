"""Effects: what decide wants done, as plain immutable values.

Decide (the pool steps and the member machines) never calls RunPod, Kubernetes or
nginx; it returns an ordered list of these. The executor is the only consumer: in
Manage mode it carries them out, in DryRun it logs `would: <describe()>` and records
them in status.plannedActions, in Observe it drops them. Because they are values,
tests compare them with `==`, and the same list is the plan, the log and the audit.

Effects carry no secrets and no clients. In particular `UpdatePod` carries no env: the
pod's env holds secrets, so the executor merges the pod's current env with the pool's
envFromSecret at act time, right after it re-reads the pod to check ownership.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Literal

ActionKind = Literal[
    "create", "terminate", "update", "wire", "unwire", "write-slots", "event", "finalizer"
]
EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True, kw_only=True)
class CreatePod:
    """Create one pod for the pool; RunPod takes the first candidate with stock.

    `gpu_types` and `datacenters` are the candidates in preference order, already
    filtered by decide (denied, cooling-down and full datacenters removed, GPU types
    priced over the cost cap left out); `skipped` names the allowed datacenters left out
    and why, so a refusal can say so. `image` is set when the pod must not get
    spec.image: a release whose canary has not passed, or was rolled back (None:
    spec.image, or the template's). `max_price_per_hr` is what is left under
    limits.maxHourlyCostUsd: act tries no candidate whose catalog price is above it,
    and falls back on `catalog_prices` (the last prices read) when the catalog is
    unreadable (rpp/decide/capacity/prices.py).
    """

    action: ClassVar[ActionKind] = "create"
    pool: str
    name: str
    reason: str
    replacement_for: str | None = None
    gpu_types: tuple[str, ...] = ()
    datacenters: tuple[str, ...] = ()
    cloud: str | None = None
    skipped: tuple[tuple[str, str], ...] = ()  # (datacenter, why not tried)
    image: str | None = None
    max_price_per_hr: float | None = None  # None: no cost check (tests that build effects)
    catalog_prices: tuple[tuple[str, float], ...] = ()  # GPU type -> list price per GPU

    @property
    def pod(self) -> str:
        return self.name

    def describe(self) -> str:
        text = f"create pod {self.name} for pool {self.pool} ({self.reason})"
        if self.image:
            text += f" on {self.image}, the image the pool trusts until the release passes"
        if self.replacement_for:
            text += f", replacing {self.replacement_for}"
        if self.gpu_types or self.datacenters:
            gpus = ", ".join(self.gpu_types) or "any GPU"
            places = ", ".join(self.datacenters) or "any datacenter"
            text += f"; trying {gpus} in {places}"
            if self.cloud:
                text += f" ({self.cloud})"
        if self.max_price_per_hr is not None:
            text += f", at most ${self.max_price_per_hr:.2f}/h"
        return text


def skipped_text(skipped: Iterable[tuple[str, str]]) -> str:
    """`EU-SE-1, EU-CZ-1 (maxPerDatacenter 1 reached); EU-NL-1 (denied by ...)`.

    The datacenters a create left out, grouped by why, in their datacenters.allow order;
    shared by decide (a blocked create) and act (a refused one) so both say it alike.
    """
    by_reason: dict[str, list[str]] = {}
    for dc, why in skipped:
        by_reason.setdefault(why, []).append(dc)
    return "; ".join(f"{', '.join(dcs)} ({why})" for why, dcs in by_reason.items())


@dataclass(frozen=True, kw_only=True)
class TerminatePod:
    """Terminate a pool pod (after the executor re-reads it and checks its name).

    `cooldown_datacenter` is set when this termination counts as a replacement in
    that datacenter (2 in 24h put it in cooldown); None for scale-downs.
    """

    action: ClassVar[ActionKind] = "terminate"
    pod_id: str
    name: str
    reason: str
    cooldown_datacenter: str | None = None

    @property
    def pod(self) -> str:
        return self.pod_id

    def describe(self) -> str:
        return f"terminate pod {self.pod_id} ({self.name}): {self.reason}"


@dataclass(frozen=True, kw_only=True)
class UpdatePod:
    """Switch a pod to another image in place (PATCH /pods/{id}); RunPod resets it.

    `rollback` marks the update that puts a failed pod back on `image` (its old one);
    the pool backs off further image updates when it sees one.
    """

    action: ClassVar[ActionKind] = "update"
    pod_id: str
    name: str
    image: str
    from_image: str
    reason: str
    rollback: bool = False

    @property
    def pod(self) -> str:
        return self.pod_id

    def describe(self) -> str:
        verb = "roll back" if self.rollback else "update"
        return (
            f"{verb} pod {self.pod_id} ({self.name}) in place from {self.from_image} "
            f"to {self.image}: {self.reason}"
        )


@dataclass(frozen=True, kw_only=True)
class Wire:
    """Point nginx slot `slot` at the pod (the slots ConfigMap is written once per loop)."""

    action: ClassVar[ActionKind] = "wire"
    pod_id: str
    slot: int

    @property
    def pod(self) -> str:
        return self.pod_id

    def describe(self) -> str:
        return f"wire pod {self.pod_id} into slot {self.slot}"


@dataclass(frozen=True, kw_only=True)
class Unwire:
    """Take the pod out of nginx by emptying its slot."""

    action: ClassVar[ActionKind] = "unwire"
    pod_id: str
    slot: int
    reason: str

    @property
    def pod(self) -> str:
        return self.pod_id

    def describe(self) -> str:
        return f"unwire pod {self.pod_id} from slot {self.slot}: {self.reason}"


@dataclass(frozen=True, kw_only=True)
class WriteSlots:
    """Write the slots ConfigMap with these (slot, pod id) pairs; other slots are empty."""

    action: ClassVar[ActionKind] = "write-slots"
    slots: tuple[tuple[int, str], ...]
    # The rendered ConfigMap data (rpp/decide/nginx_slots.py), as sorted (key, text) pairs.
    data: tuple[tuple[str, str], ...] = ()
    create: bool = False  # the ConfigMap is missing: create it (Manage only)

    @property
    def pod(self) -> None:
        return None

    def describe(self) -> str:
        wired = ", ".join(f"{slot}={pod_id}" for slot, pod_id in sorted(self.slots))
        return f"write nginx slots: {wired or 'all empty'}"


@dataclass(frozen=True, kw_only=True)
class RecordEvent:
    """A Kubernetes Event on the RunPodPool (about `pod_id` when it concerns one pod)."""

    action: ClassVar[ActionKind] = "event"
    type: EventType
    reason: str
    message: str
    pod_id: str | None = None

    @property
    def pod(self) -> str | None:
        return self.pod_id

    def describe(self) -> str:
        return f"event {self.type} {self.reason}: {self.message}"


@dataclass(frozen=True, kw_only=True)
class AddFinalizer:
    """Put the controller's finalizer on the pool, so deleting it waits for its pods.

    Only a Manage pool carries it: the other modes never terminate pods.
    """

    action: ClassVar[ActionKind] = "finalizer"
    reason: str

    @property
    def pod(self) -> None:
        return None

    def describe(self) -> str:
        return f"add the pool's finalizer: {self.reason}"


@dataclass(frozen=True, kw_only=True)
class RemoveFinalizer:
    """Take the controller's finalizer off the pool; a pool being deleted then goes."""

    action: ClassVar[ActionKind] = "finalizer"
    reason: str

    @property
    def pod(self) -> None:
        return None

    def describe(self) -> str:
        return f"remove the pool's finalizer: {self.reason}"


Action = CreatePod | TerminatePod | UpdatePod | Wire | Unwire | WriteSlots
"""An effect that changes something (a pod, a slot): DryRun plans these, Manage acts."""
Finalizer = AddFinalizer | RemoveFinalizer
"""The pool object's own bookkeeping, like its status: carried out in every mode, never
planned (Observe and DryRun only ever remove it, so a pool that left Manage can go)."""
Effect = Action | RecordEvent | Finalizer
