"""status.spend: what RunPod billed the pool's own pods, summed from the loop's billing
reading (rpp/decide/spend.py), set at the end of every branch (rpp/decide/finish.py).

A pod's bill is the pool's while the pod is a member, an owned pod of the listing, named
in history, or remembered in status.spend.pods; another pool's pods never count. The last
hour, today and this month are counted back from the reading's own time (UTC). A loop
with no new reading keeps the figures; a failed read keeps them and says why.
"""

from __future__ import annotations

import datetime as dt

from rpp.decide.finish import finish
from rpp.decide.spend import next_spend, summed
from rpp.model.observations import BillingReading, BillingRecord
from rpp.model.records import HistoryEntry
from rpp.model.status import SPEND_PODS_KEPT, Spend
from tests.decide.builders import NOW, loop_state, member, observation, pod, pool_status

HOUR = dt.timedelta(hours=1)
READ_AT = NOW + dt.timedelta(minutes=20)  # 2026-03-01 12:20 UTC: the 1st, so day = month


def bill(pod_id: str, start: dt.datetime, amount: float) -> BillingRecord:
    return BillingRecord(pod_id=pod_id, start=start, end=start + HOUR, amount=amount)


def hourly(pod_id: str, *, hours: int, until: dt.datetime, amount: float) -> list[BillingRecord]:
    """One record per hour for the `hours` hours before `until`."""
    return [bill(pod_id, until - (i + 1) * HOUR, amount) for i in range(hours)]


def test_a_members_bill_is_summed_into_the_last_hour_today_and_this_month() -> None:
    records = [
        *hourly("a", hours=3, until=NOW, amount=0.69),  # 09:00 to 12:00
        bill("a", NOW, 0.23),  # the hour running at the reading: today, not the last hour
        bill("a", NOW - dt.timedelta(days=1), 5.0),  # February: not this month
    ]
    status = pool_status(member("a"))
    spend = next_spend(status, billing=BillingReading(tuple(records), read_at=READ_AT), owned=())
    assert spend is not None
    assert (spend.last_hour, spend.today, spend.this_month) == (0.69, 2.3, 2.3)
    assert spend.read_at == READ_AT


def test_today_and_this_month_differ_once_the_month_has_earlier_days() -> None:
    read_at = dt.datetime(2026, 3, 3, 12, 20, tzinfo=dt.UTC)
    records = [bill("a", dt.datetime(2026, 3, 1, 8, tzinfo=dt.UTC), 1.0), bill("a", read_at, 2.0)]
    spend = summed(records, pods=frozenset({"a"}), read_at=read_at)
    assert (spend.today, spend.this_month) == (2.0, 3.0)


def test_another_pools_pods_never_count() -> None:
    records = [bill("a", NOW - HOUR, 1.0), bill("someone-else", NOW - HOUR, 7.0)]
    status = pool_status(member("a"))
    spend = next_spend(status, billing=BillingReading(tuple(records), read_at=READ_AT), owned=())
    assert spend is not None
    assert spend.last_hour == 1.0


def test_a_pod_terminated_this_month_still_counts_through_history_then_memory() -> None:
    records = (bill("gone", NOW - 2 * HOUR, 0.69), bill("a", NOW - HOUR, 0.69))
    terminated = HistoryEntry(time=NOW - HOUR, action="terminate", pod="gone", outcome="ok")
    status = pool_status(member("a"), history=(terminated,))
    first = next_spend(status, billing=BillingReading(records, read_at=READ_AT), owned=())
    assert first is not None
    assert first.today == 1.38
    assert first.pods == ("gone",)  # remembered; "a" counts as a member anyway
    # History moved on: the memory alone keeps the terminated pod's bill the pool's.
    later = pool_status(member("a"), spend=first)
    reading = BillingReading(records, read_at=READ_AT + dt.timedelta(minutes=10))
    again = next_spend(later, billing=reading, owned=())
    assert again is not None
    assert again.today == 1.38


def test_an_owned_pod_not_yet_a_member_counts() -> None:
    records = (bill("new", NOW - HOUR, 0.5),)
    spend = next_spend(
        pool_status(), billing=BillingReading(records, read_at=READ_AT), owned=("new",)
    )
    assert spend is not None
    assert spend.last_hour == 0.5


def test_the_memory_keeps_the_pods_billed_last_and_stays_bounded() -> None:
    read_at = dt.datetime(2026, 3, 10, tzinfo=dt.UTC)
    gone = [f"gone{i:03d}" for i in range(SPEND_PODS_KEPT + 5)]
    records = [bill(pod_id, read_at - (i + 1) * HOUR, 0.1) for i, pod_id in enumerate(gone)]
    spend = summed(records, pods=frozenset(gone), read_at=read_at)
    assert len(spend.pods) == SPEND_PODS_KEPT
    assert set(spend.pods) == set(gone[:SPEND_PODS_KEPT])  # the most recently billed


def test_a_loop_without_a_new_reading_keeps_the_figures() -> None:
    kept = Spend(last_hour=1.0, today=2.0, this_month=3.0, read_at=READ_AT)
    status = pool_status(member("a"), spend=kept)
    # The same reading again (most loops), or none at all: nothing is summed again.
    same = BillingReading((bill("a", NOW - HOUR, 9.0),), read_at=READ_AT)
    assert next_spend(status, billing=same, owned=()) is kept
    assert next_spend(status, billing=None, owned=()) is kept


def test_a_failed_read_keeps_the_last_figures_with_their_time_and_says_why() -> None:
    kept = Spend(last_hour=1.0, today=2.0, this_month=3.0, read_at=READ_AT)
    status = pool_status(member("a"), spend=kept)
    failed = BillingReading(error="RunPod listPodBilling: HTTP 503")
    spend = next_spend(status, billing=failed, owned=())
    assert spend == kept.replace(error="RunPod listPodBilling: HTTP 503")
    never = BillingReading(error="RunPod listPodBilling: HTTP 503")
    first = next_spend(pool_status(), billing=never, owned=())
    assert first is not None
    assert first.read_at is None
    assert first.error is not None


def test_every_loop_ends_with_the_spend_of_the_pools_pods() -> None:
    reading = BillingReading((bill("a", NOW - HOUR, 0.69),), read_at=READ_AT)
    loop = loop_state(status=pool_status(), obs=observation(pod("a"), billing=reading))
    loop.own([pod("a")])
    decision = finish(loop, generation=1, desired=1)
    assert decision.status.spend is not None
    assert decision.status.spend.last_hour == 0.69
    assert decision.status.stored()["spend"]["readAt"] == "2026-03-01T12:20:00Z"
