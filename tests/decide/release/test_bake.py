"""The `bake` step (rpp/decide/release/steps.py): the serving canary's values tallied
against its peers', the verdict, the phase the release machine gives it, and what the
canary's own machine hears.

The pool "web" runs a release of NEW_IMAGE in Baking: its canary p1 serves NEW_IMAGE,
p2 and p3 still serve OLD_IMAGE (conftest.py). The bake is 10 minutes (the default).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from rpp.decide.health.pool_wide import PoolHealth
from rpp.decide.release.steps import CanaryCall
from rpp.decide.state.loop_state import LoopState
from rpp.model.members import Phase, Quarantine, UpdateProgress
from rpp.model.observations import PodMetrics
from rpp.model.rollout_records import BakeTally, Rollout, RolloutPhase, VerdictResult
from tests.decide.builders import NOW, member
from tests.decide.release.conftest import (
    MINUTE,
    NEW_IMAGE,
    OLD_IMAGE,
    bake,
    flagged_by,
    release_loop,
    release_spec,
    serving,
)

BAKING = Rollout(image=NEW_IMAGE, phase=RolloutPhase.BAKING, canary="p1", from_image=OLD_IMAGE)
QUERIES = {"errorRatioQuery": "sum(errors) / sum(requests)", "job": "web-pods"}


def baking_loop(
    *, served: dt.timedelta, rollout: Rollout = BAKING, canary_fields: Any = None, **loop: Any
) -> LoopState:
    """The release's loop with its canary p1 serving NEW_IMAGE for `served`."""
    fields = {"slot": 8081, "image": NEW_IMAGE, **(canary_fields or {})}
    canary = member("p1", Phase.READY, since=NOW - served, **fields)
    peers = [serving("p2", 8082), serving("p3", 8083)]
    return release_loop(canary, *peers, rollout=rollout, **loop)


def judged(loop: LoopState) -> Rollout:
    release = loop.status.current.rollout
    assert release is not None
    return release


def test_a_canary_that_served_its_whole_bake_passes_and_the_others_may_follow() -> None:
    loop = baking_loop(served=11 * MINUTE)
    assert bake(loop) == CanaryCall(pod_id="p1", failure=None, rollback_to=OLD_IMAGE)
    release = judged(loop)
    assert release.phase is RolloutPhase.ROLLING
    assert release.verdict is not None
    assert (release.verdict.result, release.verdict.judged_by) == (
        VerdictResult.PASSED,
        "probes",
    )
    assert f"canary p1 passed its bake: {release.verdict.message}" in [n.text for n in loop.log]


def test_a_canary_mid_bake_keeps_baking_and_tallies_this_loop() -> None:
    per_pod = {
        "p1": PodMetrics(error_ratio=0.01),
        "p2": PodMetrics(error_ratio=0.02),
        "p3": PodMetrics(error_ratio=0.0),
    }
    spec = release_spec(prometheus=QUERIES)
    loop = baking_loop(served=5 * MINUTE, spec=spec, per_pod=per_pod)
    call = bake(loop)
    assert call is not None
    assert call.failure is None
    release = judged(loop)
    assert release.phase is RolloutPhase.BAKING
    assert release.verdict is not None
    assert release.verdict.result is VerdictResult.BAKING
    assert release.bake is not None
    assert (release.bake.started_at, release.bake.last_at) == (NOW - 5 * MINUTE, NOW)
    assert (release.bake.error_loops, release.bake.canary_error_sum) == (1, 0.01)
    assert release.bake.peers_error_sum == pytest.approx(0.01)  # the peers' mean
    assert release.bake.peers == 2


def test_the_tally_carries_on_from_the_last_loop() -> None:
    so_far = BakeTally(
        started_at=NOW - 5 * MINUTE, last_at=NOW - MINUTE / 2, error_loops=9, canary_error_sum=0.09
    )
    per_pod = {"p1": PodMetrics(error_ratio=0.01), "p2": PodMetrics(error_ratio=0.01)}
    loop = baking_loop(
        served=5 * MINUTE,
        rollout=BAKING.replace(bake=so_far),
        spec=release_spec(prometheus=QUERIES),
        per_pod=per_pod,
    )
    bake(loop)
    tally = judged(loop).bake
    assert tally is not None
    assert (tally.started_at, tally.error_loops) == (NOW - 5 * MINUTE, 10)
    assert tally.canary_error_sum == pytest.approx(0.1)


