"""What `rpp simulate` prints: a readable timeline, or one JSON object per line.

Where it sits: the simulator's output, fed by the controller loop's results (each
pool's `PoolResult`) and by the world (the fake cloud's ground truth and the scenario's
knobs). It decides nothing; it tells what the controller did and why.

Every record has `t` (seconds since the start) and `event`:

- `transition` {pool, pod, from, to, reason}: a member changed phase;
- `action` {pool, action, pod, detail, mode, outcome}: create, terminate, update, wire,
  unwire or write-slots, as the executor carried it out (or planned it, in DryRun);
- `condition` {pool, type, status, reason, message}: a condition appeared or flipped;
- `rollout` {pool, image, phase, canary, verdict, judgedBy, message, updating}: the
  release of a new image changed phase or verdict (status.rollout);
- `loop` {pool, mode, ready, desired, wired, members, costPerHour, rollout}: after each
  reconcile (`rollout` is the release's phase, or None);
- `cloud` {kind, pod, name, datacenter, gpuType, image, detail}: the fake cloud's
  ground truth, whoever caused it (created, deleted, updated, fault);
- `scenario` {do, detail}: a scenario event outside the cloud (load, apply,
  controller-restart);
- `recovery` {pool, action, pod, detail}: the pool recovered its memory: a status
  rebuilt from ground truth, a pod found from a create a stopped loop wrote down, an
  intent settled (status.history entries `rebuild`, `adopt` of a created pod, `settled`);
- `violation` {loop, invariant, detail}: with `--check`, an invariant the run broke,
  at the time it broke (rpp/sim/check/), listed after the run;
- `end` {pool, status}: the pool's final status, as `kubectl get rpp -o yaml` shows it.

No record shows a secret: each is scrubbed by the running controller process's redactor
(`scrub`), as the process's log is (rpp/adapters/redaction.py).

The text form prints the same records for a reader: loops only when something a reader
cares about moved, DryRun plans only when they change, no Reconciling or Stalled flips
(they restate Ready and the other conditions for GitOps tools), and a member table at
the end.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from rpp.adapters.clock import Clock
from rpp.controller.reconcile import PoolResult
from rpp.decide.state.conditions import RECONCILING, STALLED
from rpp.model.status import PoolStatus
from rpp.sim.world import CloudChange


class Timeline:
    """Collects the records of one simulation and writes them as they happen."""

    def __init__(self, *, clock: Clock, out: TextIO | None = None, as_json: bool = False) -> None:
        self.clock = clock
        self.start = clock.now()
        self.out = out
        self.as_json = as_json
        self.records: list[dict[str, Any]] = []
        self.scrub: Callable[[str], str] | None = None
        """The controller process's redactor (rpp/sim/run.py sets the world's): what the
        simulator shows is one more way out of the process, scrubbed as its log is."""
        self._conditions: dict[str, dict[str, str]] = {}
        self._last_loop: dict[str, tuple[Any, ...]] = {}
        self._conditions_told: set[tuple[str, str]] = set()
        self._last_plan: dict[str, tuple[str, ...]] = {}
        self._last_rollout: dict[str, tuple[Any, ...]] = {}
        self._history: dict[str, set[tuple[Any, ...]]] = {}
        self._said: set[tuple[Any, ...]] = set()  # repeatable lines since the last news
        self._repeats = 0
        self._repeated_until = 0.0

    def seconds(self, when: dt.datetime | None = None) -> float:
        return round(((when or self.clock.now()) - self.start).total_seconds(), 3)

    def emit(self, event: str, **fields: Any) -> None:
        at = fields.pop("at", None)
        t = self.seconds() if at is None else at
        record: dict[str, Any] = {"t": t, "event": event, **fields}
        if self.scrub is not None:
            record = _scrubbed(record, self.scrub)
        self.records.append(record)
        if self.out is None:
            return
        if self.as_json:
            self.out.write(json.dumps(record) + "\n")
            return
        line = self._text(record)
        if line is None:
            return
        key = _repeat_key(record)
        if key is not None and key in self._said:
            # A pool waiting for stock says the same every backoff: say it once.
            self._repeats += 1
            self._repeated_until = record["t"]
            return
        if self._repeats:
            self.out.write(
                f"{clock_text(self._repeated_until)}  ... and {self._repeats} more lines like "
                "the ones above\n"
            )
            self._repeats = 0
        if key is None:
            self._said.clear()
        else:
            self._said.add(key)
        self.out.write(line + "\n")

    # -- feeds ---------------------------------------------------------------------------

    def result(self, result: PoolResult) -> None:
        """Everything one reconcile of one pool did."""
        pool = result.pool
        status = result.status
        mode = status.mode if status is not None else None
        if result.decision is not None:
            for tr in result.decision.transitions:
                self.emit(
                    "transition",
                    pool=pool,
                    pod=tr.pod,
                    **{"from": tr.source, "to": tr.target},
                    reason=tr.reason,
                )
        for done in result.results:
            effect = done.effect
            if effect.action == "event":
                continue
            pod = done.pod.id if done.pod is not None else effect.pod
            self.emit(
                "action",
                pool=pool,
                action=effect.action,
                pod=pod,
                detail=done.detail or effect.describe(),
                mode=mode,
                outcome=done.result.value,
            )
        if status is None:
            return
        self._recoveries(pool, status)
        seen = self._conditions.setdefault(pool, {})
        for cond in status.conditions:
            if seen.get(cond.type) != cond.status:
                seen[cond.type] = cond.status
                self.emit(
                    "condition",
                    pool=pool,
                    type=cond.type,
                    status=cond.status,
                    reason=cond.reason,
                    message=cond.message,
                )
        self._rollout(pool, status)
        self.emit("loop", pool=pool, **loop_fields(status))

    def _rollout(self, pool: str, status: PoolStatus) -> None:
        """A `rollout` record when the release's phase, canary or verdict changed."""
        release = status.rollout
        if release is None:
            return
        verdict = release.verdict
        result = None if verdict is None else verdict.result.value
        key = (release.image, release.phase, release.canary, result)
        if self._last_rollout.get(pool) == key:
            return
        self._last_rollout[pool] = key
        if verdict is not None and verdict.result.value in ("Passed", "Failed", "Skipped"):
            message = verdict.message
        else:
            message = release.waiting or (verdict.message if verdict else "")
        self.emit(
            "rollout",
            pool=pool,
            image=release.image,
            phase=release.phase.value,
            canary=release.canary,
            verdict=result,
            judgedBy=None if verdict is None else verdict.judged_by,
            message=message,
            updating=list(release.updating),
        )

    def _recoveries(self, pool: str, status: PoolStatus) -> None:
        """History entries that say how the pool recovered its memory, once each."""
        seen = self._history.setdefault(pool, set())
        keys = set()
        for entry in status.history:
            key = (entry.time, entry.action, entry.pod, entry.detail)
            keys.add(key)
            if key in seen or not _recovery(entry.action, entry.outcome, entry.detail):
                continue
            self.emit(
                "recovery", pool=pool, action=entry.action, pod=entry.pod, detail=entry.detail
            )
        self._history[pool] = keys

    def cloud(self, change: CloudChange) -> None:
        self.emit(
            "cloud",
            kind=change.kind,
            pod=change.pod_id,
            name=change.name,
            datacenter=change.datacenter,
            gpuType=change.gpu_type,
            image=change.image,
            detail=change.detail,
        )

    def scenario(self, do: str, detail: str) -> None:
        self.emit("scenario", do=do, detail=detail)

    def violation(self, violation: Any) -> None:
        """A broken invariant (rpp/sim/check/checker.py `Violation`), at its own time."""
        self.emit(
            "violation",
            at=violation.t,
            loop=violation.loop,
            invariant=violation.invariant,
            detail=violation.detail,
        )

    def end(self, pool: str, status: Mapping[str, Any] | None) -> None:
        """The final table; `status` None when the pool was deleted during the run."""
        if status is None:
            self.emit("end", pool=pool, status=None, deleted=True)
        else:
            self.emit("end", pool=pool, status=dict(status))

    # -- text ----------------------------------------------------------------------------

    def _condition_text(self, r: Mapping[str, Any]) -> str:
        """`raised`/`cleared` for a problem condition that flips; a first appearance as
        False (DeletionBlocked while a deletion progresses) and Ready, whose True is the good
        news, say their status instead, so nothing reads as cleared that was never raised."""
        key = (r["pool"], r["type"])
        first = key not in self._conditions_told
        self._conditions_told.add(key)
        true = r["status"] == "True"
        if r["type"] == "Ready" or (first and not true):
            flag = f"is {r['status']}"
        else:
            flag = "raised" if true else "cleared"
        return f"{r['type']} {flag} ({r['reason']}): {r['message']}"

    def _text(self, r: Mapping[str, Any]) -> str | None:
        at = clock_text(r["t"])
        kind = r["event"]
        if kind == "transition":
            return f"{at}  {r['pool']}  {r['pod']}  {r['from']} -> {r['to']}: {r['reason']}"
        if kind == "action":
            return self._action_text(at, r)
        if kind == "condition":
            if r["type"] in (RECONCILING, STALLED):
                return None  # for GitOps tools: Ready and the conditions above tell it
            return f"{at}  {r['pool']}  {self._condition_text(r)}"
        if kind == "loop":
            phases = r["members"]
            wired = tuple((pod, phases.get(pod, "?")) for pod in r["wired"])
            key = (r["mode"], r["ready"], r["desired"], wired)
            if self._last_loop.get(r["pool"]) == key:
                return None
            self._last_loop[r["pool"]] = key
            return (
                f"{at}  {r['pool']}  = {r['mode']}: {r['ready']} Ready of {r['desired']} "
                f"desired; in nginx: {_wired_text(wired)}; ${r['costPerHour']:g}/h"
            )
        if kind == "cloud":
            if r["kind"] == "fault":
                return f"{at}  ! {r['detail']}"
            where = f"{r['datacenter']}, {r['gpuType']}, {r['image']}"
            return (
                f"{at}  cloud: pod {r['pod']} ({r['name']}) {r['kind']} [{where}]: {r['detail']}"
            )
        if kind == "scenario":
            return f"{at}  ! {r['detail']}"
        if kind == "rollout":
            canary = f" (canary {r['canary']})" if r["canary"] else ""
            said = f": {r['message']}" if r["message"] else ""
            return f"{at}  {r['pool']}  release of {r['image']}: {r['phase']}{canary}{said}"
        if kind == "recovery":
            return f"{at}  {r['pool']}  {r['action']}: {r['detail']}"
        if kind == "violation":
            return f"{at}  VIOLATION (loop {r['loop']}) {r['invariant']}: {r['detail']}"
        if kind == "end":
            if r["status"] is None:
                return f"\nRunPodPool {r['pool']} is deleted: no status is left to show."
            return "\n" + member_table(r["pool"], r["status"], start=self.start)
        return None

    def _action_text(self, at: str, r: Mapping[str, Any]) -> str | None:
        if r["action"] in ("wire", "unwire"):
            return None  # the transition and the write-slots line say it
        if r["outcome"] == "planned":
            plan = self._last_plan.setdefault(r["pool"], ())
            if r["detail"] in plan:
                return None
            self._last_plan[r["pool"]] = (*plan[-20:], r["detail"])
            return f"{at}  {r['pool']}  would: {r['detail']}"
        return (
            f"{at}  {r['pool']}  {r['action']} {r['pod'] or ''} -> {r['outcome']}: {r['detail']}"
        )


