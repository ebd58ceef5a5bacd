"""`rpp simulate`: the command, its two outputs, determinism, and bad scenario files."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rpp.cli import main
from rpp.commands.simulate import default_scenario
from rpp.sim.cloud_scenario import ScenarioError
from rpp.sim.run import run_scenario
from rpp.sim.scenario import load_scenario, parse_scenario_text

ROOT = Path(__file__).parents[2]
EVENTS = {"transition", "action", "condition", "rollout", "loop", "cloud", "scenario", "end"}


def rpp(*args: str, hash_seed: str = "0") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    return subprocess.run(
        [sys.executable, "-m", "rpp", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )


def test_the_default_scenario_prints_a_timeline_and_the_member_table() -> None:
    done = rpp("simulate", "--until", "40m")

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "Scenario (embedded default_scenario.yaml): pool inference, 40m "
        "(--until; the scenario runs 4h)"
    )
    assert any("its service hangs" in line for line in lines)  # pod 2 hangs at 0:30
    assert any(
        "Ready (quarantined) -> Flagged" in line and "Unreachable" in line for line in lines
    )
    assert any(line.startswith("+0:00:00  inference  create ") for line in lines)
    table = lines.index(next(line for line in lines if line.startswith("NAME ")))
    # The CRD's printer columns, as `kubectl get rpp -o wide` prints them (AGE aside).
    assert lines[table].split() == [
        "NAME",
        "READY",
        "REASON",
        "MODE",
        "SERVING",
        "DESIRED",
        "COST/H",
        "PLANNED",
        "ROLLOUT",
    ]
    assert lines[table + 1].split()[:4] == ["inference", "True", "PodsReady", "Manage"]
    legend = " ".join(lines[table + 2 : lines.index("", table)])
    assert "PLANNED: the actions DryRun would take" in legend
    assert "ROLLOUT: where the release of spec.image is" in " ".join(legend.split())
    members = lines[lines.index(next(line for line in lines if line.startswith("POD "))) :]
    assert members[0].split() == [
        "POD",
        "NAME",
        "PHASE",
        "SLOT",
        "DATACENTER",
        "GPU",
        "IMAGE",
        "SINCE",
    ]
    assert len(members) >= 4  # three pods at least, one of them flagged or replaced
    assert done.stderr == ""


def test_json_output_is_one_object_per_line_with_t_and_a_known_event() -> None:
    out = io.StringIO()
    run_scenario(default_scenario(), out=out, as_json=True, until=80 * 60)  # HostNotice at 1:15

    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {r["event"] for r in records} <= EVENTS
    assert {"transition", "action", "condition", "loop", "cloud", "end"} <= {
        r["event"] for r in records
    }
    times = [r["t"] for r in records]
    assert times == sorted(times)
    assert records[-1]["event"] == "end"
    assert records[-1]["status"]["mode"] == "Manage"
    loop = next(r for r in records if r["event"] == "loop")
    assert set(loop) == {
        "t",
        "event",
        "pool",
        "mode",
        "ready",
        "desired",
        "wired",
        "members",
        "costPerHour",
        "rollout",
    }
    assert loop["rollout"] == "Done", "the default scenario's pods run its spec.image"
    action = next(r for r in records if r["event"] == "action")
    assert {"pool", "action", "pod", "detail", "mode"} <= set(action)
    cloud = next(r for r in records if r["event"] == "cloud")
    assert set(cloud) == {
        "t",
        "event",
        "kind",
        "pod",
        "name",
        "datacenter",
        "gpuType",
        "image",
        "detail",
    }


def test_the_same_seed_gives_byte_identical_json_whatever_pythons_hash_seed() -> None:
    first = rpp("simulate", "--json", "--until", "35m", "--seed", "3", hash_seed="1")
    second = rpp("simulate", "--json", "--until", "35m", "--seed", "3", hash_seed="4242")
    other = rpp("simulate", "--json", "--until", "35m", "--seed", "4", hash_seed="1")

    assert first.returncode == second.returncode == other.returncode == 0
    assert first.stdout == second.stdout
    assert len(first.stdout.splitlines()) > 50
    assert other.stdout != first.stdout  # the seed makes the pod ids


BAD_SCENARIOS = pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "pool: {}\nevents: []\n",
            "pool.apiVersion: expected runpodpool.ownego.com/v1alpha1",
            id="empty-pool",
        ),
        pytest.param(
            "duration: 1h\nnope: 1\n",
            "nope: unknown field; known fields: description, duration",
            id="unknown-top-level",
        ),
        pytest.param(
            "{POOL}events:\n  - {{at: 10m, do: explode, pod: 1}}\n",
            "events[0].do: expected one of die, hang, slow",
            id="unknown-event",
        ),
        pytest.param(
            "{POOL}events:\n  - {{at: 10m, do: die}}\n",
            "events[0].pod: is required for `do: die`",
            id="missing-pod",
        ),
        pytest.param(
            "{POOL}duration: 1h\nevents:\n  - {{at: 2h, do: die, pod: 1}}\n",
            "events[0].at: 7200s is after the scenario's duration (3600s)",
            id="after-the-end",
        ),
        pytest.param(
            "{POOL}events:\n  - {{at: 1m, do: slow, pod: 1, latency: fast}}\n",
            "events[0].latency: 'fast' is not a duration",
            id="bad-latency",
        ),
        pytest.param(
            "{POOL}events:\n  - {{at: 1m, do: clock-step, by: -soon}}\n",
            "events[0].by: 'soon' is not a duration",
            id="bad-clock-step",
        ),
        pytest.param(
            "{POOL}events:\n  - {{at: 1m, do: errors, pod: 1, ratio: 2}}\n",
            "events[0].ratio: expected a number between 0 and 1, got 2",
            id="bad-ratio",
        ),
        pytest.param(
            "{POOL}events:\n  - {{at: 1m, do: load, value: 3, pod: 1}}\n",
            "events[0].pod: not a field of `do: load`; its fields: at, do, value",
            id="pod-on-load",
        ),
        pytest.param(
            "{POOL}events:\n  - at: 1m\n    do: apply\n"
            "    patch: {{spec: {{replicas: {{min: -1}}}}}}\n",
            "events[0].patch: spec.replicas.min:",
            id="patch-breaks-the-pool",
        ),
        pytest.param(
            "{POOL}cloud:\n  stock:\n    - {{datacenter: X, gpuType: G, count: many}}\n",
            "cloud.stock[0].count: expected an integer >= 0, got 'many'",
            id="cloud-stock",
        ),
        pytest.param("pool: [unclosed\n", "line 2, column 1: YAML syntax error", id="yaml-syntax"),
    ],
)


@BAD_SCENARIOS
def test_a_bad_scenario_is_reported_with_its_file_and_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    pool = (ROOT / "examples" / "scenarios" / "pod-dies.yaml").read_text()
    pool_block = pool[pool.index("pool:") : pool.index("cloud:")]
    path = tmp_path / "bad.yaml"
    path.write_text(text.format(POOL=pool_block) if "{POOL}" in text else text)

    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)

    first = str(caught.value).splitlines()[0]
    assert first.startswith(f"{path}: ")
    assert expected in str(caught.value)


def test_the_command_prints_every_problem_and_exits_2_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "pool:\n  apiVersion: runpodpool.ownego.com/v1alpha1\n  kind: RunPodPool\n"
        "  metadata: {name: inference}\n  spec: {replicas: {min: 0}, gpuTypes: []}\n"
    )

    code = main(["simulate", "--scenario", str(path)])

    err = capsys.readouterr().err.splitlines()
    assert code == 2
    assert len(err) >= 2  # every problem of the pool, one per line
    assert all(line.startswith(f"{path}: pool.spec.") for line in err)
    assert "Traceback" not in "\n".join(err)


def test_problems_in_every_section_are_reported_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "pool:\n  apiVersion: runpodpool.ownego.com/v1alpha1\n  kind: RunPodPool\n"
        "  metadata: {name: inference}\n  spec: {cloud: CHEAP}\n"
        "duration: 4q\n"
        "events:\n  - {at: 5x, do: die, pod: 1}\n  - {at: 1m, do: explode}\n"
    )

    code = main(["simulate", "--scenario", str(path)])

    err = capsys.readouterr().err
    assert code == 2
    assert f"{path}: pool.spec.cloud:" in err
    assert f"{path}: duration: '4q' is not a duration" in err
    assert f"{path}: events[0].at:" in err
    assert f"{path}: events[1].do: expected one of" in err


def test_unreadable_files_and_bad_until_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.yaml"

    assert main(["simulate", "--scenario", str(missing)]) == 2
    assert capsys.readouterr().err.startswith(f"{missing}: cannot read: ")
    assert main(["simulate", "--until", "soon"]) == 2
    assert capsys.readouterr().err.startswith("rpp simulate: --until: 'soon' is not a duration")


@pytest.mark.parametrize(
    ("by", "seconds"), [("1h", 3600.0), ("-1h", -3600.0), ("+90s", 90.0), (-600, -600.0)]
)
def test_a_clock_step_goes_either_way(tmp_path: Path, by: object, seconds: float) -> None:
    text = (ROOT / "examples" / "scenarios" / "pod-dies.yaml").read_text()
    events = text.index("events:")
    path = tmp_path / "step.yaml"
    path.write_text(text[:events] + f"events:\n  - {{at: 10m, do: clock-step, by: {by}}}\n")

    [event] = load_scenario(path).events

    assert (event.do, event.by) == ("clock-step", seconds)


def test_an_event_for_a_pod_that_does_not_exist_is_told_not_fatal() -> None:
    text = (ROOT / "examples" / "scenarios" / "pod-dies.yaml").read_text()
    text = text.replace("do: die, pod: 2", "do: die, pod: 9")
    scenario = parse_scenario_text(text, source="pod-9.yaml")

    records = run_scenario(scenario, out=None, until=25 * 60).timeline.records

    fault = next(r for r in records if r["event"] == "cloud" and r["kind"] == "fault")
    assert fault["detail"] == "pod 9 does not exist (any more); nothing happens"
    assert fault["pod"] is None
    assert records[-1]["status"]["ready"] == 3


def test_an_apply_after_a_delete_creates_the_pool_again_with_every_apply_so_far() -> None:
    """`kubectl apply` of a deleted pool creates it again from the file; while the
    deletion is held by the finalizer, an apply patches the pool being deleted."""
    text = (ROOT / "examples" / "scenarios" / "pool-deleted.yaml").read_text()
    text = text.replace(
        "  - {at: 20m, do: delete}",
        "  - {at: 10m, do: apply, patch: {spec: {replicas: {min: 2, max: 2}}}}\n"
        "  - {at: 12m, do: delete}\n"
        "  - {at: 12m30s, do: apply, patch: {spec: {drain: {period: 60s}}}}\n"
        "  - {at: 25m, do: apply, patch: {spec: {drain: {period: 90s}}}}",
    )
    scenario = parse_scenario_text(text, source="reapply.yaml")

    run = run_scenario(scenario, out=None, until=40 * 60, check_invariants=True)

    said = [r["detail"] for r in run.timeline.records if r["event"] == "scenario"]
    assert said[2] == "kubectl patch: spec drain.period=60s"  # still there, being deleted
    assert said[3].startswith("kubectl apply: the pool was deleted, so it is created again")
    end = run.timeline.records[-1]
    assert end["status"]["desired"] == 2  # the first apply is kept, not the file's 3
    assert end["status"]["ready"] == 2
    assert run.checker is not None
    assert run.checker.violations == []
