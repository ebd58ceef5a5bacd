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

Both steps ask the release machine (rpp/machines/release.py) for the phase, rehydrated
from status.rollout: `bake` sends it the verdict (`judge_bake`), `roll` what the pods
say (`roll`). When the machine asks for a canary or the next pods,
rpp/decide/release/next_pods.py chooses them; this module drains them.

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

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from rpp.decide.health.pool_wide import PoolHealth
from rpp.decide.health.registry import PROMETHEUS_RULES
from rpp.decide.release import canary as judging
from rpp.decide.release import next_pods
from rpp.decide.state.conditions import Cond
from rpp.decide.state.loop_state import LoopState
from rpp.machines import member_step, rollout
from rpp.machines import release as release_machine
from rpp.machines.release import Ask, ReleaseSettings
from rpp.model.members import DrainReason, MemberRecord, Phase
from rpp.model.observations import PodMetrics
from rpp.model.rollout_records import BakeTally, Rollout, RolloutPhase, Verdict, VerdictResult
from rpp.model.spec import RunPodPoolSpec
from rpp.model.status import PoolStatus

CANARY_FAILED = "CanaryFailed"
"""UpdateFailed's reason for a release whose image is not tried again (the pool is then
Stalled: rpp/decide/progress.py)."""
_METRIC_RULES = PROMETHEUS_RULES


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
    baking = _baking(status, target)
    if baking is None:
        return None
    release, canary = baking
    settings = loop.spec.rollout.canary
    if not settings.enabled:
        skipped = Verdict(
            result=VerdictResult.SKIPPED,
            judged_by="probes",
            message="rollout.canary.enabled is false: the canary passes without its bake",
        )
        judged = release_machine.judge_bake(
            release.replace(verdict=skipped), settings=_settings(loop.spec)
        )
        loop.status.adopt(status.replace(rollout=judged))
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
    judged = release_machine.judge_bake(
        release.replace(bake=tallied, verdict=verdict), settings=_settings(loop.spec)
    )
    loop.status.adopt(status.replace(rollout=judged))
    if verdict.result is VerdictResult.PASSED:
        loop.note(f"canary {canary.pod_id} passed its bake: {verdict.message}", pod=canary.pod_id)
    failure = verdict.message if verdict.result is VerdictResult.FAILED else None
    return CanaryCall(pod_id=canary.pod_id, failure=failure, rollback_to=release.from_image)


def _baking(status: PoolStatus, target: str | None) -> tuple[Rollout, MemberRecord] | None:
    """The release of `target` in Canary or Baking and its canary, serving on `target`."""
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
    return release, canary


def _flagged(health: PoolHealth, pod_id: str) -> tuple[str | None, bool]:
    """The health rule that flagged the canary, with its reason (not while pool-wide),
    and whether that rule reads Prometheus rather than the probes."""
    verdict = health.members.get(pod_id)
    if verdict is None or not verdict.flagged or health.pool_wide:
        return None, False
    rule = verdict.flagged[0]
    reason = verdict.reasons.get(rule) or "breached for its full duration"
    return f"{rule}: {reason}", rule in _METRIC_RULES


def roll(
    loop: LoopState, planned: list[MemberRecord], *, wants_create: bool, pool_wide: bool
) -> None:
    """The `roll` step, after the machines: the phase, the next drains, UpdateFailed."""
    target = loop.spec.image
    if not target:
        loop.status.replace(rollout=None)
        _update_failed(loop, planned, release=None)
        return
    pods = next_pods.ReleasePods.of(planned, target=target)
    release = _skip_canary_if_served(_this_release(loop, target), pods)
    until = loop.status.current.backoff.update_until
    step = release_machine.roll(
        release,
        settings=_settings(loop.spec),
        signals=pods.signals(release, update_until=until),
        now=loop.now,
    )
    release, waiting = step.record, step.waiting
    drained: list[MemberRecord] = []
    if step.asks is Ask.NEXT_PODS:
        drained, waiting = next_pods.next_pods(
            loop, pods, wants_create=wants_create, pool_wide=pool_wide
        )
    elif step.asks is Ask.CANARY:
        chosen, waiting = next_pods.canary(
            loop, pods, wants_create=wants_create, pool_wide=pool_wide
        )
        if chosen is not None:
            drained = [chosen]
            release = Rollout(
                image=target, phase=release.phase, canary=chosen.pod_id, from_image=chosen.image
            )
    for victim in drained:
        order = member_step.drain(
            victim,
            reason=DrainReason.UPDATE.value,
            image=target,
            signals=loop.plain(victim.pod_id),
            now=loop.now,
        )
        planned[planned.index(victim)] = loop.order(victim, order)
    if waiting:
        loop.note(f"image roll waits: {waiting}")
    release = release.replace(
        updated=sum(1 for m in pods.live if m.image == target and m.update is None),
        total=len(pods.live),
        updating=tuple(m.pod_id for m in [*pods.updating, *drained]),
        waiting=waiting,
    )
    loop.status.replace(rollout=release)
    _update_failed(loop, planned, release=release)


def _this_release(loop: LoopState, target: str) -> Rollout:
    """The release of `target` so far; a new one when spec.image changed."""
    release = loop.status.current.rollout
    if release is not None and release.image == target:
        return release
    # A new release: the last one's verdict, canary and backoff do not hold it back.
    status = loop.status.current
    loop.status.replace(backoff=status.backoff.replace(update_until=None))
    return Rollout(image=target, phase=RolloutPhase.CANARY)


def _skip_canary_if_served(release: Rollout, pods: next_pods.ReleasePods) -> Rollout:
    """A canary proves an image the pool has not served; one it serves already (going
    back to the image most pods run, or a stray pod on an old one) needs none."""
    if release.verdict is not None:
        return release
    target = pods.target
    serving = [
        m.pod_id
        for m in pods.live
        if m.phase == Phase.READY and m.slot is not None and m.image == target
        if m.pod_id != release.canary
    ]
    if not serving:
        return release
    verdict = Verdict(
        result=VerdictResult.SKIPPED,
        judged_by="probes",
        message=f"the pool already serves {target} on {len(serving)} Ready pod(s): "
        "no canary needed",
    )
    return release.replace(verdict=verdict)


def _settings(spec: RunPodPoolSpec) -> ReleaseSettings:
    """The rollout settings the release machine's guards read."""
    return ReleaseSettings(
        canary_enabled=spec.rollout.canary.enabled, max_parallel=spec.rollout.max_parallel
    )


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
