"""A pod RunPod answered 201 for and does not list yet (rpp/decide/capacity/unconfirmed.py):
it waits for its listing, at most health.createListingGrace, and while it waits it is
counted at the price its create answer gave and named in the reason creates wait."""

from __future__ import annotations

import datetime as dt
from typing import Any

from rpp.decide.capacity import unconfirmed
from rpp.model.members import MemberRecord, Phase
from tests.decide.builders import NOW, PREFIX, member, pool_status

GRACE = 300.0
SECOND = dt.timedelta(seconds=1)


def created(pod_id: str, *, ago: float, **fields: Any) -> MemberRecord:
    return member(pod_id, Phase.WARMING, unconfirmed_since=NOW - ago * SECOND, **fields)


def test_a_created_pod_runpod_lists_now_is_confirmed_and_runs_its_machine() -> None:
    status = pool_status(created("a", ago=10))
    after, waiting = unconfirmed.sort_out(status, listed=["a"], grace=GRACE, now=NOW)
    assert waiting == frozenset()
    confirmed = after.member("a")
    assert confirmed is not None
    assert confirmed.unconfirmed_since is None
    assert confirmed.phase == Phase.WARMING


def test_a_created_pod_not_listed_within_its_grace_waits_unchanged() -> None:
    status = pool_status(created("a", ago=GRACE - 1), member("b"))
    after, waiting = unconfirmed.sort_out(status, listed=["b"], grace=GRACE, now=NOW)
    assert waiting == frozenset({"a"})
    assert after == status


def test_a_created_pod_still_unlisted_once_its_grace_is_over_is_treated_like_any_member() -> None:
    status = pool_status(created("a", ago=GRACE))
    after, waiting = unconfirmed.sort_out(status, listed=[], grace=GRACE, now=NOW)
    assert waiting == frozenset()
    confirmed = after.member("a")
    assert confirmed is not None
    assert confirmed.unconfirmed_since is None


def test_waiting_members_are_the_unconfirmed_ones_oldest_first() -> None:
    newer, older = created("n", ago=5), created("o", ago=50)
    found = unconfirmed.waiting_members([member("listed"), newer, older])
    assert [m.pod_id for m in found] == ["o", "n"]


def test_a_waiting_pod_counts_at_its_create_answers_price_or_as_unpriced() -> None:
    priced = created("a", ago=5, cost_per_hr=0.69)
    free = created("b", ago=5, cost_per_hr=0.0)
    unpriced = created("c", ago=5)
    # None: the cost cap counts it at limits.estimatedPodCostUsd, never at zero.
    assert unconfirmed.prices([priced, free, unpriced]) == [0.69, 0.0, None]


def test_the_reason_creates_wait_names_the_first_pod_when_and_the_grace() -> None:
    first = created("a", ago=60)
    text = unconfirmed.describe([first], grace=GRACE)
    assert text.startswith(f"RunPod created pod {PREFIX}a (a) at 2026-03-01T11:59:00Z")
    assert "more" not in text
    assert "health.createListingGrace (300s)" in text
    several = unconfirmed.describe([first, created("b", ago=5), created("c", ago=1)], grace=90)
    assert "does not list it yet (and 2 more);" in several
    assert "(90s)" in several
