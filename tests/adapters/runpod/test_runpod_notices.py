"""Machine notices: one GraphQL query for every pod -> HostNotice per pod id.

Covered: the query asks exactly the documented fields; RunPod's critical-error note
and maintenance windows (ISO strings, epoch seconds, epoch milliseconds) come back
through the fake cloud; an unreadable time keeps the notice active instead of
dropping it; a GraphQL `errors` answer is a BadResponse with RunPod's messages.
"""

from __future__ import annotations

import datetime as dt

import pytest

from rpp.adapters.clock import UTC
from rpp.adapters.runpod import answers
from rpp.adapters.runpod.notices import (
    NOTICES_QUERY,
    notice_from_machine,
    notices_from_graphql,
    parse_notice_time,
)
from rpp.adapters.runpod.wire import WireError
from rpp.model.observations import HostNotice
from rpp.sim import faults
from tests.fixtures_runpod import RTX4090, client_for, stocked_cloud

CRITICAL = (
    "We have detected a critical error on this machine which may affect some pods. We are "
    "looking into the root cause and apologize for any inconvenience. We would recommend "
    "backing up your data and creating a new pod in the meantime."
)
JAN1 = dt.datetime(2026, 1, 1, tzinfo=UTC)


def test_query_asks_every_pods_machine_note_and_maintenance_window() -> None:
    for field in ("myself", "pods", "id", "machine", "note", "maintenanceStart"):
        assert field in NOTICES_QUERY
    assert "maintenanceEnd" in NOTICES_QUERY
    assert "maintenanceNote" in NOTICES_QUERY


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2026-01-01T00:00:00Z", JAN1),
        ("2026-01-01T01:00:00+01:00", JAN1),
        ("2026-01-01T00:00:00", JAN1),
        (1767225600, JAN1),
        (1767225600.0, JAN1),
        (1767225600000, JAN1),
        ("1767225600", JAN1),
        (None, None),
        ("", None),
    ],
)
def test_notice_times_read_iso_text_epoch_seconds_and_milliseconds(
    raw: object, expected: dt.datetime | None
) -> None:
    assert parse_notice_time(raw) == expected


def test_unreadable_maintenance_time_keeps_the_notice_active_with_the_raw_text() -> None:
    notice = notice_from_machine({"maintenanceStart": "next tuesday", "note": None})
    assert notice.maintenance_start is None
    assert notice.active
    assert "next tuesday" in notice.describe()


def test_blank_note_and_no_window_is_no_notice() -> None:
    assert not notice_from_machine({"note": "  ", "maintenanceStart": None}).active


async def test_notices_for_every_pod_come_back_from_one_graphql_call() -> None:
    cloud = stocked_cloud()
    flagged = cloud.add_pod(name="a", image="i", gpu_type=RTX4090, datacenter="EU-RO-1")
    planned = cloud.add_pod(name="b", image="i", gpu_type=RTX4090, datacenter="EU-RO-1")
    quiet = cloud.add_pod(name="c", image="i", gpu_type=RTX4090, datacenter="EU-SE-1")
    cloud.set_machine_note(flagged.info.pod_id, CRITICAL)
    cloud.set_maintenance(
        planned.info.pod_id,
        start=JAN1 + dt.timedelta(days=7),
        end=1767225600000 + 7 * 86400000 + 3600000,  # epoch milliseconds, as some APIs send
        note="Host upgrade",
    )
    async with client_for(cloud) as client:
        notices = await client.host_notices()
    assert [c.operation for c in cloud.calls] == ["hostNotices"]
    assert notices[flagged.info.pod_id] == HostNotice(note=CRITICAL)
    window = notices[planned.info.pod_id]
    assert window.maintenance_start == JAN1 + dt.timedelta(days=7)
    assert window.maintenance_end == JAN1 + dt.timedelta(days=7, hours=1)
    assert window.maintenance_note == "Host upgrade"
    assert window.active
    assert not notices[quiet.info.pod_id].active


async def test_graphql_errors_answer_is_a_bad_response_naming_runpods_message() -> None:
    cloud = stocked_cloud()
    cloud.faults.next("hostNotices", faults.MalformedJson())
    async with client_for(cloud) as client:
        with pytest.raises(answers.BadResponse):
            await client.host_notices()
    with pytest.raises(WireError, match="Unauthorized"):
        notices_from_graphql({"data": None, "errors": [{"message": "Unauthorized"}]})
