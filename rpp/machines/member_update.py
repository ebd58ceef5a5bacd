"""The member machine's in-place image update: its guards and actions, and its canary's.

Where it sits: decide code, part of the member state machine (rpp/machines/member.py),
which inherits these callbacks from `UpdateCallbacks`; python-statemachine finds guards
and actions by name on the machine class, so they read, and are documented, exactly
as if written there (`rpp diagrams` reads their docstrings for the docs). They are
apart because the update is one story: drain, UpdatePod, restart, rewire, and on
failure the rollback to the old image, whose policy is rpp/machines/rollout.py.

A release's canary (status.rollout.canary, chosen by rpp/decide/release/steps.py) takes two
transitions of its own: once its update took it starts its bake (`start_bake`: wired
like any updated pod, with an Event saying it bakes), and when its bake fails the pool
signals `canary_failure`: it is unwired at once and drained (`reject_canary`), then
rolled back in place through the same path as a failed update (`send_rollback`,
UpdatePod with rollback, then Ready on the old image or, failing that, terminated).
Nothing here does I/O or reads the clock.
"""

from __future__ import annotations

import datetime as dt

from rpp.machines import rollout
from rpp.machines.member_view import MemberView
from rpp.machines.signals import MemberSignals
from rpp.model.durations import format_duration
from rpp.model.effects import EventType, RecordEvent, TerminatePod, Unwire, UpdatePod, Wire
from rpp.model.members import DrainReason, UpdateProgress, UpdateStep


