"""rpp/decide/health/: the health rules, their registry, the pool-wide judgement and the
`judge` step, one loop's observations at a time.

The observations are built by tests/decide/health/pod_observations.py (plain
functions); the fixtures here are the rules most tests judge with and a `judge` that
applies them to one pod, as rpp/decide/health/pool_wide.py does for every member.
`now`, `spec` and `loop` come from tests/decide/conftest.py.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

import pytest

from rpp.decide.health.pool_wide import MemberHealth, judge_member
from rpp.decide.health.registry import RULES, active_rules
from rpp.decide.health.rule import ActiveRule, HealthRule, MemberObservation
from rpp.model import spec
from tests.decide.health.pod_observations import PEERS, T0, Judge


@pytest.fixture
def default_rules() -> tuple[ActiveRule, ...]:
    """The rules the default spec switches on (every one but HostNotice), with its limits."""
    return active_rules(spec.ReplaceWhen())


@pytest.fixture
def judge() -> Judge:
    """judge_member for one pod: the default spec's rules, PEERS as the other pods'
    latencies, no breach under way, at T0, unless told otherwise."""

    def judging(
        observation: MemberObservation,
        *,
        now: dt.datetime = T0,
        breaches: Mapping[str, dt.datetime] | None = None,
        replace_when: spec.ReplaceWhen | None = None,
        peers: Sequence[float] = PEERS,
        rules: Sequence[HealthRule] = RULES,
    ) -> MemberHealth:
        return judge_member(
            rules=active_rules(replace_when or spec.ReplaceWhen(), rules),
            observation=observation,
            peer_latencies=peers,
            breaches=breaches or {},
            now=now,
        )

    return judging
