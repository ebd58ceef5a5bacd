"""Stories of a step of the controller host's wall clock (issue 25, finding 6).

The controller keeps time on its monotonic clock, anchored on the API server's Date, so
a step of its host's wall clock, an hour either way, moves no cap and no rule duration:
a +1 h step let 4 creates through in one real hour under maxCreatesPerHour 2, and a -1 h
step kept a dead pod billed an hour longer. Each step is logged once, with its size.
"""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from rpp.sim.world import CloudChange
from tests.stories.test_replacement import healthy_pool, ready_pods
from tests.stories.world_kit import LIMITS, Story, pool_manifest, story

HOUR_S = 3600.0


def create_times(s: Story) -> list[dt.datetime]:
    """When RunPod makes each pod the controller creates, in true time, from now on."""
    times: list[dt.datetime] = []

    def note(change: CloudChange) -> None:
        if change.kind == "created" and change.api:
            times.append(s.clock.now())

    s.world.cloud_listeners.append(note)
    return times


def clock_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "rpp.adapters.clock" and r.levelno == logging.WARNING
    ]


def test_a_forward_clock_step_does_not_reopen_the_creates_per_hour_cap() -> None:
    async def body(s: Story) -> None:
        times = create_times(s)
        before = await healthy_pool(s)
        assert len(times) == 2  # the hour's two creates are spent
        s.world.host_clock.step(HOUR_S)  # create 1 now looks an hour old to the host
        victim = sorted(ready_pods(before))[0]
        s.world.pods[victim].die()
        hour_ends = times[0] + dt.timedelta(seconds=HOUR_S)
        while s.clock.now() < hour_ends - dt.timedelta(seconds=30):
            await s.loops(1)
        assert len(times) == 2, "a third create inside the hour of the first two"
        blocked = s.status().condition("CreateBlocked")
        assert blocked is not None
        assert (blocked.status, blocked.reason) == ("True", "CreateRateLimited")
        await s.until(lambda st: st.ready == 2, limit=20)  # replaced once the hour is over
        assert len(times) == 3
        assert times[2] >= hour_ends

    limits = {**LIMITS, "maxCreatesPerHour": 2}
    story(body, manifest=pool_manifest(limits=limits))


def test_a_backward_clock_step_does_not_keep_a_dead_pod_billed() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        victim = sorted(ready_pods(before))[0]
        s.world.pods[victim].die()
        died = s.clock.now()
        await s.loops(1)  # its Unreachable breach is written down on the host's time
        s.world.host_clock.step(-HOUR_S)
        await s.until(lambda st: victim not in s.world.cloud.pods, limit=30)
        billed = (s.clock.now() - died).total_seconds()
        # Unreachable's 2 minutes, a replacement booted and probed, drain.period 150s.
        assert billed <= 10 * 60, f"dead pod billed {billed:.0f}s"
        assert victim in {e.pod_id for e in s.effects("terminate")}

    story(body)


def test_a_clock_step_is_logged_once_with_its_size(caplog: pytest.LogCaptureFixture) -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        caplog.set_level(logging.WARNING, logger="rpp.adapters.clock")
        s.world.host_clock.step(HOUR_S)
        await s.loops(20)
        [forward] = clock_warnings(caplog)
        assert forward.startswith("the host clock stepped +1h00m00s")
        assert "the controller keeps time by its monotonic clock" in forward
        s.world.host_clock.step(-HOUR_S)
        await s.loops(20)
        assert len(clock_warnings(caplog)) == 2
        assert clock_warnings(caplog)[1].startswith("the host clock stepped -1h00m00s")

    story(body)


def test_a_controller_started_after_a_clock_step_takes_the_api_servers_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        s.world.host_clock.step(HOUR_S)
        await s.world.restart_controller()  # its host clock is an hour ahead from the start
        caplog.set_level(logging.WARNING, logger="rpp.adapters.clock")
        victim = sorted(ready_pods(before))[0]
        s.world.pods[victim].die()
        died = s.clock.now()
        status = await s.until(
            lambda st: (m := st.member(victim)) is not None and m.quarantine is not None,
            limit=4,
        )
        member = status.member(victim)
        assert member is not None
        assert member.quarantine is not None
        # Written on the cluster's time, as every earlier timestamp in status was.
        written = (member.quarantine.since - died).total_seconds()
        assert 0 <= written <= 60
        [warning] = clock_warnings(caplog)
        assert warning.startswith("the host clock is +1h00m00s off the API server's")

    story(body)
