"""The controller's steady clock: wall time counted on the monotonic clock, anchored on the
API server's Date, so a step of the host clock moves no cap and no rule duration."""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from rpp.adapters.clock import UTC, SteadyClock, http_date, step_text

START = dt.datetime(2026, 1, 1, 12, 0, 0, 250000, tzinfo=UTC)
HOUR = dt.timedelta(hours=1)


class Host:
    """A host's wall clock that a test steps, and the monotonic clock beside it."""

    def __init__(self) -> None:
        self.elapsed = 0.0
        self.step = dt.timedelta()

    def now(self) -> dt.datetime:
        return START + dt.timedelta(seconds=self.elapsed) + self.step

    def monotonic(self) -> float:
        return 1000.0 + self.elapsed  # any origin: only differences count


def steady(host: Host) -> SteadyClock:
    return SteadyClock(host=host, monotonic=host.monotonic)


def answer(clock: SteadyClock, date: dt.datetime) -> None:
    """An API answer that took no time, carrying `date` (whole seconds) as its Date."""
    clock.server_answered(http_date(date), sent=clock.elapsed())


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "rpp.adapters.clock" and r.levelno == logging.WARNING
    ]


@pytest.mark.parametrize("by", [HOUR, -HOUR])
def test_a_host_clock_step_either_way_does_not_move_the_steady_time(by: dt.timedelta) -> None:
    host = Host()
    clock = steady(host)
    answer(clock, START)
    host.elapsed = 600.0
    host.step = by
    assert clock.now() == START + dt.timedelta(seconds=600)
    host.elapsed = 4000.0
    assert clock.now() - START == dt.timedelta(seconds=4000)


def test_a_host_clock_in_step_with_the_api_server_keeps_its_sub_second_reading() -> None:
    host = Host()
    clock = steady(host)
    answer(clock, START)  # Date 12:00:00 names the second the host's 12:00:00.25 is in
    assert clock.anchored
    assert clock.now() == START


@pytest.mark.parametrize("off", [HOUR, -HOUR])
def test_the_first_api_server_date_anchors_a_host_clock_that_is_off(
    off: dt.timedelta, caplog: pytest.LogCaptureFixture
) -> None:
    host = Host()
    host.step = off  # wrong before the process starts
    clock = steady(host)
    assert clock.now() == START + off  # no Date seen yet: the host's time
    answer(clock, START)
    # The middle of the second the Date names: within half a second of the truth.
    assert abs((clock.now() - START).total_seconds()) <= 0.5
    host.elapsed = 90.0
    assert abs((clock.now() - START).total_seconds() - 90.0) <= 0.5
    [warning] = warnings(caplog)
    size = step_text(off.total_seconds())
    assert warning.startswith(f"the host clock is {size} off the API server's")


def test_a_step_of_the_api_servers_clock_is_logged_once_and_not_followed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = Host()
    clock = steady(host)
    answer(clock, START)
    for minute in range(1, 6):
        host.elapsed = 60.0 * minute
        answer(clock, START + dt.timedelta(seconds=host.elapsed) + HOUR)
    assert clock.now() == START + dt.timedelta(seconds=300)
    [warning] = warnings(caplog)
    assert warning.startswith("the API server's clock stepped +1h00m00s")
    host.elapsed = 400.0
    answer(clock, START + dt.timedelta(seconds=400))  # and back again: logged once more
    assert len(warnings(caplog)) == 2
    assert "stepped -1h00m00s" in warnings(caplog)[1]


def test_a_host_clock_step_is_logged_once_with_its_size_each_way(
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = Host()
    clock = steady(host)
    answer(clock, START)
    host.step = HOUR
    for second in range(100):
        host.elapsed = float(second)
        clock.now()
    [forward] = warnings(caplog)
    assert forward.startswith("the host clock stepped +1h00m00s")
    assert "the controller keeps time by its monotonic clock" in forward
    host.step = dt.timedelta()
    clock.now()
    clock.now()
    assert len(warnings(caplog)) == 2
    assert warnings(caplog)[1].startswith("the host clock stepped -1h00m00s")


def test_a_slow_answer_and_the_dates_whole_seconds_are_not_a_step(
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = Host()
    clock = steady(host)
    answer(clock, START)
    sent = clock.elapsed()
    host.elapsed = 20.0  # an answer 20 s in flight, stamped as it left the server
    clock.server_answered(http_date(START + dt.timedelta(seconds=1)), sent=sent)
    host.elapsed = 30.4
    answer(clock, START + dt.timedelta(seconds=30.4))  # truncated to 12:00:30
    assert warnings(caplog) == []


@pytest.mark.parametrize("header", [None, "", "yesterday", "Thu, 01 Jan 2026 12:00:00"])
def test_an_answer_without_a_readable_date_changes_nothing(header: str | None) -> None:
    host = Host()
    host.step = HOUR
    clock = steady(host)
    clock.server_answered(header, sent=clock.elapsed())
    assert not clock.anchored
    assert clock.now() == START + HOUR


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(3600, "+1h00m00s"), (-3600, "-1h00m00s"), (-3598.6, "-59m59s"), (7, "+7s"), (0, "+0s")],
)
def test_a_step_is_said_signed_to_the_second(seconds: float, text: str) -> None:
    assert step_text(seconds) == text