class UpdateCallbacks:
    """Guards and actions of the update transitions, mixed into `MemberMachine`."""

    view: MemberView

    # --- effects every action uses ------------------------------------------------

    def _unwire(self, reason: str) -> None:
        record = self.view.current
        if record.slot is not None:
            self.view.emit(Unwire(pod_id=record.pod_id, slot=record.slot, reason=reason))
            self.view.change(slot=None)

    def _wire(self, slot: int | None) -> None:
        assert slot is not None, "guarded by slot_offered"
        self.view.change(slot=slot)
        self.view.emit(Wire(pod_id=self.view.current.pod_id, slot=slot))

    def _terminate(self, reason: str, *, now: dt.datetime, cooldown: bool) -> None:
        record = self.view.current
        datacenter = record.datacenter if cooldown else None
        pod_id, name = record.pod_id, record.name
        terminate = TerminatePod(
            pod_id=pod_id, name=name, reason=reason, cooldown_datacenter=datacenter
        )
        self.view.emit(terminate)
        self.view.change(terminate_requested_at=now, terminate_error=None)

    def _event(self, kind: EventType, reason: str, message: str) -> None:
        pod_id = self.view.current.pod_id
        self.view.emit(RecordEvent(type=kind, reason=reason, message=message, pod_id=pod_id))

    # --- guards: pure reads of the record, the signals and now ---------------------

    def update_planned(self) -> bool:
        """it was drained for an image update"""
        return self.view.current.update is not None

    def new_process_running(self) -> bool:
        """its process restarted after the update (a rollback needs only passing probes)"""
        return rollout.new_process_running(self.view.current)

    def update_failed(self, signals: MemberSignals, now: dt.datetime) -> bool:
        """RunPod refused the update, or it did not restart and pass in time"""
        return rollout.update_failed(
            self.view.current,
            refused=signals.update_refused,
            timeout_s=signals.settings.update_timeout_s,
            now=now,
        )

    def rolling_back(self) -> bool:
        """it is already rolling back to its old image"""
        return rollout.rolling_back(self.view.current)

    def rollback_timed_out(self, signals: MemberSignals, now: dt.datetime) -> bool:
        """the rollback did not pass probes within the update timeout either"""
        return rollout.rollback_timed_out(
            self.view.current, timeout_s=signals.settings.update_timeout_s, now=now
        )

    def is_canary(self, signals: MemberSignals) -> bool:
        """it is the release's canary"""
        return signals.canary

    def canary_failed(self, signals: MemberSignals) -> bool:
        """its canary bake failed against the pods still on the old image"""
        return signals.canary_failure is not None and signals.rollback_to is not None

    def update_unconfirmed(self, signals: MemberSignals) -> bool:
        """its update was written down but never landed (the loop stopped)"""
        return signals.unconfirmed == "update" and self.view.current.update is not None

    def rollback_planned(self) -> bool:
        """it was drained to go back to its old image"""
        update = self.view.current.update
        return update is not None and update.rollback and update.step == UpdateStep.DRAIN

    # --- actions: change the record, append effects --------------------------------

    def send_update(self, now: dt.datetime) -> None:
        """UpdatePod(new image)

        The executor merges the pod's current env with envFromSecret at act time.
        """
        record = self.view.current
        update = record.update
        assert update is not None, "guarded by update_planned"
        probe = record.last_probe
        self.view.emit(
            UpdatePod(
                pod_id=record.pod_id,
                name=record.name,
                image=update.to_image,
                from_image=update.from_image,
                reason="rolling image update",
            )
        )
        before = None if probe is None else probe.process_start
        self.view.change(
            pass_streak=0,
            update=update.replace(
                step=UpdateStep.RESTART, started_at=now, process_start_before=before
            ),
        )

    def resend_update(self, now: dt.datetime) -> None:
        """UpdatePod again (the image it was going to)"""
        record = self.view.current
        update = record.update
        assert update is not None, "guarded by update_unconfirmed"
        self.view.emit(
            UpdatePod(
                pod_id=record.pod_id,
                name=record.name,
                image=update.running_image,
                from_image=update.to_image if update.rollback else update.from_image,
                reason="sent again: the loop that sent it stopped before RunPod answered",
                rollback=update.rollback,
            )
        )
        self.view.change(update=update.replace(started_at=now))

    def finish_update(self, signals: MemberSignals) -> None:
        """Wire(slot); Event PodUpdated or UpdateRolledBack"""
        record = self.view.current
        update = record.update
        assert update is not None, "guarded by new_process_running"
        self._wire(signals.offered_slot)
        # A new process: the health rules start over, not from the old one's breaches.
        self.view.change(image=update.running_image, update=None, drain_reason=None, breaches={})
        if update.rollback:
            text = (
                f"pod {record.pod_id} is back on {update.from_image} "
                f"after {update.to_image} failed"
            )
            self._event("Warning", "UpdateRolledBack", text)
        else:
            self._event("Normal", "PodUpdated", f"pod {record.pod_id} now runs {update.to_image}")

    def roll_back(self, signals: MemberSignals, now: dt.datetime) -> None:
        """UpdatePod(old image, rollback); Event UpdateFailed

        The pool sees the rollback effect and backs image updates off for 30m
        (rpp/machines/rollout.py).
        """
        record = self.view.current
        update = record.update
        assert update is not None, "guarded by update_failed"
        why = "RunPod refused it" if signals.update_refused else "no healthy restart in time"
        self.view.emit(
            UpdatePod(
                pod_id=record.pod_id,
                name=record.name,
                image=update.from_image,
                from_image=update.to_image,
                reason=f"update to {update.to_image} failed: {why}",
                rollback=True,
            )
        )
        probe = record.last_probe
        before = None if probe is None else probe.process_start
        self.view.change(
            update=update.replace(
                step=UpdateStep.RESTART,
                started_at=now,
                process_start_before=before,
                rollback=True,
            )
        )
        text = f"pod {record.pod_id}: update to {update.to_image} failed ({why}); rolling back"
        self._event("Warning", "UpdateFailed", text)

    def abandon_update(self, now: dt.datetime) -> None:
        """TerminatePod, datacenter to cooldown; Event UpdateAbandoned"""
        record = self.view.current
        text = f"pod {record.pod_id} ({record.name}) failed on both images; terminating"
        self._terminate(text, now=now, cooldown=True)
        self._event("Warning", "UpdateAbandoned", text)

    def start_bake(self, signals: MemberSignals) -> None:
        """Wire(slot); Event CanaryBaking"""
        record = self.view.current
        update = record.update
        assert update is not None, "guarded by new_process_running"
        self._wire(signals.offered_slot)
        self.view.change(image=update.to_image, update=None, drain_reason=None, breaches={})
        bake = format_duration(signals.settings.canary_bake_s)
        text = (
            f"pod {record.pod_id} now runs {update.to_image}: the release's canary bakes for "
            f"{bake} against the pods still on {update.from_image}"
        )
        self._event("Normal", "CanaryBaking", text)

    def reject_canary(self, signals: MemberSignals) -> None:
        """Unwire; Event CanaryFailed

        The pod drains, then goes back to its old image in place (`send_rollback`).
        """
        record = self.view.current
        assert signals.rollback_to is not None, "guarded by canary_failed"
        self._unwire("its canary bake failed")
        self.view.change(
            drain_reason=DrainReason.UPDATE.value,
            update=UpdateProgress(
                from_image=signals.rollback_to, to_image=record.image or "", rollback=True
            ),
        )
        text = f"canary {record.pod_id} on {record.image} failed: {signals.canary_failure}"
        self._event("Warning", "CanaryFailed", text)

    def send_rollback(self, now: dt.datetime) -> None:
        """UpdatePod(old image, rollback)"""
        record = self.view.current
        update = record.update
        assert update is not None, "guarded by rollback_planned"
        probe = record.last_probe
        self.view.emit(
            UpdatePod(
                pod_id=record.pod_id,
                name=record.name,
                image=update.from_image,
                from_image=update.to_image,
                reason=f"its canary bake on {update.to_image} failed",
                rollback=True,
            )
        )
        before = None if probe is None else probe.process_start
        self.view.change(
            pass_streak=0,
            update=update.replace(
                step=UpdateStep.RESTART, started_at=now, process_start_before=before
            ),
        )
