"""The caps and the create backoff (rpp/decide/capacity/safeguards.py): each blocks a create
with its own condition reason and a message that says the numbers behind it, in a fixed
order (the first that holds is the one the pool reports)."""

from __future__ import annotations

import datetime as dt

import pytest

from rpp.decide.capacity import prices
from rpp.decide.capacity.safeguards import Block, create_block
from rpp.model.records import Backoff, CreateAttempt, Intent
from rpp.model.spec import RunPodPoolSpec
from rpp.model.status import PoolStatus
from tests.decide.builders import GPU, HOUR, NOW, PREFIX, pod, pool_spec, pool_status


def block(
    *,
    spec: RunPodPoolSpec | None = None,
    status: PoolStatus | None = None,
    pod_count: int = 1,
    catalog: dict[str, float] | None = None,
    unconfirmed: str | None = None,
    unwritten: str | None = None,
    now: dt.datetime = NOW,
) -> Block | None:
    """The block for one more pod, with `pod_count` pods at $0.69/h each."""
    spec = spec or pool_spec()
    cost = prices.pool_cost(spec, [pod(f"p{i}") for i in range(pod_count)])
    fit = prices.candidates(spec, catalog=catalog or {GPU: 0.69}, room=cost.room)
    return create_block(
        spec=spec,
        status=status or pool_status(),
        pod_count=pod_count,
        cost=cost,
        fit=fit,
        now=now,
        unconfirmed=unconfirmed,
        unwritten=unwritten,
    )


def creates(count: int, *, ago: dt.timedelta = dt.timedelta(minutes=10)) -> PoolStatus:
    return pool_status(
        create_log=tuple(CreateAttempt(time=NOW - ago, outcome="created") for _ in range(count))
    )


def test_a_create_within_every_cap_is_not_blocked() -> None:
    assert block() is None


def test_a_create_whose_intent_cannot_be_stored_first_waits_before_anything_else() -> None:
    status = pool_status(backoff=Backoff(create_until=NOW + HOUR))
    found = block(status=status, pod_count=9, unwritten="status writes fail: 409")
    assert found == Block("StatusWriteFailing", "status writes fail: 409")


def test_after_a_failed_create_creates_wait_out_the_backoff() -> None:
    until = NOW + dt.timedelta(minutes=3)
    found = block(status=pool_status(backoff=Backoff(create_until=until)))
    assert found == Block(
        "CreateBackoff",
        "the last create failed; creates wait until 2026-03-01T12:03:00Z (5m backoff)",
    )
    assert block(status=pool_status(backoff=Backoff(create_until=until)), now=until) is None


def test_a_pod_runpod_created_and_does_not_list_yet_blocks_with_its_description() -> None:
    said = f"RunPod created pod {PREFIX}a (a) at ... but does not list it yet"
    assert block(unconfirmed=said) == Block("CreateUnconfirmed", said)


def test_a_pool_at_max_pods_creates_no_more() -> None:
    assert block(pod_count=3) is None
    assert block(pod_count=4) == Block(
        "MaxPodsReached", "the pool has 4 pod(s) and limits.maxPods is 4"
    )


def test_a_pool_without_a_budget_never_creates() -> None:
    found = block(spec=pool_spec(limits={"maxHourlyCostUsd": 0}), pod_count=0)
    assert found is not None
    assert found.reason == "CostCapReached"
    assert "limits.maxHourlyCostUsd is 0, which means never create" in found.message


def test_one_more_pod_that_would_pass_the_budget_is_blocked_with_the_numbers() -> None:
    spec = pool_spec(limits={"maxHourlyCostUsd": 2.0})
    assert block(spec=spec, pod_count=1) is None  # 0.69 + 0.69 fits under $2/h
    found = block(spec=spec, pod_count=2)  # 1.38 + 0.69 does not
    assert found is not None
    assert found.reason == "CostCapReached"
    assert found.message == (
        "the pool costs $1.38/h; one more pod would pass limits.maxHourlyCostUsd $2.00/h: "
        f"{GPU} at $0.69/h"
    )


def test_a_gpu_type_never_priced_is_blocked_at_the_estimate_and_says_so() -> None:
    spec = pool_spec(limits={"maxHourlyCostUsd": 1.0, "estimatedPodCostUsd": 0.7})
    found = block(spec=spec, pod_count=1, catalog={"other": 0.1})
    assert found is not None
    assert found.reason == "CostCapReached"
    assert "(limits.estimatedPodCostUsd: not priced yet)" in found.message


def test_creates_of_the_last_hour_and_creates_written_down_count_toward_the_rate() -> None:
    assert block(status=creates(2)) is None
    assert block(status=creates(3)) == Block(
        "CreateRateLimited",
        "3 create(s) in the last hour; limits.maxCreatesPerHour is 3",
    )
    assert block(status=creates(3, ago=HOUR)) is None  # an hour ago no longer counts
    pending = creates(2).replace(intents=(Intent(action="create", time=NOW, name="n"),))
    found = block(status=pending)
    assert found is not None
    assert found.reason == "CreateRateLimited"


ORDER = (
    "StatusWriteFailing",
    "CreateBackoff",
    "CreateUnconfirmed",
    "MaxPodsReached",
    "CostCapReached",
    "CreateRateLimited",
)


@pytest.mark.parametrize("expected", ORDER)
def test_the_first_safeguard_that_holds_is_the_one_reported(expected: str) -> None:
    # Every safeguard from `expected` on holds; the ones before it are lifted.
    holds = set(ORDER[ORDER.index(expected) :])
    backoff = Backoff(create_until=NOW + HOUR) if "CreateBackoff" in holds else Backoff()
    status = creates(3 if "CreateRateLimited" in holds else 0).replace(backoff=backoff)
    cap = 2.5 if "CostCapReached" in holds else 10.0  # 3 pods and one more: $2.76/h
    found = block(
        spec=pool_spec(limits={"maxHourlyCostUsd": cap}),
        status=status,
        pod_count=4 if "MaxPodsReached" in holds else 3,
        unwritten="writes fail" if "StatusWriteFailing" in holds else None,
        unconfirmed="waiting" if "CreateUnconfirmed" in holds else None,
    )
    assert found is not None
    assert found.reason == expected
