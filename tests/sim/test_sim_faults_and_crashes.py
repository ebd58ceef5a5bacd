"""Faults and crash points in scenario files: read with clear errors, dealt the same way
for a seed, and a crash point kills the controller exactly where it says.

Covered: `do: fault` and `cloud.faults` parsing (every mistake names the field), random
faults that replay for a seed and stop at `until`, `do: controller-restart` with a
`point` (parsing, the kill at the crossing, a point never reached), `do: edit-status`,
byte-identical JSON across processes with faults and crashes, and no "Task was
destroyed but it is pending" at exit.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rpp.adapters.kube.api import Conflict as KubeConflict
from rpp.adapters.kube.api import KubeSettings
from rpp.sim.cloud_scenario import ScenarioError
from rpp.sim.crash_points import (
    EVERY_POINT,
    STATUS_WRITE,
    TARGETS,
    WHENS,
    CrashPoint,
    PointError,
    parse_point,
)
from rpp.sim.crossings import KubeFault, WorldCrossings
from rpp.sim.faults import FaultQueue, RandomFaults, ServerError, Timeout
from rpp.sim.kube_memory import MemoryKubeApi
from rpp.sim.process import Lifeline
from rpp.sim.run import run_scenario
from rpp.sim.scenario import parse_scenario

ROOT = Path(__file__).parents[2]
POD_DIES = yaml.safe_load((ROOT / "examples" / "scenarios" / "pod-dies.yaml").read_text())


def scenario(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = copy.deepcopy(POD_DIES)
    for key, value in changes.items():
        document[key] = value
    return document


def errors(document: dict[str, Any]) -> list[str]:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(document)
    return str(caught.value).splitlines()


def test_fault_events_and_random_faults_are_read_with_their_fields() -> None:
    events = [
        {"at": "1m", "do": "fault", "operation": "createPod", "kind": "ServerError", "times": 2},
        {
            "at": "2m",
            "do": "fault",
            "operation": "listPods",
            "kind": {"kind": "Slow", "seconds": 3},
        },
        {"at": "3m", "do": "fault", "operation": "status-write", "kind": "OtherWriter"},
    ]
    cloud = {**POD_DIES["cloud"], "faults": {"rate": 0.2, "kinds": ["Timeout"], "until": "30m"}}
    parsed = parse_scenario(scenario(events=events, cloud=cloud))
    first, second, third = parsed.events
    assert (first.operation, first.fault, first.times) == ("createPod", ServerError(), 2)
    assert second.fault is not None
    assert second.fault.kind == "Slow"
    assert third.fault is not None
    assert third.fault.kind == "OtherWriter"
    assert parsed.cloud.faults == RandomFaults(rate=0.2, kinds=(Timeout(),), until=1800.0)


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (
            {"operation": "makePod", "kind": "ServerError"},
            "events[0].operation: unknown operation",
        ),
        ({"operation": "createPod", "kind": "Teapot"}, "events[0].kind.kind: unknown fault"),
        ({"operation": "createPod", "kind": "Timeout", "times": 0}, "events[0].times:"),
        ({"operation": "status-write", "kind": "Timeout"}, "takes Conflict or OtherWriter"),
        ({"operation": "createPod"}, "events[0].kind: is required for `do: fault`"),
    ],
)
def test_a_fault_event_that_cannot_be_used_names_its_field(
    event: dict[str, Any], expected: str
) -> None:
    found = errors(scenario(events=[{"at": "1m", "do": "fault", **event}]))
    assert any(expected in line for line in found), found


def test_random_faults_that_cannot_be_used_name_their_field() -> None:
    cloud = {**POD_DIES["cloud"], "faults": {"rate": 1.5}}
    assert any("cloud.faults.rate" in line for line in errors(scenario(cloud=cloud)))
    cloud = {**POD_DIES["cloud"], "faults": {"rate": 0.1, "often": True}}
    assert any(
        "cloud.faults.often: unknown field" in line for line in errors(scenario(cloud=cloud))
    )


def test_random_faults_replay_for_a_seed_and_stop_at_until() -> None:
    class Clock:
        now_s = 0.0

        def now(self) -> dt.datetime:
            return dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=self.now_s)

    def dealt(seed: int) -> list[str | None]:
        clock = Clock()
        queue = FaultQueue()
        plan = RandomFaults(rate=0.3, kinds=(ServerError(), Timeout()), until=100.0)
        queue.at_random(plan, seed=seed, clock=clock)
        out = []
        for i in range(200):
            clock.now_s = i
            fault = queue.take("listPods")
            out.append(fault.kind if fault else None)
        return out

    first, again, other = dealt(7), dealt(7), dealt(8)
    assert first == again
    assert first != other
    assert 10 < sum(1 for f in first[:100] if f) < 50  # about 30% of 100 calls
    assert not any(first[100:]), "none after until"


@pytest.mark.parametrize(
    ("text", "point"),
    [
        ({"after": "createPod"}, CrashPoint("after", "createPod")),
        ({"before": "status-write"}, CrashPoint("before", "status-write")),
        ("between-effects", CrashPoint("before", "effects")),
    ],
)
def test_crash_points_are_read_and_say_where_they_strike(text: Any, point: CrashPoint) -> None:
    assert parse_point(text) == point
    assert parse_point(point.to_yaml()) == point
    assert point.describe().startswith(("right", "between"))


def test_every_point_the_soak_and_the_benchmark_use_is_a_point_a_scenario_can_name() -> None:
    points = [parse_point(text) for text in EVERY_POINT]
    kinds = {CrashPoint(when, target) for when in WHENS for target in TARGETS}
    assert set(points) == {*kinds, CrashPoint("before", "effects")}
    assert len(points) == len(set(points))


@pytest.mark.parametrize(
    "text", [{"after": "makePod"}, {"during": "createPod"}, "anywhere", {"after": 1, "b": 2}]
)
def test_a_crash_point_that_cannot_be_used_says_what_to_write(text: Any) -> None:
    with pytest.raises(PointError, match="expected"):
        parse_point(text)


def timeline(document: dict[str, Any], **kwargs: Any) -> list[dict[str, Any]]:
    out = io.StringIO()
    run_scenario(parse_scenario(document), out=out, as_json=True, **kwargs)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_point_kills_the_controller_at_its_crossing_and_a_new_one_starts() -> None:
    events = [
        *POD_DIES["events"],
        {"at": "20m", "do": "controller-restart", "point": {"before": "createPod"}},
    ]
    records = timeline(scenario(events=events, duration="40m"))
    restarts = [r for r in records if r["event"] == "scenario" and r["do"] == "controller-restart"]
    armed, killed = restarts
    assert armed["t"] == 1200
    assert armed["detail"].startswith("armed:")
    assert "killed right before a createPod call to RunPod is sent" in killed["detail"]
    created = [r for r in records if r["event"] == "cloud" and r["kind"] == "created"]
    assert created[-1]["t"] >= killed["t"] + 300, "the intent waited before a new create"
    assert len(created) == 4, "three adopted, one replacement: none twice"


def test_a_point_never_reached_is_said_at_the_end() -> None:
    events = [{"at": "1m", "do": "controller-restart", "point": {"after": "updatePod"}}]
    records = timeline(scenario(events=events, duration="10m"))
    (never,) = [r for r in records if r["event"] == "scenario" and "never reached" in r["detail"]]
    assert "updatePod" in never["detail"]


def test_a_status_edit_is_read_and_rebuilt_from() -> None:
    events = [{"at": "5m", "do": "edit-status", "status": {"members": 3}}]
    records = timeline(scenario(events=events, duration="10m"))
    assert any(r["event"] == "recovery" and r["action"] == "rebuild" for r in records)
    assert any(
        "expected the status as stored" in line
        for line in errors(scenario(events=[{"at": "1m", "do": "edit-status", "status": [1]}]))
    )


FAULTY = scenario(
    duration="45m",
    cloud={**POD_DIES["cloud"], "faults": {"rate": 0.3}},
    events=[
        *POD_DIES["events"],
        {"at": "21m", "do": "controller-restart", "point": {"after": "createPod"}},
        {"at": "25m", "do": "fault", "operation": "status-write", "kind": "Conflict", "times": 3},
        {"at": "30m", "do": "controller-restart", "point": "between-effects"},
        {"at": "44m", "do": "fault", "operation": "listPods", "kind": "Timeout", "times": 5},
    ],
)


def run_cli(path: Path, seed: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONWARNINGS": "default"}
    return subprocess.run(
        [sys.executable, "-m", "rpp", "simulate", "--scenario", str(path), "--json", "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
        check=False,
    )


def test_faults_and_crashes_replay_byte_for_byte_and_end_without_pending_tasks(
    tmp_path: Path,
) -> None:
    path = tmp_path / "faulty.yaml"
    path.write_text(yaml.safe_dump(FAULTY))
    first, second = run_cli(path, "1"), run_cli(path, "2")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    assert "Task was destroyed" not in first.stderr + second.stderr
    assert "never retrieved" not in first.stderr
    assert "Traceback" not in first.stderr
    records = [json.loads(line) for line in first.stdout.splitlines()]
    kinds = {r["kind"] for r in records if r["event"] == "cloud"}
    assert "created" in kinds
    # Each planned crash happened, where planned: a replay without them proves nothing.
    planned = [parse_point(e["point"]) for e in FAULTY["events"] if "point" in e]
    assert len(planned) == 2
    restarts = [r["detail"] for r in records if r.get("do") == "controller-restart"]
    killed = [d for d in restarts if not d.startswith("armed:")]
    assert killed == [
        f"the controller process is killed {p.describe()}; a new one starts" for p in planned
    ]
    assert first.stderr.strip().endswith("0 violations, 0 leaks")


def test_a_status_write_storm_answers_every_write_409_for_its_time_then_none() -> None:
    """`{kind: Conflict, for: 10m}`: not the next few writes, every write for 10 minutes."""
    storm = {"kind": "Conflict", "for": "10m"}
    events = [{"at": "5m", "do": "fault", "operation": "status-write", "kind": storm}]
    (event,) = parse_scenario(scenario(events=events)).events
    assert event.fault == KubeFault("Conflict", seconds=600.0)
    bad = {"at": "5m", "do": "fault", "operation": "status-write"}
    for kind in ({"kind": "OtherWriter", "for": "10m"}, {"kind": "Conflict", "times": 2}):
        found = errors(scenario(events=[{**bad, "kind": kind}]))
        assert any("takes {kind: Conflict, for: 30m}" in line for line in found), found

    class Clock:
        at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

        def now(self) -> dt.datetime:
            return self.at

    async def writes() -> list[bool]:
        clock = Clock()
        kube = MemoryKubeApi(KubeSettings(namespace="runpod"), clock=clock)
        crossings = WorldCrossings(kube, clock)
        crossings.fault_next(STATUS_WRITE, KubeFault("Conflict", seconds=600.0))
        refused = []
        for minute in (0, 1, 9, 10, 11):
            clock.at = Clock.at + dt.timedelta(minutes=minute)
            try:
                await crossings.before(Lifeline(), STATUS_WRITE, None)
                refused.append(False)
            except KubeConflict:
                refused.append(True)
        return refused

    assert asyncio.run(writes()) == [True, True, True, False, False]
