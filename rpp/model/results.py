"""EffectResult: what happened to one effect when the executor carried it out.

A value shared by act (rpp/act/executor.py, which produces it) and decide
(rpp/decide/fold.py, which folds it into the status), so neither side imports the
other. It carries only plain data: how the effect ended (`Result`), RunPod's words,
the pod RunPod returned, and for a create refused for lack of stock, what was tried.

Not to be confused with a RunPod call's `CallOutcome` (rpp/adapters/runpod/answers.py):
one effect may make several calls (a create tries candidates), and its result is what
the pool makes of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from rpp.model.effects import Effect
from rpp.model.observations import RunPodPod
from rpp.model.records import CapacityRefusal


class Result(StrEnum):
    """How one effect ended; the `outcome` label of runpod_pool_actions_total and the
    `outcome` of its status.history entry."""

    OK = "ok"  # done
    CREATED = "created"  # a pod exists
    GONE = "gone"  # the pod was already gone (a terminate's goal)
    PLANNED = "planned"  # DryRun: written into the plan, not carried out
    UNKNOWN = "unknown"  # a create may have made a pod
    REFUSED = "refused"  # RunPod said no
    NOT_OWNED = "not-owned"  # the ownership re-read refused to touch the pod
    FAILED = "failed"  # an error on our side or in transport

    @property
    def ok(self) -> bool:
        return self in _DONE


_DONE = frozenset({Result.OK, Result.CREATED, Result.GONE})


@dataclass(frozen=True)
class EffectResult:
    """What happened to one effect: how it ended, and `detail`, a sentence saying so."""

    effect: Effect
    result: Result
    detail: str = ""
    pod: RunPodPod | None = None
    capacity: CapacityRefusal | None = None  # set when a create found no GPU anywhere
    # The pool's resourceVersion after a finalizer change: the change was made over the
    # version the loop read, so the status write may go over this one.
    pool_version: str | None = None
    prices: Mapping[str, float] = field(default_factory=dict)  # catalog list prices read

    @property
    def ok(self) -> bool:
        return self.result.ok
