"""The end of a run: nothing leaked, and the pool reached its size if it could.

Where it sits: an invariant group of the simulator's checker (rpp/sim/check/checker.py),
checked once after the last loop:

- no leaked pod: every pod of the pool RunPod still lists is a member in the pool's
  stored status, or a create written down by its name that the run ended before the
  next loop adopted (a pod the controller made and forgot bills forever);
- convergence: a pool in Manage mode, not paused, has `desired` members Ready (or in
  an image update, which brings them back in place) and no more pods than that,
  unless stock or its own caps make it impossible: maxPods below desired, the hour's
  creates used up, desired pods at the highest candidate price over maxHourlyCostUsd, or too
  little room in the allowed datacenters (maxPerDatacenter, stock, deny, cooldown). A
  flagged pod that still serves leaves only once its replacement serves, so while one
  does, the pool needs room for one pod more than desired. A scale-down under way (one
  pod at a time, each through its drain) is on its way there, and so is a surplus pod
  that began draining or terminating lately (a flagged pod let go when the pool shrank).

Runs that end right after a disturbance cannot have converged; the soak's scenarios
end with a quiet settle time (rpp/sim/soak.py). A disturbance can land late even so: a
release started before the settle time fails on both images half an hour later, and
its pod is terminated. A pod of the pool that RunPod stopped listing, or that began
terminating, less than one create-and-warm time (health.warmupTimeout plus 5 loops)
before the end excuses a pool one short; so does a create's call RunPod failed
(createPod or the catalog reads it makes: a fault, which a scenario may have armed long
before the pool next created) less than that time plus the create backoff before the end.
"""

from __future__ import annotations

import datetime as dt

from rpp.decide.capacity.safeguards import CREATE_BACKOFF
from rpp.model.members import DrainReason, Phase
from rpp.model.spec import RunPodPoolSpec
from rpp.model.status import PoolStatus
from rpp.sim.check.checker import LEAKED_POD, Checker, NoChecks
from rpp.sim.check.serving import TERMINATE_RETRY_S
from rpp.sim.cloud_model import FakePod

CREATE_BACKOFF_S = CREATE_BACKOFF.total_seconds()
HEAL_LOOPS = 5  # loops to notice a pod left, create its successor and wire it


class Ending(NoChecks):
    """Leaks and convergence."""

    def on_finish(self, checker: Checker) -> None:
        status = checker.status()
        live = checker.owned()
        known = {m.pod_id for m in status.members} if status is not None else set()
        # A create whose answer the last loop never read (the run ended) is written down
        # by name (an intent, or the create log): the next loop adopts it, not a leak.
        named = set() if status is None else _created_names(status)
        for pod in live:
            if pod.info.pod_id not in known and pod.info.name not in named:
                checker.violate(
                    LEAKED_POD,
                    f"pod {pod.info.pod_id} ({pod.info.name}, ${pod.cost_per_hr:g}/h) is the "
                    "pool's and RunPod lists it, but the pool's status has no member for it "
                    "and no create by its name",
                    loop=checker.loops,
                )
        spec = checker.spec()
        if status is None or status.mode != "Manage" or spec.paused:
            return
        in_place = sum(1 for m in status.members if _in_place(m.phase, m.drain_reason))
        if in_place == status.desired and len(live) == status.desired:
            return
        shrinking = any(
            m.drain_reason == DrainReason.SCALE_DOWN and m.phase != Phase.READY
            for m in status.members
        )
        if shrinking and in_place >= status.desired:
            return  # a scale-down under way, one pod at a time: it gets there
        surplus = len(live) - status.desired
        if in_place >= status.desired and 0 < surplus <= _leaving(checker, spec, status):
            return  # the surplus began to leave lately (a flagged pod let go): it goes
        why_not = impossible(checker, spec, status, live)
        if why_not is None:
            checker.violate(
                "convergence",
                f"the run ended with {status.ready} Ready of {status.desired} desired and "
                f"{len(live)} pod(s) listed, though stock and caps allow {status.desired}",
                loop=checker.loops,
            )


def _created_names(status: PoolStatus) -> set[str]:
    names = {a.name for a in status.create_log if a.name}
    return names | {i.name for i in status.intents if i.action == "create"}


