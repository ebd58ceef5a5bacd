"""Hand-built inputs for decide's unit tests: a spec, RunPod pods, members, a status, an
observation and a whole LoopState, all at one fixed moment (NOW).

Decide is pure (rpp/decide/: spec, status, observations, `now` in; status and effects
out), so a unit test needs no world, no fake cloud and no clock: only these values,
built with the real models (RunPodPoolSpec through its loader, PoolStatus, MemberRecord,
RunPodPod, PoolObservation). Plain functions rather than fixtures, so a test can build
several variants in one body; tests/decide/conftest.py offers the common ones as
fixtures too.

The default pool is "web" in Manage: two pods wanted, three allowed datacenters (one
pod each), limits.maxPods 4, a $10/h budget, 3 creates an hour, unpriced pods counted
at $0.70/h. Pods are named `rpp-web-<id>`, priced $0.69/h, in EU-RO-1, created an hour
before NOW; members entered their phase an hour before NOW.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from rpp.decide.state.conditions import Conditions
from rpp.decide.state.loop_state import LoopState, settings_for
from rpp.decide.state.working_status import WorkingStatus
from rpp.model.members import MemberRecord, Phase
from rpp.model.observations import (
    PodStatus,
    PoolObject,
    PoolObservation,
    RunPodPod,
    SecretState,
)
from rpp.model.spec import RunPodPoolSpec
from rpp.model.spec_load import load_spec
from rpp.model.status import PoolStatus

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
POOL = "web"
PREFIX = f"rpp-{POOL}-"
GPU = "NVIDIA GeForce RTX 4090"
DATACENTERS = ("EU-RO-1", "EU-SE-1", "EU-CZ-1")
PROXY_URL = "https://{pod_id}-{port}.proxy.runpod.net"
HOUR = dt.timedelta(hours=1)

_SPEC: dict[str, Any] = {
    "templateId": "tpl-web",
    "dryRun": False,
    "gpuTypes": [GPU],
    "replicas": {"min": 2, "max": 3},
    "datacenters": {"allow": list(DATACENTERS)},
    "limits": {
        "maxPods": 4,
        "maxHourlyCostUsd": 10.0,
        "maxCreatesPerHour": 3,
        "estimatedPodCostUsd": 0.7,
    },
}


def pool_spec(**changes: Any) -> RunPodPoolSpec:
    """The default pool's spec with `changes` (camelCase keys, as a user writes them).

    A mapping given for a section that has defaults here (replicas, datacenters,
    limits) is merged into them, so `limits={"maxPods": 2}` keeps the budget; any other
    value replaces the key. The spec must be valid: the loader's problems fail the test.
    """
    raw = {key: dict(value) if isinstance(value, dict) else value for key, value in _SPEC.items()}
    for key, value in changes.items():
        given = raw.get(key)
        if isinstance(value, dict) and isinstance(given, dict):
            raw[key] = {**given, **value}
        else:
            raw[key] = value
    spec, problems = load_spec(POOL, raw)
    assert problems == [], problems
    assert spec is not None
    return spec


def pod(
    pod_id: str,
    *,
    name: str | None = None,
    status: PodStatus = PodStatus.RUNNING,
    datacenter: str | None = DATACENTERS[0],
    cost_per_hr: float = 0.69,
    gpu_type: str | None = GPU,
    image: str = "img:1",
    created_at: dt.datetime | None = NOW - HOUR,
    unreadable: str | None = None,
) -> RunPodPod:
    """One pod of the pool as RunPod lists it (named with the pool's prefix)."""
    return RunPodPod(
        id=pod_id,
        name=PREFIX + pod_id if name is None else name,
        status=status,
        image=image,
        gpu_type=gpu_type,
        gpu_count=1,
        cloud="SECURE",
        datacenter=datacenter,
        cost_per_hr=cost_per_hr,
        created_at=created_at,
        unreadable=unreadable,
    )


def member(
    pod_id: str,
    phase: Phase = Phase.READY,
    *,
    slot: int | None = None,
    since: dt.datetime = NOW - HOUR,
    **fields: Any,
) -> MemberRecord:
    """One member in `phase` since `since`; other MemberRecord fields by their Python
    names (`replacement_for=`, `cost_per_hr=`, `drain_reason=` ...)."""
    return MemberRecord(
        pod_id=pod_id, name=PREFIX + pod_id, phase=phase, since=since, slot=slot, **fields
    )


def wired(pod_id: str, slot: int, **fields: Any) -> MemberRecord:
    """A Ready member serving in nginx slot `slot` (a port, 8081 and up)."""
    return member(pod_id, Phase.READY, slot=slot, **fields)


def flagged(pod_id: str, *, slot: int | None = None, **fields: Any) -> MemberRecord:
    """A Flagged member (by the Unreachable rule unless `flagged_rule=` says otherwise)."""
    fields.setdefault("flagged_rule", "Unreachable")
    return member(pod_id, Phase.FLAGGED, slot=slot, **fields)


def pool_status(*members: MemberRecord, **fields: Any) -> PoolStatus:
    """A stored status in Manage holding `members`, with other PoolStatus fields."""
    fields.setdefault("mode", "Manage")
    return PoolStatus(members=tuple(members), **fields)


def observation(*pods: RunPodPod, **fields: Any) -> PoolObservation:
    """A loop's observation listing `pods`: the env Secret read, the finalizer on."""
    fields.setdefault("secret", SecretState(configured=True))
    fields.setdefault("pool", PoolObject(finalizer=True))
    return PoolObservation(pods=tuple(pods), **fields)


def loop_state(
    *,
    spec: RunPodPoolSpec | None = None,
    status: PoolStatus | None = None,
    obs: PoolObservation | None = None,
    now: dt.datetime = NOW,
    generation: int = 1,
) -> LoopState:
    """A decide call's LoopState as rpp/decide/pool.py builds it, before any step ran:
    one WorkingStatus over `status`, the Conditions writing through it; the listed
    pods are not taken as owned yet (call `own`)."""
    spec = spec or pool_spec()
    working = WorkingStatus(status or pool_status())
    conds = Conditions(working, now=now, generation=generation)
    return LoopState(
        POOL,
        spec,
        obs or observation(),
        now,
        conds,
        PROXY_URL,
        settings_for(spec),
        status=working,
    )