def _scrubbed(value: Any, scrub: Callable[[str], str]) -> Any:
    """`value` with every string in it scrubbed, its shape kept (tuples stay tuples);
    a string with no secret in it is the very object given (an enum's value stays one)."""
    if isinstance(value, str):
        scrubbed = scrub(value)
        return value if scrubbed == value else scrubbed
    if isinstance(value, Mapping):
        return {_scrubbed(k, scrub): _scrubbed(v, scrub) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v, scrub) for v in value]
    if type(value) is tuple:
        return tuple(_scrubbed(v, scrub) for v in value)
    return value


def _recovery(action: str, outcome: str, detail: str) -> bool:
    return (
        action == "rebuild"
        or outcome == "settled"
        or (action == "adopt" and detail.startswith("found pod"))
    )


def _repeat_key(r: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What makes a line a repeat of an earlier one; None for lines that are news."""
    if r["event"] == "condition":
        return ("condition", r["pool"], r["type"], r["status"], r["reason"])
    if r["event"] == "action" and r["outcome"] not in ("ok", "created", "gone", "planned"):
        return ("action", r["pool"], r["action"], r["outcome"], r["detail"])
    return None


def _wired_text(wired: tuple[tuple[str, str], ...]) -> str:
    """The pods in nginx slots; one that serves without being Ready says its phase.

    SERVING (`status.ready`) counts members in phase Ready. A Flagged pod keeps its slot
    (it serves) until its replacement is Ready, so nginx can hold more pods than that: the
    line names both rather than calling the Flagged one ready.
    """
    if not wired:
        return "none"
    return " ".join(pod if phase == "Ready" else f"{pod} ({phase})" for pod, phase in wired)


def loop_fields(status: PoolStatus) -> dict[str, Any]:
    wired = sorted((m for m in status.members if m.slot is not None), key=lambda m: m.slot or 0)
    return {
        "mode": status.mode,
        "ready": status.ready,
        "desired": status.desired,
        "wired": [m.pod_id for m in wired],
        "members": {m.pod_id: m.phase for m in status.members},
        "costPerHour": status.cost_per_hour,
        "rollout": None if status.rollout is None else status.rollout.phase.value,
    }


def clock_text(seconds: float) -> str:
    """+H:MM:SS since the start."""
    whole = int(seconds)
    return f"+{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


TABLE_LEGEND = (
    "  READY: the Ready condition, True when the desired pods are Ready and in nginx;",
    "  REASON: why. SERVING: members in phase Ready, in an nginx slot, whose probes do",
    "  not fail hard; a Flagged pod still in nginx also serves until its replacement does.",
    "  PLANNED: the actions DryRun would take (status.plannedActions), always 0 in Manage",
    "  and Observe. ROLLOUT: where the release of spec.image is (status.rollout.phase).",
    "  SINCE: when the member entered its phase.",
)


def member_table(pool: str, stored: Mapping[str, Any], *, start: dt.datetime) -> str:
    """`kubectl get rpp -o wide`, then one row per member."""
    status = PoolStatus.from_stored(stored)
    ready = status.condition("Ready")
    head = ["NAME", "READY", "REASON", "MODE", "SERVING", "DESIRED", "COST/H", "PLANNED"]
    head.append("ROLLOUT")
    row = [
        pool,
        ready.status if ready is not None else "",
        ready.reason if ready is not None else "",
        status.mode,
        str(status.ready),
        str(status.desired),
        f"{status.cost_per_hour:g}",
        str(status.planned),
        status.rollout.phase.value if status.rollout else "",
    ]
    lines = [*_columns([head, row]), *TABLE_LEGEND]
    members = [["POD", "NAME", "PHASE", "SLOT", "DATACENTER", "GPU", "IMAGE", "SINCE"]]
    for m in sorted(status.members, key=lambda m: (m.slot is None, m.slot or 0, m.pod_id)):
        since = clock_text((m.since - start).total_seconds())
        members.append(
            [
                m.pod_id,
                m.name,
                m.phase,
                str(m.slot) if m.slot is not None else "-",
                m.datacenter or "-",
                m.gpu_type or "-",
                m.image or "-",
                since,
            ]
        )
    return "\n".join([*lines, "", *_columns(members)])


def _columns(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
