"""kstatus's verdict on a custom resource, as its source computes it, for the GitOps tests.

kstatus (sigs.k8s.io/cli-utils pkg/kstatus/status; Flux vendors it unchanged as
github.com/fluxcd/cli-utils) is what Flux's `wait: true`, `flux` CLI, cli-utils and kpt
judge a resource by. For a kind it has no rules of its own for, such as RunPodPool,
`Compute` (status.go) runs, in this order:

1. `checkGenericProperties` (generic.go): a `metadata.deletionTimestamp` is Terminating;
   then `checkGeneration`: when `metadata.generation` and `status.observedGeneration` are
   both there and differ, InProgress (reason LatestGenerationNotObserved); a missing
   observedGeneration skips the check. Then the conditions, in list order: the first
   `Reconciling` True is InProgress, the first `Stalled` True is Failed.
2. `GetLegacyConditionsFn` (core.go): built-in kinds only; none for a custom resource.
3. `checkReadyCondition` (status.go): a `Ready` True is Current, False or Unknown
   InProgress.
4. Otherwise Current ("Resource is current"): a resource with no status at all, or with
   no condition kstatus knows, counts as done.

`NestedInt64` refuses a generation that is not an integer (an error, no verdict).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

KStatus = Literal["InProgress", "Current", "Failed", "Terminating"]


@dataclass(frozen=True)
class Result:
    status: KStatus
    message: str


def compute(obj: Mapping[str, Any]) -> Result:
    """kstatus `Compute` for a custom resource (see the module docstring)."""
    meta = obj.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return Result("Terminating", "Resource scheduled for deletion")
    status = obj.get("status")
    status = status if isinstance(status, Mapping) else {}
    generation = _int64(meta, "generation")
    observed = _int64(status, "observedGeneration")
    if generation is not None and observed is not None and observed != generation:
        kind = obj.get("kind", "")
        return Result(
            "InProgress",
            f"{kind} generation is {generation}, but latest observed generation is {observed}",
        )
    conditions = status.get("conditions") or []
    for cond in conditions:
        if cond.get("type") == "Reconciling" and cond.get("status") == "True":
            return Result("InProgress", str(cond.get("message", "")))
        if cond.get("type") == "Stalled" and cond.get("status") == "True":
            return Result("Failed", str(cond.get("message", "")))
    for cond in conditions:
        if cond.get("type") != "Ready":
            continue
        if cond.get("status") == "True":
            return Result("Current", "Resource is Ready")
        if cond.get("status") in ("False", "Unknown"):
            return Result("InProgress", str(cond.get("message", "")))
    return Result("Current", "Resource is current")


def _int64(holder: Mapping[str, Any], key: str) -> int | None:
    if key not in holder:
        return None
    value = holder[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{key} accessor error: {value!r} is of the type {type(value)}")
    return value
