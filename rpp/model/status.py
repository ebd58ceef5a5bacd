"""The persisted RunPodPool status: the controller's only memory between loops.

Decide is a function of (spec, previous status, observations, now) that returns a new
status and effects; this module is that status. It is frozen: decide builds the next
one with the `with_*` helpers (all pure, all taking `now` where time matters), and
the reconciler writes it back with `stored()` and reads it with
`PoolStatus.from_stored()`, which names the path of anything malformed.

Everything time-based is a timestamp, never a loop counter held in memory, so a
restarted controller continues where the last one stopped. Logs are pruned by age
(creates after 1h, datacenter replacements after 24h), history and texts are bounded,
so the status stays small. Measured as compact JSON (tests/model/test_status.py, which holds
these bounds): 50 members with every field set at once, more than a member holds in any
phase, take 73,691 bytes (bound 75 KiB); the whole status with them, full history and
every condition at its longest message 116,910 bytes (bound 120 KiB). The API server
stores an object up to about 1.5 MiB (etcd's default request limit), over 13 times that.

Write it with a replace of the status subresource (re-read and retry on 409), not a
JSON merge patch: keys whose value became None are left out, and a merge patch would
keep their old values.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Annotated, Literal, get_args

from pydantic import Field

from rpp.model.codec import (
    SORTED_KEYS,
    Number,
    StatusFormatError,
    StatusModel,
    Timestamp,
    Whole,
)
from rpp.model.effects import Effect
from rpp.model.members import MemberRecord, Phase
from rpp.model.records import (
    Autoscaling,
    Backoff,
    CapacityRefusal,
    Condition,
    ConditionStatus,
    CreateAttempt,
    Detail,
    HistoryEntry,
    Intent,
    PlannedAction,
    Recommendation,
    set_condition,
)
from rpp.model.rollout_records import Rollout

ModeName = Literal["Observe", "DryRun", "Manage"]
MODES: tuple[str, ...] = get_args(ModeName)
HISTORY_LIMIT = 50
CREATE_LOG_WINDOW = dt.timedelta(hours=1)  # limits.maxCreatesPerHour counts this window
COOLDOWN_WINDOW = dt.timedelta(hours=24)  # datacenter replacements count this window
COOLDOWN_THRESHOLD = 2  # replacements in the window that put a datacenter in cooldown
COOLDOWN_PERIOD = dt.timedelta(hours=24)  # how long it is then avoided
# A replacement can matter for window + period: it may pair with a later one.
REPLACEMENT_LOG_KEEP = COOLDOWN_WINDOW + COOLDOWN_PERIOD


SPEND_PODS_KEPT = 32
"""Pod ids status.spend remembers as the pool's this month, beside its members (the ones
billed last kept): few, as the status is near its size bound (tests/model/test_status.py)."""


class Spend(StatusModel):
    """What RunPod billed the pool's own pods (`GET /v2/billing/pods`), in USD, as of
    `readAt`: the last full hour, today and this month so far (UTC days and months).
    Read at most every 10 minutes, and RunPod's bill itself lags its pods, so these trail
    `costPerHour`, the catalog's estimate, which the cost cap keeps using."""

    last_hour: Number = 0.0
    today: Number = 0.0
    this_month: Number = 0.0
    read_at: Timestamp | None = None
    """When RunPod's billing was read; None while no read has succeeded yet."""
    error: Detail | None = None
    """Why the latest billing read failed; the figures are then those of `read_at`."""
    pods: tuple[str, ...] = ()
    """The pods billed to this pool this month, kept so a pod that is gone still counts
    (rpp/decide/spend.py says how a pod is attributed)."""


class PoolStatus(StatusModel):
    """`RunPodPool.status`. Printer columns read mode, ready, desired, costPerHour, planned."""

    mode: ModeName = "Observe"
    observed_generation: Whole | None = None
    desired: Whole = 0
    ready: Whole = 0
    cost_per_hour: Number = 0.0
    planned: Whole = 0  # len(planned_actions): CRD printer columns cannot count arrays
    conditions: tuple[Condition, ...] = ()
    members: tuple[MemberRecord, ...] = ()
    planned_actions: tuple[PlannedAction, ...] = ()
    history: tuple[HistoryEntry, ...] = ()
    autoscaling: Autoscaling | None = None
    create_log: tuple[CreateAttempt, ...] = ()
    # Actions written down before acting, until their outcome is known (decide/intents.py).
    intents: tuple[Intent, ...] = Field(default=(), exclude_if=lambda intents: not intents)
    datacenter_replacements: Annotated[Mapping[str, tuple[Timestamp, ...]], SORTED_KEYS] = Field(
        default_factory=dict
    )
    backoff: Backoff = Field(default_factory=Backoff)
    last_capacity_refusal: CapacityRefusal | None = None
    rollout: Rollout | None = None
    writer: str | None = None
    """The controller process that wrote this status (its Lease identity): how a second
    controller acting on the pool is seen (rpp/controller/writers.py)."""
    # RunPod's list price per GPU by GPU type, as the last create read it from the
    # catalog: decide prices a create with it (rpp/decide/capacity/prices.py).
    catalog_prices: Annotated[Mapping[str, Number], SORTED_KEYS] = Field(
        default_factory=dict, exclude_if=lambda prices: not prices
    )
    # What RunPod really billed, beside the catalog estimate; None until a billing read.
    spend: Spend | None = None

    @classmethod
    def from_stored(cls, data: object, path: str = "status") -> PoolStatus:
        """Read stored status; an absent or null status is an empty one."""
        status = super().from_stored({} if data is None else data, path)
        seen: dict[str, int] = {}
        for index, member in enumerate(status.members):
            at = f"{path}.members[{index}]"
            if member.pod_id in seen:
                raise StatusFormatError(
                    f"{at}.podId",
                    f"pod {member.pod_id} is listed twice (also members[{seen[member.pod_id]}])",
                )
            seen[member.pod_id] = index
            if member.phase is Phase.UPDATING and member.update is None:
                raise StatusFormatError(f"{at}.update", "required while phase is Updating")
        return status

    # --- members -------------------------------------------------------------------

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
        status: ConditionStatus,
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
        """Creates that count toward limits.maxCreatesPerHour now: the logged ones of the
        last hour, and every create written down and not settled yet (it may have made
        a pod; rpp/decide/ledger/intents.py logs it once its outcome is known)."""
        logged = sum(1 for attempt in self.create_log if now - attempt.time < CREATE_LOG_WINDOW)
        return logged + len(self.pending_creates())

    # --- intents ----------------------------------------------------------------------

    def pending_creates(self) -> tuple[Intent, ...]:
        return tuple(i for i in self.intents if i.action == "create")

    def with_intent(self, intent: Intent) -> PoolStatus:
        """`intent` in place of any other about the same pod and action."""
        kept = tuple(i for i in self.intents if i.key != intent.key)
        return self.replace(intents=(*kept, intent))

    def without_intent(self, action: str, pod_or_name: str) -> PoolStatus:
        kept = tuple(i for i in self.intents if i.key != (action, pod_or_name))
        return self.replace(intents=kept)

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
        left disappears). Autoscaling keeps its own windows (rpp/decide/capacity/autoscale.py).
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
    "Intent",
    "MemberRecord",
    "PlannedAction",
    "PoolStatus",
    "Recommendation",
    "Rollout",
    "Spend",
    "StatusFormatError",
    "set_condition",
]
