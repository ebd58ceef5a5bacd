"""Outcome: what happened to one effect when the executor carried it out.

A value shared by act (rpp/act/executor.py, which produces it) and decide
(rpp/decide/fold.py, which folds it into the status), so neither side imports the
other. It carries only plain data: RunPod's words, the pod RunPod returned, and for a
create refused for lack of stock, what was tried.
"""

from __future__ import annotations

from dataclasses import dataclass

from rpp.model.effects import Effect
from rpp.model.observations import RunPodPod
from rpp.model.records import CapacityRefusal

# ok: done; created: a pod exists; gone: the pod was already gone (a terminate's goal);
# planned: DryRun; unknown: a create may have made a pod; refused: RunPod said no;
# not-owned: the ownership re-read refused; failed: an error on our side or transport.
RESULTS = ("ok", "created", "gone", "planned", "unknown", "refused", "not-owned", "failed")


@dataclass(frozen=True)
class Outcome:
    """What happened to one effect. `result` is one of RESULTS, `detail` a sentence."""

    effect: Effect
    result: str
    detail: str = ""
    pod: RunPodPod | None = None
    capacity: CapacityRefusal | None = None  # set when a create found no GPU anywhere

    def __post_init__(self) -> None:
        if self.result not in RESULTS:
            raise ValueError(f"unknown outcome result {self.result!r}")

    @property
    def ok(self) -> bool:
        return self.result in ("ok", "created", "gone")
