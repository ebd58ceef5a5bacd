"""The working state of one decide call, shared by the pool steps.

Where it sits: decide. rpp/decide/pool.py builds one `LoopState` per call and hands it
to each pool step (rpp/decide/steps.py); steps append effects, log lines and phase
transitions to it (`Note`), change the status it builds through `status`
(rpp/decide/state/working_status.py) and set conditions through `conds`. Nothing here does I/O.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field

from rpp.decide.nginx_slots import RenderedSlots
from rpp.decide.state.conditions import Conditions
from rpp.decide.state.working_status import WorkingStatus
from rpp.machines import member_step
from rpp.machines.signals import MemberSettings, MemberSignals
from rpp.model.effects import Effect, RecordEvent, Unwire, Wire
from rpp.model.members import MemberRecord, Phase
from rpp.model.observations import PoolObservation, RunPodPod
from rpp.model.records import HistoryEntry
from rpp.model.spec import Mode, RunPodPoolSpec


@dataclass(frozen=True)
class Note:
    """One line of the loop's explanation, with the pod and effect it is about.

    Decide logs nothing itself: the reconciler logs these, with `pod` and `effect` as
    structured fields (rpp/adapters/logs.py), not as text in the line.
    """

    text: str
    pod: str | None = None
    effect: str | None = None


@dataclass(frozen=True)
class Transition:
    """A member changed phase this loop (kept in status: real in every mode)."""

    pod: str
    source: str
    target: str
    reason: str


def settings_for(spec: RunPodPoolSpec) -> MemberSettings:
    """The member machine's durations, from the spec (an update gets a warm-up's time)."""
    return MemberSettings(
        warmup_timeout_s=spec.health.warmup_timeout,
        drain_period_s=spec.drain.period,
        update_timeout_s=spec.health.warmup_timeout,
        canary_bake_s=spec.rollout.canary.bake,
    )


@dataclass
class LoopState:
    """One decide call's inputs and what its steps produced so far."""

    pool: str
    spec: RunPodPoolSpec
    obs: PoolObservation
    now: dt.datetime
    conds: Conditions
    proxy_url: str
    settings: MemberSettings
    status: WorkingStatus  # the status this loop builds; `conds` writes through it too
    held: frozenset[str] = frozenset()  # owned pods RunPod's answer did not read
    # members RunPod created (201) and does not list yet (rpp/decide/capacity/unconfirmed.py)
    awaiting: frozenset[str] = frozenset()
    unconfirmed: dict[str, str] = field(default_factory=dict)  # pod id -> intent action
    effects: list[Effect] = field(default_factory=list)
    log: list[Note] = field(default_factory=list)
    transitions: list[Transition] = field(default_factory=list)
    slots: RenderedSlots | None = None  # the last slots render: the caller's, then this loop's
    _owned: tuple[RunPodPod, ...] = field(default=(), init=False, repr=False)
    _owned_by_id: dict[str, RunPodPod] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.conds.working is not self.status:
            raise ValueError("the loop's Conditions must write to the loop's WorkingStatus")

    @property
    def owned(self) -> tuple[RunPodPod, ...]:
        """The pool's pods in this loop's listing, in its order (set through `own`)."""
        return self._owned

    def own(self, pods: Iterable[RunPodPod]) -> None:
        """Take the pool's pods for this loop, and index them by id for `pod`: every
        member and pool step looks its pod up, so the index is built here, once."""
        self._owned = tuple(pods)
        self._owned_by_id = {}
        for p in self._owned:
            self._owned_by_id.setdefault(p.id, p)

    def pod(self, pod_id: str) -> RunPodPod | None:
        """The owned pod with this id as RunPod listed it this loop (the first, if twice)."""
        return self._owned_by_id.get(pod_id)

    def note(self, text: str, *, pod: str | None = None, effect: str | None = None) -> None:
        self.log.append(Note(text, pod=pod, effect=effect))

    def plain(self, pod_id: str, *, probe: bool = False) -> MemberSignals:
        """Signals with only the listing (and the probe): for pool orders and NotActing."""
        return MemberSignals(
            settings=self.settings,
            pod=self.pod(pod_id),
            probe=self.obs.probes.get(pod_id) if probe else None,
        )

    def order(self, before: MemberRecord, step: member_step.MemberStep) -> MemberRecord:
        """Take a pool order's step: its effects, and its transition in Manage."""
        self.effects += step.effects
        if self.spec.mode is Mode.MANAGE:
            self.transition(before, step)
        return step.record

    def transition(self, before: MemberRecord, step: member_step.MemberStep) -> None:
        """Note a phase change, with the machine's own words for why; and a move within
        a phase that changes what nginx serves (quarantine, its release, an unwire)."""
        after = step.record
        rewired = any(isinstance(e, Wire | Unwire) for e in step.effects)
        if after.phase == before.phase and not (step.moves and rewired):
            return
        said = [e.message for e in step.effects if isinstance(e, RecordEvent)]
        done = [e.describe() for e in step.effects if not isinstance(e, RecordEvent)]
        if after.phase == Phase.DRAINING and after.drain_reason:
            said.insert(0, f"draining ({after.drain_reason})")
        reason = "; ".join(said + done) or after.flagged_reason or step.moves[-1].event
        source, target = _phase_as_read(before), _phase_as_read(after)
        self.transitions.append(Transition(before.pod_id, source, target, reason))
        self.status.with_history(
            HistoryEntry(
                time=self.now,
                action="transition",
                outcome=f"{source} -> {target}",
                detail=reason,
                pod=before.pod_id,
            )
        )
        self.note(f"{source} -> {target}: {reason}", pod=before.pod_id)


def _phase_as_read(record: MemberRecord) -> str:
    """The phase as an operator reads it: a Ready pod taken out of nginx is `Ready
    (quarantined)`, so leaving nginx and coming back never read as `Ready -> Ready`."""
    return f"{record.phase} (quarantined)" if record.quarantine is not None else record.phase
