"""`rpp validate`: summary lines, every problem as FILE: path: message, exit codes 0/1/2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rpp.cli import main
from rpp.model.spec_load import load_pool, load_spec

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "pool.yaml"


def test_valid_file_prints_one_summary_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [
        f"{EXAMPLE}: inference: DryRun, min 2, max 3, "
        "GPU types NVIDIA GeForce RTX 4090, NVIDIA RTX A6000"
    ]


def test_show_defaults_prints_the_resolved_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = tmp_path / "p.yaml"
    pool.write_text(
        "apiVersion: runpodpool.ownego.com/v1alpha1\nkind: RunPodPool\n"
        "metadata: {name: web}\nspec: {replicas: {min: 2}}\n"
    )
    assert main(["validate", "--show-defaults", str(pool)]) == 0
    out = capsys.readouterr().out
    resolved = yaml.safe_load(out.split("\n", 1)[1])
    assert resolved["spec"]["namePrefix"] == "rpp-web-"
    assert resolved["spec"]["limits"]["maxPods"] == 4
    assert resolved["spec"]["drain"]["period"] == "150s"
    assert resolved["spec"]["health"]["replaceWhen"]["slowScrape"]["threshold"] == "2s"


def test_show_defaults_output_loads_back_to_the_same_spec(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", "--show-defaults", str(EXAMPLE)]) == 0
    shown = yaml.safe_load(capsys.readouterr().out.split("\n", 1)[1])
    pool, problems = load_pool(yaml.safe_load(EXAMPLE.read_text()))
    again, _ = load_spec("inference", shown["spec"])
    assert problems == []
    assert pool is not None
    assert again == pool.spec


def test_invalid_file_lists_every_problem_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    obj = yaml.safe_load(EXAMPLE.read_text())
    obj["spec"]["cloud"] = "CHEAP"
    obj["spec"]["replicas"] = {"min": 5, "max": 4}
    bad.write_text(yaml.safe_dump(obj))
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert f"{bad}: spec.cloud: 'CHEAP' is not valid; use SECURE or COMMUNITY" in err
    assert any(line.startswith(f"{bad}: spec.replicas: min (5) is greater") for line in err)
    assert any(line.startswith(f"{bad}: spec.nginx.slotPorts:") for line in err)


def test_yaml_syntax_error_exits_2_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("apiVersion: x\nspec:\n  replicas: [1,\n  other: 2\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{bad}: line ")
    assert "YAML syntax error" in err


def test_unreadable_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read: No such file or directory" in capsys.readouterr().err


def test_worst_exit_code_wins_across_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", str(EXAMPLE), str(tmp_path / "nope.yaml")]) == 2
    assert "inference: DryRun" in capsys.readouterr().out


def test_no_traceback_for_a_document_that_is_not_a_mapping(tmp_path: Path) -> None:
    odd = tmp_path / "odd.yaml"
    odd.write_text("- just\n- a list\n")
    result = subprocess.run(
        [sys.executable, "-m", "rpp", "validate", str(odd)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == (
        f"{odd}: is a list of 2 items, not a RunPodPool; write each pool as its own YAML "
        "document, separated by a line ---\n"
    )


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    """`rpp simulate --json | head` must not end in a traceback."""
    with subprocess.Popen(
        [sys.executable, "-m", "rpp", "simulate", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        proc.stdout.close()
        _, err = proc.communicate(timeout=120)
    assert first.startswith("{")
    assert "Traceback" not in err
    assert proc.returncode == 0


def test_limits_with_no_room_for_a_surge_pod_warn_and_still_exit_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    obj = yaml.safe_load(EXAMPLE.read_text())
    obj["spec"]["replicas"] = {"min": 3, "max": 3}
    obj["spec"]["limits"].update(maxPods=3, maxHourlyCostUsd=3.0, estimatedPodCostUsd=1.0)
    tight = tmp_path / "tight.yaml"
    tight.write_text(yaml.safe_dump(obj))
    assert main(["validate", str(tight)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{tight}: inference: DryRun, min 3, max 3")
    warnings = captured.err.strip().splitlines()
    assert [w.split(": ")[2] for w in warnings] == [
        "spec.limits.maxPods",
        "spec.maxPerDatacenter",
        "spec.limits.maxHourlyCostUsd",
    ]
    assert all(w.startswith(f"{tight}: warning: ") for w in warnings)
    assert "3 leaves no room for a surge pod at 3 pods (replicas.min)" in warnings[0]
    assert "use 4 or more" in warnings[0]
    assert "3 allowed datacenter(s) x maxPerDatacenter 1 = 3 pods" in warnings[1]
    assert "$3/h leaves no room" in warnings[2]


def test_the_example_pool_has_room_for_a_surge_pod(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(EXAMPLE)]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("field", "value", "line"),
    [
        ("generation", "abc", "metadata.generation: expected a whole number, got 'abc'"),
        ("labels", "{team: 1}", "metadata.labels.team: expected a string, got 1"),
        ("finalizers", "[a, 2]", "metadata.finalizers[1]: expected a string, got 2"),
    ],
)
def test_a_metadata_field_of_the_wrong_type_is_one_line_not_a_traceback(
    field: str, value: str, line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The API server decodes a request's metadata into ObjectMeta and refuses what does
    not fit (apiextensions-apiserver's unstructuredSchemaCoercer drops malformed metadata
    only when reading stored objects); `generation: abc` once crashed rpp validate."""
    text = EXAMPLE.read_text().replace("\nspec:\n", f"\n  {field}: {value}\nspec:\n", 1)
    pool = tmp_path / "pool.yaml"
    pool.write_text(text)
    assert main(["validate", str(pool)]) == 1
    assert capsys.readouterr().err.splitlines() == [f"{pool}: {line}"]
