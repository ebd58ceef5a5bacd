"""The release of a new image: a canary judged against its peers, then the other pods.

Where it sits: decide, the `bake` and `roll` steps of rpp/decide/pool.py, around the
member machines (pure; the member-level update and rollback policy is
rpp/machines/rollout.py):

- `bake`, before the machines: while the canary serves on spec.image, this loop's
  Prometheus values of the canary and of its peers (the Ready pods still on the old
  image) go into the bake's tally, and rpp/decide/release/canary.py judges it. A failed
  verdict reaches the canary's machine as a signal, which drains it and rolls it back
  in place; a passed one lets the others follow.
- `roll`, after the machines: the release's phase (status.rollout.phase), the next
  pods to drain for their update, and the UpdateFailed condition.

A release of spec.image goes:

1. Canary. When a Ready pod runs another image, and the pool is otherwise idle and
   healthy with at least 2 Ready pods, the oldest such pod is drained and updated in
   place. "Otherwise idle and healthy": no member warming, flagged, draining,
   updating or terminating, none in breach of a health rule, no create wanted, no
   pool-wide degradation, no update backoff. Replacements and missing replicas go
   first. No canary when the pool already serves spec.image on a Ready pod (going
   back to the image most pods run): the release goes straight to Rolling.
2. Baking: the canary, back in nginx, serves for rollout.canary.bake and is judged.
3. Rolling, once it passed (or rollout.canary.enabled is false): up to
   rollout.maxParallel pods drain and update at once. A first pod may always go, as
   the one-at-a-time roll always did (at least 2 Ready); each further one only while
   Ready stays at or above the floor: replicas.min, or more when the autoscaler's
   value says the load needs more, ceil(Ready x value / target), the HPA formula.
4. Done when every pod runs spec.image.

RolledBack: the canary failed its bake. Its image is not tried again until spec.image
changes, UpdateFailed says why with the numbers, and pods created meanwhile get the
old image. A pod whose update does not start in time is rolled back too
(rpp/machines/rollout.py); that release resumes after the 30-minute backoff, with a new
canary if its canary had not passed. A new spec.image starts over: no backoff, no
verdict.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from rpp.decide.health.rules import PoolHealth, Rule
from rpp.decide.release import canary as judging
from rpp.decide.state.conditions import Cond
from rpp.decide.state.loop_state import LoopState
from rpp.machines import member_step, rollout
from rpp.model.members import DrainReason, MemberRecord, Phase
from rpp.model.observations import PodMetrics
from rpp.model.rollout_records import BakeTally, Rollout, RolloutPhase, Verdict, VerdictResult
from rpp.model.spec import RunPodPoolSpec

_BUSY = frozenset(
    {Phase.WARMING, Phase.FLAGGED, Phase.DRAINING, Phase.UPDATING, Phase.TERMINATING}
)
CANARY_FAILED = "CanaryFailed"
"""UpdateFailed's reason for a release whose image is not tried again (the pool is then
Stalled: rpp/decide/progress.py)."""
_PASSED = frozenset({VerdictResult.PASSED, VerdictResult.SKIPPED})
_METRIC_RULES = frozenset({Rule.ERROR_RATE, Rule.RELATIVE_LATENCY})


@dataclass(frozen=True)
class CanaryCall:
    """What the baking canary's machine hears this loop (MemberSignals' canary fields)."""

    pod_id: str
    failure: str | None
    rollback_to: str | None


def create_image(
    spec: RunPodPoolSpec, release: Rollout | None, members: Sequence[MemberRecord]
) -> str | None:
    """The image a pod created now gets: spec.image, unless its release has not passed
    its canary yet or was rolled back; then the image the pool trusts: the canary's old
    one, or before a canary was chosen, the one most Ready pods run."""
    if spec.image is None:
        return None  # the template's image: no release to hold back
    if release is not None and release.image == spec.image:
        if release.phase in (RolloutPhase.ROLLING, RolloutPhase.DONE):
            return spec.image
        if release.from_image is not None:
            return release.from_image
    # A release just starting (spec.image changed this loop) has not passed either.
    running = Counter(
        m.image
        for m in members
        if m.phase == Phase.READY and m.slot is not None and m.image and m.image != spec.image
    )
    return running.most_common(1)[0][0] if running else spec.image


def bake(loop: LoopState, health: PoolHealth) -> CanaryCall | None:
    """Tally and judge the baking canary; None when no canary serves on spec.image."""
    status, target = loop.status.current, loop.spec.image
    release = status.rollout
    if release is None or target is None or release.image != target or not release.canary:
        return None
    if release.phase not in (RolloutPhase.CANARY, RolloutPhase.BAKING):
        return None
    canary = status.member(release.canary)
    if canary is None or canary.phase != Phase.READY:
        return None
    if canary.slot is None and canary.quarantine is None:
        return None  # not serving yet; a quarantined canary still bakes, and fails
    if canary.image != target or canary.update is not None:
        return None
    settings = loop.spec.rollout.canary
    if not settings.enabled:
        skipped = Verdict(
            result=VerdictResult.SKIPPED,
            judged_by="probes",
            message="rollout.canary.enabled is false: the canary passes without its bake",
        )
        loop.status.adopt(
            status.replace(rollout=release.replace(phase=RolloutPhase.ROLLING, verdict=skipped))
        )
        return None
    tallied = release.bake
    if tallied is None or tallied.started_at != canary.since:
        tallied = BakeTally(started_at=canary.since)
    per_pod = loop.obs.prometheus.per_pod
    peers = [
        per_pod[m.pod_id]
        for m in status.members
        if m.phase == Phase.READY and m.slot is not None and m.image != target
        if m.pod_id in per_pod
    ]
    tallied = judging.tally(
        tallied, canary=per_pod.get(canary.pod_id, PodMetrics()), peers=peers, now=loop.now
    )
    flagged, by_metrics = _flagged(health, canary.pod_id)
    verdict = judging.judge(
        tallied,
        limits=judging.CanaryLimits.from_spec(settings),
        now=loop.now,
        flagged=flagged,
        flagged_by="metrics" if by_metrics else "probes",
        queries=bool(loop.spec.prometheus.error_ratio_query or loop.spec.prometheus.latency_query),
    )
    passed = verdict.result is VerdictResult.PASSED
    phase = RolloutPhase.ROLLING if passed else RolloutPhase.BAKING
    loop.status.adopt(
        status.replace(rollout=release.replace(phase=phase, bake=tallied, verdict=verdict))
    )
    if passed:
        loop.note(f"canary {canary.pod_id} passed its bake: {verdict.message}", pod=canary.pod_id)
    failure = verdict.message if verdict.result is VerdictResult.FAILED else None
    return CanaryCall(pod_id=canary.pod_id, failure=failure, rollback_to=release.from_image)


def _flagged(health: PoolHealth, pod_id: str) -> tuple[str | None, bool]:
    """The health rule that flagged the canary, with its reason (not while pool-wide),
    and whether that rule reads Prometheus rather than the probes."""
    verdict = health.members.get(pod_id)
    if verdict is None or not verdict.flagged or health.pool_wide:
        return None, False
    rule = verdict.flagged[0]
    reason = verdict.reasons.get(rule) or "breached for its full duration"
    return f"{rule}: {reason}", rule in _METRIC_RULES


def _in_release(m: MemberRecord, target: str) -> bool:
    """Draining or updating to `target` (not rolling back from it)."""
    update = m.update
    return (
        m.phase in (Phase.DRAINING, Phase.UPDATING)
        and update is not None
        and update.to_image == target
        and not update.rollback
    )


def roll(
    loop: LoopState, planned: list[MemberRecord], *, wants_create: bool, pool_wide: bool
) -> None:
    """The `roll` step, after the machines: the phase, the next drains, UpdateFailed."""
    status, spec, now, target = loop.status.current, loop.spec, loop.now, loop.spec.image
    if not target:
        loop.status.adopt(status.replace(rollout=None))
        _update_failed(loop, planned, release=None)
        return
    release = status.rollout
    if release is None or release.image != target:
        # A new release: the last one's verdict, canary and backoff do not hold it back.
        release = Rollout(image=target, phase=RolloutPhase.CANARY)
        status = status.replace(backoff=status.backoff.replace(update_until=None))
        loop.status.adopt(status)
    live = [m for m in planned if m.phase != Phase.GONE]
    updating = [m for m in live if _in_release(m, target)]
    rolling_back = [m for m in live if m.update is not None and m.update.rollback]
    # A quarantined pod is out of nginx for now, not for good: it still runs its image.
    stale = [
        m
        for m in live
        if m.phase == Phase.READY
        and (m.slot is not None or m.quarantine is not None)
        and m.image
        and m.image != target
    ]
    verdict = release.verdict
    serving = [
        m.pod_id
        for m in live
        if m.phase == Phase.READY and m.slot is not None and m.image == target
        if m.pod_id != release.canary
    ]
    if serving and verdict is None:
        # A canary proves an image the pool has not served; this one it serves already
        # (going back to the image most pods run, or a stray pod on an old one).
        verdict = Verdict(
            result=VerdictResult.SKIPPED,
            judged_by="probes",
            message=f"the pool already serves {target} on {len(serving)} Ready pod(s): "
            "no canary needed",
        )
        release = release.replace(verdict=verdict)
    passed = not spec.rollout.canary.enabled or (verdict is not None and verdict.result in _PASSED)
    paused = status.backoff.updates_blocked(now)
    waiting: str | None = None
    drained: list[MemberRecord] = []
    if verdict is not None and verdict.result is VerdictResult.FAILED:
        phase = RolloutPhase.ROLLED_BACK
        waiting = f"{target} failed its canary; it is not tried again until spec.image changes"
    elif rolling_back or (paused and (stale or updating)):
        phase = RolloutPhase.ROLLED_BACK
        until = status.backoff.update_until
        waiting = (
            f"image updates are paused after a failed update until {until:%H:%M:%SZ}"
            if paused and until is not None
            else "a pod goes back to its old image after its update failed"
        )
    elif not stale and not updating:
        phase = RolloutPhase.DONE
    elif passed:
        phase = RolloutPhase.ROLLING
        if len(updating) < spec.rollout.max_parallel:
            why = _not_idle(live, wants_create=wants_create, pool_wide=pool_wide, ours=target)
            drained, waiting = (
                ([], why) if why else _parallel(loop, live=live, stale=stale, updating=updating)
            )
    else:
        canary = next((m for m in live if m.pod_id == release.canary), None)
        if canary is not None and canary in updating:
            phase = RolloutPhase.CANARY
        elif canary is not None and canary.phase == Phase.READY and canary.image == target:
            phase = RolloutPhase.BAKING
        else:
            phase = RolloutPhase.CANARY
            waiting = _not_idle(live, wants_create=wants_create, pool_wide=pool_wide, ours=None)
            ready = sum(1 for m in live if m.phase == Phase.READY and m.slot is not None)
            if waiting is None and ready < 2:
                waiting = f"{ready} Ready pod(s); an in-place roll needs 2"
            held = [m.pod_id for m in stale if m.pod_id in loop.held]
            if waiting is None and len(held) == len(stale):
                waiting = f"RunPod's answer for pod(s) {', '.join(held)} does not read"
            if waiting is None:
                drained = [_oldest([m for m in stale if m.pod_id not in loop.held])]
                release = Rollout(
                    image=target,
                    phase=phase,
                    canary=drained[0].pod_id,
                    from_image=drained[0].image,
                )
    for victim in drained:
        signals = loop.plain(victim.pod_id)
        step = member_step.drain(
            victim, reason=DrainReason.UPDATE.value, image=target, signals=signals, now=now
        )
        planned[planned.index(victim)] = loop.order(victim, step)
    if waiting:
        loop.note(f"image roll waits: {waiting}")
    in_flight = [m.pod_id for m in updating] + [m.pod_id for m in drained]
    release = release.replace(
        phase=phase,
        updated=sum(1 for m in live if m.image == target and m.update is None),
        total=len(live),
        updating=tuple(in_flight),
        waiting=waiting,
    )
    loop.status.replace(rollout=release)
    _update_failed(loop, planned, release=release)


def _oldest(members: Sequence[MemberRecord]) -> MemberRecord:
    return min(members, key=lambda m: (m.created_at or m.since, m.pod_id))


def _not_idle(
    live: Sequence[MemberRecord], *, wants_create: bool, pool_wide: bool, ours: str | None
) -> str | None:
    """Why the pool is not idle and healthy enough to take one more pod out, if it is not.

    Pods already updating for this release (`ours`) do not count as busy."""
    busy = sorted(
        {str(m.phase) for m in live if m.phase in _BUSY and not (ours and _in_release(m, ours))}
    )
    breaching = sorted(m.pod_id for m in live if m.breaches)
    if breaching:
        busy.append(f"pods in breach of a health rule: {', '.join(breaching)}")
    if busy or wants_create:
        return "the pool is busy (" + ", ".join(busy or ["a create is pending"]) + ")"
    if pool_wide:
        return "every Ready pod is degraded"
    return None


def _parallel(
    loop: LoopState,
    *,
    live: Sequence[MemberRecord],
    stale: Sequence[MemberRecord],
    updating: Sequence[MemberRecord],
) -> tuple[list[MemberRecord], str | None]:
    """The stale pods to drain now, oldest first, and why no more (None: none left)."""
    spec = loop.spec
    ready = sum(1 for m in live if m.phase == Phase.READY and m.slot is not None)
    floor, why_floor = _floor(loop, ready=ready)
    chosen: list[MemberRecord] = []
    in_flight = len(updating)
    # A pod RunPod's answer did not read is held: no order picks it
    # (rpp/decide/ledger/unreadable.py).
    movable = [m for m in stale if m.pod_id not in loop.held]
    if not movable:
        held = ", ".join(m.pod_id for m in stale)
        return [], f"RunPod's answer for pod(s) {held} does not read"
    for m in sorted(movable, key=lambda m: (m.created_at or m.since, m.pod_id)):
        if in_flight >= spec.rollout.max_parallel:
            return chosen, None
        if in_flight == 0 and ready < 2:
            return chosen, f"{ready} Ready pod(s); an in-place roll needs 2"
        if in_flight > 0 and ready - 1 < floor:
            return chosen, (
                f"{in_flight} pod(s) update now; one more would leave {ready - 1} Ready, "
                f"below {floor} ({why_floor})"
            )
        chosen.append(m)
        ready -= 1
        in_flight += 1
    return chosen, None


def _floor(loop: LoopState, *, ready: int) -> tuple[int, str]:
    """The Ready count a parallel roll keeps: replicas.min, or what the load needs."""
    spec = loop.spec
    floor, why = spec.replicas.min, f"replicas.min is {spec.replicas.min}"
    scaling = loop.status.current.autoscaling
    if spec.autoscaling.enabled and scaling is not None and scaling.value is not None:
        needed = math.ceil(ready * scaling.value / spec.autoscaling.target)
        if needed > floor:
            floor = needed
            why = (
                f"the load needs {needed}: ceil({ready} Ready x {scaling.value:g} / "
                f"target {spec.autoscaling.target:g})"
            )
    return floor, why


def _update_failed(
    loop: LoopState, planned: Sequence[MemberRecord], *, release: Rollout | None
) -> None:
    """UpdateFailed: a canary that failed its bake, a pod rolling back, or the backoff."""
    verdict = None if release is None else release.verdict
    if release is not None and verdict is not None and verdict.result is VerdictResult.FAILED:
        loop.conds.set(
            Cond.UPDATE_FAILED,
            true=True,
            reason=CANARY_FAILED,
            message=f"the canary {release.canary} of {release.image} failed its bake and "
            f"goes back to {release.from_image}: {verdict.message}; {release.image} is not "
            "tried again until spec.image changes",
        )
        return
    until = loop.status.current.backoff.update_until
    failure = rollout.update_failure(planned, update_until=until, now=loop.now)
    if failure is not None:
        loop.conds.set(Cond.UPDATE_FAILED, true=True, reason="RolledBack", message=failure)
    else:
        loop.conds.clear(Cond.UPDATE_FAILED, reason="NoFailedUpdate", message="no update failed")
