"""The persisted RunPodPool status: the controller's only memory between loops.

Decide is a function of (spec, previous status, observations, now) that returns a new
status and effects; this module is that status. It is frozen: decide builds the next
one with the `with_*` helpers (all pure, all taking `now` where time matters), and
the reconciler writes it back with `for_storage()` and reads it with
`PoolStatus.from_storage()`, which names the path of anything malformed.

Everything time-based is a timestamp, never a loop counter held in memory, so a
restarted controller continues where the last one stopped. Logs are pruned by age
(creates after 1h, datacenter replacements after 24h) and history is bounded, so the
status stays small: 50 members with every field set are well under 64 KiB.

Write it with a replace of the status subresource (re-read and retry on 409), not a
JSON merge patch: keys whose value became None are left out, and a merge patch would
keep their old values.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rpp.model.codec import (
    Fields,
    StatusFormatError,
    drop_none,
    kind_of,
    parse_time,
    stamp,
    write_time,
)
from rpp.model.effects import Effect
from rpp.model.members import MemberRecord
from rpp.model.records import (
    Autoscaling,
    Backoff,
    CapacityRefusal,
    Condition,
    CreateAttempt,
    HistoryEntry,
    PlannedAction,
    Recommendation,
    Rollout,
    set_condition,
)

MODES = ("Observe", "DryRun", "Manage")
HISTORY_LIMIT = 50
CREATE_LOG_WINDOW = dt.timedelta(hours=1)  # limits.maxCreatesPerHour counts this window
COOLDOWN_WINDOW = dt.timedelta(hours=24)  # datacenter replacements count this window
COOLDOWN_THRESHOLD = 2  # replacements in the window that put a datacenter in cooldown
COOLDOWN_PERIOD = dt.timedelta(hours=24)  # how long it is then avoided
# A replacement can matter for window + period: it may pair with a later one.
REPLACEMENT_LOG_KEEP = COOLDOWN_WINDOW + COOLDOWN_PERIOD


@dataclass(frozen=True, kw_only=True)
class PoolStatus:
    """`RunPodPool.status`. Printer columns read mode, ready, desired, costPerHour, planned."""

    mode: str = "Observe"
    observed_generation: int | None = None
    desired: int = 0
    ready: int = 0
    cost_per_hour: float = 0.0
    planned: int = 0  # len(planned_actions): CRD printer columns cannot count arrays
    conditions: tuple[Condition, ...] = ()
    members: tuple[MemberRecord, ...] = ()
    planned_actions: tuple[PlannedAction, ...] = ()
    history: tuple[HistoryEntry, ...] = ()
    autoscaling: Autoscaling | None = None
    create_log: tuple[CreateAttempt, ...] = ()
    datacenter_replacements: Mapping[str, tuple[dt.datetime, ...]] = field(default_factory=dict)
    backoff: Backoff = field(default_factory=Backoff)
    last_capacity_refusal: CapacityRefusal | None = None
    rollout: Rollout | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"status mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        object.__setattr__(
            self,
            "datacenter_replacements",
            {
                datacenter: tuple(stamp(t) for t in times)
                for datacenter, times in self.datacenter_replacements.items()
            },
        )

    # --- storage -------------------------------------------------------------------

    def for_storage(self) -> dict[str, Any]:
        return drop_none(
            {
                "mode": self.mode,
                "observedGeneration": self.observed_generation,
                "desired": self.desired,
                "ready": self.ready,
                "costPerHour": self.cost_per_hour,
                "planned": self.planned,
                "conditions": [c.for_storage() for c in self.conditions],
                "members": [m.for_storage() for m in self.members],
                "plannedActions": [p.for_storage() for p in self.planned_actions],
                "history": [h.for_storage() for h in self.history],
                "autoscaling": None
                if self.autoscaling is None
                else self.autoscaling.for_storage(),
                "createLog": [c.for_storage() for c in self.create_log],
                "datacenterReplacements": {
                    datacenter: [write_time(t) for t in times]
                    for datacenter, times in sorted(self.datacenter_replacements.items())
                },
                "backoff": self.backoff.for_storage(),
                "lastCapacityRefusal": None
                if self.last_capacity_refusal is None
                else self.last_capacity_refusal.for_storage(),
                "rollout": None if self.rollout is None else self.rollout.for_storage(),
            }
        )

    @classmethod
    def from_storage(cls, data: object, path: str = "status") -> PoolStatus:
        """Read stored status; an absent or null status is an empty one."""
        f = Fields({} if data is None else data, path)
        members = f.each("members", MemberRecord.from_storage)
        seen: dict[str, int] = {}
        for index, member in enumerate(members):
            if member.pod_id in seen:
                raise StatusFormatError(
                    f"{path}.members[{index}].podId",
                    f"pod {member.pod_id} is listed twice (also members[{seen[member.pod_id]}])",
                )
            seen[member.pod_id] = index
        replacements: dict[str, tuple[dt.datetime, ...]] = {}
        for datacenter, times, dc_path in f.entries("datacenterReplacements"):
            if not isinstance(times, list):
                raise StatusFormatError(
                    dc_path, f"expected a list of timestamps, got {kind_of(times)}"
                )
            replacements[datacenter] = tuple(
                parse_time(value, f"{dc_path}[{index}]") for index, value in enumerate(times)
            )
        return cls(
            mode=f.choice("mode", MODES, default="Observe"),
            observed_generation=f.opt_integer("observedGeneration"),
            desired=f.integer("desired"),
            ready=f.integer("ready"),
            cost_per_hour=f.number("costPerHour"),
            planned=f.integer("planned"),
            conditions=f.each("conditions", Condition.from_storage),
            members=members,
            planned_actions=f.each("plannedActions", PlannedAction.from_storage),
            history=f.each("history", HistoryEntry.from_storage),
            autoscaling=f.nested("autoscaling", Autoscaling.from_storage),
            create_log=f.each("createLog", CreateAttempt.from_storage),
            datacenter_replacements=replacements,
            backoff=f.nested("backoff", Backoff.from_storage) or Backoff(),
            last_capacity_refusal=f.nested("lastCapacityRefusal", CapacityRefusal.from_storage),
            rollout=f.nested("rollout", Rollout.from_storage),
        )

    # --- members -------------------------------------------------------------------

    def replace(self, **changes: Any) -> PoolStatus:
        return dataclasses.replace(self, **changes)

    def member(self, pod_id: str) -> MemberRecord | None:
        return next((m for m in self.members if m.pod_id == pod_id), None)

    def with_member(self, record: MemberRecord) -> PoolStatus:
        """`record` replacing the member with its pod id, or appended when new."""
        if self.member(record.pod_id) is None:
            return self.replace(members=(*self.members, record))
        return self.replace(
            members=tuple(record if m.pod_id == record.pod_id else m for m in self.members)
        )

    def without_member(self, pod_id: str) -> PoolStatus:
        return self.replace(members=tuple(m for m in self.members if m.pod_id != pod_id))

    # --- conditions, plan, history --------------------------------------------------

    def condition(self, type: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type), None)

    def with_condition(
        self,
        *,
        type: str,
        status: str,
        reason: str,
        message: str,
        now: dt.datetime,
        generation: int | None = None,
    ) -> PoolStatus:
        conditions = set_condition(
            self.conditions,
            type=type,
            status=status,
            reason=reason,
            message=message,
            now=now,
            generation=self.observed_generation if generation is None else generation,
        )
        return self.replace(conditions=conditions)

    def with_plan(self, effects: Sequence[Effect]) -> PoolStatus:
        """plannedActions (and the `planned` count) describing `effects`."""
        planned = tuple(PlannedAction.from_effect(effect) for effect in effects)
        return self.replace(planned_actions=planned, planned=len(planned))

    def with_history(self, *entries: HistoryEntry, limit: int = HISTORY_LIMIT) -> PoolStatus:
        """History with `entries` appended, keeping only the newest `limit`."""
        history = (*self.history, *entries)
        return self.replace(history=history[-limit:] if limit > 0 else ())

    # --- time-windowed logs ---------------------------------------------------------

    def with_create_attempt(
        self,
        now: dt.datetime,
        outcome: str,
        *,
        name: str | None = None,
        replacement_for: str | None = None,
    ) -> PoolStatus:
        attempt = CreateAttempt(
            time=now, outcome=outcome, name=name, replacement_for=replacement_for
        )
        return self.replace(create_log=(*self.create_log, attempt))

    def creates_in_last_hour(self, now: dt.datetime) -> int:
        return sum(1 for attempt in self.create_log if now - attempt.time < CREATE_LOG_WINDOW)

    def with_datacenter_replacement(self, datacenter: str, now: dt.datetime) -> PoolStatus:
        replacements = dict(self.datacenter_replacements)
        replacements[datacenter] = (*replacements.get(datacenter, ()), now)
        return self.replace(datacenter_replacements=replacements)

    def cooldown_until(
        self, now: dt.datetime, *, threshold: int = COOLDOWN_THRESHOLD
    ) -> dict[str, dt.datetime]:
        """Datacenters avoided now, with the end of their cooldown.

        A datacenter whose replacements reach `threshold` within 24h is avoided for 24h
        from the replacement that reached it (the seed's "2 replacements in 24h ->
        avoided for 24h").
        """
        out: dict[str, dt.datetime] = {}
        for datacenter, times in self.datacenter_replacements.items():
            ordered = sorted(times)
            ends = [
                ordered[i] + COOLDOWN_PERIOD
                for i in range(threshold - 1, len(ordered))
                if ordered[i] - ordered[i - threshold + 1] < COOLDOWN_WINDOW
            ]
            if ends and max(ends) > now:
                out[datacenter] = max(ends)
        return out

    def cooldown_datacenters(
        self, now: dt.datetime, *, threshold: int = COOLDOWN_THRESHOLD
    ) -> frozenset[str]:
        """Datacenters avoided now (see `cooldown_until`)."""
        return frozenset(self.cooldown_until(now, threshold=threshold))

    def pruned(self, now: dt.datetime) -> PoolStatus:
        """The logs without entries that no longer count, and history bounded.

        Creates older than 1h leave the create log; replacements leave the datacenter
        log once they can no longer start or extend a cooldown (a datacenter with none
        left disappears). Autoscaling keeps its own windows (rpp/decide/autoscale.py).
        """
        create_log = tuple(a for a in self.create_log if now - a.time < CREATE_LOG_WINDOW)
        replacements = {
            datacenter: recent
            for datacenter, times in self.datacenter_replacements.items()
            if (recent := tuple(t for t in times if now - t < REPLACEMENT_LOG_KEEP))
        }
        return self.replace(
            create_log=create_log,
            datacenter_replacements=replacements,
            history=self.history[-HISTORY_LIMIT:],
        )


__all__ = [
    "MODES",
    "Autoscaling",
    "Backoff",
    "CapacityRefusal",
    "Condition",
    "CreateAttempt",
    "HistoryEntry",
    "MemberRecord",
    "PlannedAction",
    "PoolStatus",
    "Recommendation",
    "Rollout",
    "StatusFormatError",
    "set_condition",
]
