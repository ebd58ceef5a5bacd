"""rpp/decide/release/: the canary's bake and the rolling of a new image.

The release's inputs are built with tests/decide/builders.py (the pool "web", its pods
and members at NOW); the builders below are the release's own: a pool asked to run
NEW_IMAGE while its pods run OLD_IMAGE, members on either image or updating between
them, a loop over them, and the `bake` and `roll` steps run on it as
rpp/decide/pool.py runs them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import pytest

from rpp.decide.health.pool_wide import MemberHealth, PoolHealth
from rpp.decide.release import steps
from rpp.decide.release.steps import CanaryCall
from rpp.decide.state.loop_state import LoopState
from rpp.model.members import MemberRecord, Phase, UpdateProgress
from rpp.model.observations import PodMetrics, PrometheusReading
from rpp.model.rollout_records import Rollout
from rpp.model.spec import RunPodPoolSpec
from tests.decide import builders
from tests.decide.builders import HOUR, NOW, member, observation, pool_status

OLD_IMAGE = "img:1"
NEW_IMAGE = "img:2"
MINUTE = dt.timedelta(minutes=1)


def release_spec(**changes: Any) -> RunPodPoolSpec:
    """The default pool asked to run NEW_IMAGE, with `changes` (camelCase, as
    tests/decide/builders.py's pool_spec takes them)."""
    changes.setdefault("image", NEW_IMAGE)
    return builders.pool_spec(**changes)


def serving(
    pod_id: str, slot: int, image: str = OLD_IMAGE, *, age: int = 0, **fields: Any
) -> MemberRecord:
    """A Ready member in nginx slot `slot` running `image`, created `age` minutes before
    the hour-old default (older pods are taken first)."""
    created = NOW - HOUR - age * MINUTE
    return builders.wired(pod_id, slot, image=image, created_at=created, **fields)


def updating(pod_id: str, *, rollback: bool = False) -> MemberRecord:
    """A member out of nginx, updating in place from OLD_IMAGE to NEW_IMAGE (or going
    back to OLD_IMAGE after that update failed)."""
    progress = UpdateProgress(from_image=OLD_IMAGE, to_image=NEW_IMAGE, rollback=rollback)
    return member(pod_id, Phase.UPDATING, image=NEW_IMAGE, update=progress)


@dataclass
class Rolled:
    """The `roll` step's outcome: the members as planned after it, and its loop."""

    planned: list[MemberRecord]
    loop: LoopState

    @property
    def release(self) -> Rollout:
        release = self.loop.status.current.rollout
        assert release is not None
        return release

    def member(self, pod_id: str) -> MemberRecord:
        return next(m for m in self.planned if m.pod_id == pod_id)

    def condition(self, kind: str) -> tuple[str, str, str] | None:
        found = self.loop.status.current.condition(kind)
        return None if found is None else (found.status, found.reason, found.message)

    @property
    def notes(self) -> list[str]:
        return [note.text for note in self.loop.log]


def release_loop(
    *members: MemberRecord,
    spec: RunPodPoolSpec | None = None,
    rollout: Rollout | None = None,
    per_pod: dict[str, PodMetrics] | None = None,
    now: dt.datetime = NOW,
    **status: Any,
) -> LoopState:
    """A loop of the pool holding `members`, its release so far `rollout`, Prometheus's
    values this loop `per_pod`, other PoolStatus fields `status`."""
    stored = pool_status(*members, rollout=rollout, **status)
    obs = observation(prometheus=PrometheusReading(per_pod=per_pod or {}))
    return builders.loop_state(spec=spec or release_spec(), status=stored, obs=obs, now=now)


def roll(loop: LoopState, *, wants_create: bool = False, pool_wide: bool = False) -> Rolled:
    """The `roll` step over the loop's members, as rpp/decide/pool.py runs it."""
    planned = list(loop.status.current.members)
    steps.roll(loop, planned, wants_create=wants_create, pool_wide=pool_wide)
    return Rolled(planned=planned, loop=loop)


def bake(loop: LoopState, health: PoolHealth | None = None) -> CanaryCall | None:
    """The `bake` step, every pod healthy unless `health` says otherwise."""
    return steps.bake(loop, health or PoolHealth(members={}))


def flagged_by(pod_id: str, rule: str, reason: str) -> PoolHealth:
    """This loop's health: `rule` flagged `pod_id`, saying `reason`."""
    verdict = MemberHealth(breaches={rule: NOW - HOUR}, flagged=(rule,), reasons={rule: reason})
    return PoolHealth(members={pod_id: verdict})


@pytest.fixture
def idle_pool() -> list[MemberRecord]:
    """Three Ready pods on OLD_IMAGE in nginx; p1 is the oldest."""
    return [serving("p1", 8081, age=2), serving("p2", 8082, age=1), serving("p3", 8083)]