def _leaving(checker: Checker, spec: RunPodPoolSpec, status: PoolStatus) -> int:
    """Members draining (not for an update) or terminating since no longer than a drain,
    a terminate retry and 3 loops before the end: on their way out, in time."""
    bound = spec.drain.period + TERMINATE_RETRY_S + 3 * checker.world.interval
    since = checker.now - dt.timedelta(seconds=bound)
    return sum(
        1
        for m in status.members
        if m.since >= since
        and (
            m.phase == Phase.TERMINATING
            or (m.phase == Phase.DRAINING and m.drain_reason != DrainReason.UPDATE)
        )
    )


def _in_place(phase: Phase, drain_reason: DrainReason | None) -> bool:
    """Ready, or in an image update (one pod at a time, it comes back in place)."""
    return phase in (Phase.READY, Phase.UPDATING) or (
        phase == Phase.DRAINING and drain_reason == DrainReason.UPDATE
    )


def impossible(
    checker: Checker, spec: RunPodPoolSpec, status: PoolStatus, live: list[FakePod]
) -> str | None:
    """Why stock or the pool's caps keep it from its size, or why it had no time to
    get there; None when nothing does."""
    heal = spec.health.warmup_timeout + HEAL_LOOPS * checker.world.interval
    left = [*checker.departures]
    left += [
        (m.since - checker.start).total_seconds()
        for m in status.members
        if m.phase == Phase.TERMINATING
    ]
    late = [t for t in left if t > checker.seconds - heal]
    if late:
        return (
            f"a pod of the pool left {checker.seconds - max(late):g}s before the end, less "
            f"than one create-and-warm time ({heal:g}s)"
        )
    refused = [t for t in checker.create_faults if t > checker.seconds - heal - CREATE_BACKOFF_S]
    if refused:
        return (
            f"RunPod failed a create's call {checker.seconds - max(refused):g}s before the "
            f"end, less than one create-and-warm time and the create backoff ({heal:g}s + "
            f"{CREATE_BACKOFF_S:g}s)"
        )
    serving_flagged = any(m.phase == Phase.FLAGGED and m.slot is not None for m in status.members)
    desired = status.desired + (1 if serving_flagged else 0)
    limits = spec.limits
    if desired > limits.max_pods:
        return f"limits.maxPods {limits.max_pods} < desired {desired}"
    if limits.max_creates_per_hour < 1:
        return "limits.maxCreatesPerHour is 0"
    # Creates whose outcome was unknown count too (the controller cannot know they made
    # nothing): the hour's budget is the create log's, never below RunPod's own count. A
    # budget freed less than one warm-up before the end had no time to give a Ready pod.
    warm = dt.timedelta(seconds=spec.health.warmup_timeout)
    since = checker.seconds - 3600.0 - warm.total_seconds()
    made = sum(1 for t in checker.create_times if t > since)
    recent = max(made, status.creates_in_last_hour(checker.now - warm))
    if recent >= limits.max_creates_per_hour:
        return f"{recent} creates in the hour before the end: limits.maxCreatesPerHour"
    cooling = status.cooldown_datacenters(checker.now)
    allowed = [
        dc
        for dc in spec.datacenters.allow
        if dc not in spec.datacenters.deny and dc not in cooling
    ]
    stock = checker.world.cloud.stock
    prices = [p.cost_per_hr for p in live] + [
        entry.cost_per_hr
        for (dc, gpu, cloud), entry in stock.items()
        if dc in allowed and gpu in spec.gpu_types and cloud == spec.cloud
    ]
    if desired * max(prices, default=0.0) > limits.max_hourly_cost_usd:
        return f"{desired} pods at up to ${max(prices):g}/h pass limits.maxHourlyCostUsd"
    room = 0
    for dc in allowed:
        here = sum(1 for p in live if p.info.datacenter == dc)
        free = sum(
            entry.count
            for (where, gpu, cloud), entry in stock.items()
            if where == dc and gpu in spec.gpu_types and cloud == spec.cloud
        )
        room += min(spec.max_per_datacenter, here + free)
    if room < desired:
        return f"room for {room} pods in the allowed datacenters, {desired} desired"
    return None
