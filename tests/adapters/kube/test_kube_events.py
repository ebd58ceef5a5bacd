"""Events on a RunPodPool: their shape, and the name that makes repeats land on one Event."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from rpp.adapters.kube.api import EventType, KubeSettings
from rpp.adapters.kube.events import (
    MAX_MESSAGE,
    clean_message,
    event_name,
    new_event,
    repeat_patch,
)

NOW = dt.datetime(2026, 3, 1, 12, 0, 30, 123456, tzinfo=dt.UTC)
SETTINGS = KubeSettings(namespace="runpod", crd_group="pools.example.com")
POOL: dict[str, Any] = {"kind": "RunPodPool", "metadata": {"name": "inference", "uid": "u-1"}}


def name_of(
    pool: dict[str, Any] = POOL,
    *,
    type_: EventType = "Warning",
    reason: str = "CapacityUnavailable",
    message: str = "no GPU",
) -> str:
    return event_name(pool, type_=type_, reason=reason, message=message)


def test_same_pool_reason_and_message_give_the_same_event_name() -> None:
    assert name_of() == name_of()
    assert name_of().startswith("inference.")
    # Whitespace differences are not a different message.
    assert name_of(message="no  GPU\n") == name_of()


@pytest.mark.parametrize(
    "changed",
    [
        {"reason": "PodCreated"},
        {"message": "no GPU in EU-RO-1"},
        {"type_": "Normal"},
    ],
    ids=["reason", "message", "type"],
)
def test_a_different_reason_message_or_type_is_a_different_event(changed: dict[str, Any]) -> None:
    assert name_of(**changed) != name_of()


def test_a_recreated_pool_with_a_new_uid_starts_new_events() -> None:
    recreated = {**POOL, "metadata": {"name": "inference", "uid": "u-2"}}
    assert name_of(recreated) != name_of()


def test_event_points_at_the_pool_and_says_who_reported_it() -> None:
    event = new_event(
        POOL, settings=SETTINGS, type_="Normal", reason="Wired", message="slot 2", now=NOW
    )

    assert event["involvedObject"] == {
        "apiVersion": "pools.example.com/v1alpha1",
        "kind": "RunPodPool",
        "name": "inference",
        "namespace": "runpod",
        "uid": "u-1",
    }
    assert event["metadata"]["namespace"] == "runpod"
    assert event["source"] == {"component": "runpod-pool-controller"}
    assert (event["count"], event["firstTimestamp"], event["lastTimestamp"]) == (
        1,
        "2026-03-01T12:00:30Z",
        "2026-03-01T12:00:30Z",
    )
    assert repeat_patch(3, NOW) == {"count": 3, "lastTimestamp": "2026-03-01T12:00:30Z"}


def test_long_messages_are_cut_to_what_the_api_server_accepts() -> None:
    cut = clean_message("x" * 5000)
    assert len(cut) == MAX_MESSAGE
    assert cut.endswith("...")


@pytest.mark.parametrize("reason", ["capacity", "Has Space", "X" * 129, ""])
def test_a_reason_that_is_not_camel_case_is_a_programming_error(reason: str) -> None:
    with pytest.raises(ValueError, match="CamelCase"):
        new_event(POOL, settings=SETTINGS, type_="Normal", reason=reason, message="m", now=NOW)