def test_a_canary_back_in_nginx_again_starts_a_new_tally() -> None:
    stale = BakeTally(started_at=NOW - 50 * MINUTE, error_loops=90, canary_error_sum=9.0)
    loop = baking_loop(served=5 * MINUTE, rollout=BAKING.replace(bake=stale))
    bake(loop)
    tally = judged(loop).bake
    assert tally is not None
    assert (tally.started_at, tally.error_loops) == (NOW - 5 * MINUTE, 0)


@pytest.mark.parametrize(
    ("rule", "judged_by"), [("ErrorRate", "metrics"), ("Unreachable", "probes")]
)
def test_a_flagged_canary_fails_and_its_machine_hears_why(rule: str, judged_by: str) -> None:
    loop = baking_loop(served=2 * MINUTE)
    call = bake(loop, flagged_by("p1", rule, "breached for 2 minutes"))
    assert call is not None
    assert call.failure is not None
    assert call.failure.startswith(f"a health rule flagged it: {rule}: breached for 2 minutes")
    assert call.rollback_to == OLD_IMAGE
    release = judged(loop)
    assert release.verdict is not None
    assert (release.verdict.result, release.verdict.judged_by) == (VerdictResult.FAILED, judged_by)
    # Still Baking here: the roll step, after the machines, rolls it back.
    assert release.phase is RolloutPhase.BAKING


def test_a_pool_wide_degradation_does_not_fail_the_canary() -> None:
    loop = baking_loop(served=2 * MINUTE)
    flagged = flagged_by("p1", "ErrorRate", "every pod errs")
    call = bake(loop, PoolHealth(members=flagged.members, pool_wide=True))
    assert call is not None
    assert call.failure is None


def test_a_quarantined_canary_still_bakes() -> None:
    out = {"slot": None, "quarantine": Quarantine(since=NOW - MINUTE, reason="HTTP 502")}
    loop = baking_loop(served=2 * MINUTE, canary_fields=out)
    call = bake(loop, flagged_by("p1", "Unreachable", "no answer"))
    assert call is not None
    assert call.failure is not None


def test_with_the_canary_disabled_a_serving_canary_passes_without_its_bake() -> None:
    spec = release_spec(rollout={"canary": {"enabled": False}})
    loop = baking_loop(served=MINUTE, spec=spec)
    assert bake(loop) is None
    release = judged(loop)
    assert release.phase is RolloutPhase.ROLLING
    assert release.verdict is not None
    assert release.verdict.result is VerdictResult.SKIPPED
    assert release.verdict.message == (
        "rollout.canary.enabled is false: the canary passes without its bake"
    )
    assert release.bake is None


@pytest.mark.parametrize(
    ("rollout", "canary_fields"),
    [
        pytest.param(BAKING.replace(phase=RolloutPhase.ROLLING), {}, id="already rolling"),
        pytest.param(BAKING.replace(phase=RolloutPhase.ROLLED_BACK), {}, id="rolled back"),
        pytest.param(BAKING.replace(image=OLD_IMAGE), {}, id="another image's release"),
        pytest.param(BAKING.replace(canary=None), {}, id="no canary chosen"),
        pytest.param(BAKING, {"slot": None}, id="canary out of nginx"),
        pytest.param(BAKING, {"image": OLD_IMAGE}, id="canary on the old image"),
        pytest.param(
            BAKING,
            {"update": UpdateProgress(from_image=OLD_IMAGE, to_image=NEW_IMAGE)},
            id="canary still updating",
        ),
    ],
)
def test_no_bake_without_a_canary_serving_the_release_image(
    rollout: Rollout, canary_fields: dict[str, Any]
) -> None:
    loop = baking_loop(served=11 * MINUTE, rollout=rollout, canary_fields=canary_fields)
    assert bake(loop) is None
    assert loop.status.current.rollout == rollout


def test_no_bake_for_a_canary_that_is_not_ready() -> None:
    canary = member("p1", Phase.DRAINING, image=NEW_IMAGE)
    loop = release_loop(canary, serving("p2", 8082), serving("p3", 8083), rollout=BAKING)
    assert bake(loop) is None
    assert loop.status.current.rollout == BAKING
