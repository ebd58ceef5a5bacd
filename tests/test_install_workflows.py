"""The GitHub workflows: actionlint-clean (with shellcheck on every `run:` script), CI runs
the README's test command, a v* tag releases the multi-arch image, a chart-v* tag pushes the
chart to the OCI registry the seed installs from."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.fixtures_install import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
BIN = Path(sys.executable).parent  # actionlint and shellcheck come with the dev extra


def actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    # shellcheck on PATH: actionlint then checks every `run:` script with it.
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [str(BIN / "actionlint"), "-no-color", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )


def workflow(name: str) -> dict[str, Any]:
    loaded: dict[Any, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    # YAML 1.1 reads the key `on` as True.
    loaded["on"] = loaded.pop(True)
    return loaded


def steps(flow: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in flow["jobs"].values() for step in job["steps"]]


def test_workflows_are_the_three_and_actionlint_finds_nothing() -> None:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert [f.name for f in files] == ["ci.yml", "release-chart.yml", "release.yml"]
    result = actionlint(*files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_runs_shellcheck_on_run_scripts(tmp_path: Path) -> None:
    """Guards the guard: an unquoted variable in a `run:` script is reported."""
    flow = tmp_path / ".github" / "workflows" / "bad.yml"
    flow.parent.mkdir(parents=True)
    flow.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n"
        "      - run: echo $HOME/$1\n"
    )
    result = actionlint(flow)
    assert result.returncode != 0
    assert "shellcheck" in result.stdout


def test_ci_runs_the_readme_test_command() -> None:
    flow = workflow("ci.yml")
    assert set(flow["on"]) == {"push", "pull_request"}
    assert "scripts/test" in (ROOT / "README.md").read_text()
    test_steps = flow["jobs"]["test"]["steps"]
    assert [s["run"] for s in test_steps if "run" in s] == ["scripts/test"]
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("exec scripts/test")
    for job in flow["jobs"].values():
        python = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-"))
        assert python["with"]["python-version"] == "3.11"


def test_ci_installs_the_wheel_alone_and_runs_the_first_commands() -> None:
    """What the image gets: the wheel and its runtime dependencies, no dev extra."""
    wheel_steps = workflow("ci.yml")["jobs"]["wheel"]["steps"]
    script = "\n".join(s.get("run", "") for s in wheel_steps)
    assert "pip wheel --no-deps" in script
    assert "python -m venv" in script
    assert "[dev]" not in script
    assert "-e " not in script
    commands = [line.strip() for line in script.splitlines() if line.strip().startswith('"$rpp"')]
    assert commands == [
        '"$rpp" --version',
        '"$rpp" --help',
        '"$rpp" validate examples/pool.yaml',
        '"$rpp" crd > "$RUNNER_TEMP/crd.yaml"',
    ]


def test_release_pushes_the_multi_arch_image_on_a_v_tag() -> None:
    flow = workflow("release.yml")
    assert flow["on"] == {"push": {"tags": ["v*"]}}
    build = next(
        s for s in steps(flow) if s.get("uses", "").startswith("docker/build-push-action")
    )
    assert build["with"]["platforms"] == "linux/amd64,linux/arm64"
    assert build["with"]["push"] is True
    meta = next(s for s in steps(flow) if s.get("uses", "").startswith("docker/metadata-action"))
    assert meta["with"]["images"] == "ownego/runpod-pool-controller"
    assert "type=raw,value=latest" in meta["with"]["tags"]
    assert any(s.get("uses", "").startswith("docker/setup-qemu-action") for s in steps(flow))


def test_release_chart_pushes_to_the_registry_the_seed_installs_from() -> None:
    flow = workflow("release-chart.yml")
    assert flow["on"] == {"push": {"tags": ["chart-v*"]}}
    assert flow["permissions"]["packages"] == "write"
    scripts = "\n".join(s.get("run", "") for s in steps(flow))
    assert "helm package helm/runpod-pool-controller" in scripts
    assert "helm push dist/runpod-pool-controller-*.tgz oci://ghcr.io/ownego/charts" in scripts
    # The token goes through the environment and stdin, never on a command line.
    assert "--password-stdin" in scripts
    assert "secrets.GITHUB_TOKEN" not in scripts
