"""The GitHub workflows: actionlint-clean (with shellcheck on every `run:` script), every
action pinned by commit SHA, CI runs the README's test command, a release runs the whole
suite before it pushes anything; a v* tag releases the multi-arch image (`:latest` only for
a release, never a prerelease) with a Syft SBOM and a keyless cosign signature, a chart-v*
tag pushes the chart to the OCI registry the seed installs from and signs it; and every
night 1,000 generated scenarios run under the invariant checker."""

from __future__ import annotations

import os
import re
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
    # A job that calls a workflow (`uses:`) has no steps of its own.
    return [step for job in flow["jobs"].values() for step in job.get("steps", [])]


def test_workflows_are_the_four_and_actionlint_finds_nothing() -> None:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert [f.name for f in files] == ["ci.yml", "release-chart.yml", "release.yml", "soak.yml"]
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
    assert set(flow["on"]) == {"push", "pull_request", "workflow_call"}  # the releases call it
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


def test_every_action_is_pinned_by_commit_sha_with_its_release_named() -> None:
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for line in path.read_text().splitlines():
            if "uses:" not in line:
                continue
            action = line.split("uses:", 1)[1].strip()
            if action.startswith("./"):  # a workflow of this repository, at the same commit
                assert (ROOT / action).is_file(), f"{path.name}: {action}"
                continue
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+(\.\d+)*", action), (
                f"{path.name}: {action}"
            )


def test_releases_run_the_whole_suite_before_they_push() -> None:
    ci = workflow("ci.yml")
    assert "workflow_call" in ci["on"]
    assert [s["run"] for s in ci["jobs"]["test"]["steps"] if "run" in s] == ["scripts/test"]
    for name, pusher in (("release.yml", "image"), ("release-chart.yml", "chart")):
        jobs = workflow(name)["jobs"]
        assert set(jobs) == {"test", pusher}, name
        assert jobs[pusher]["needs"] == "test", name
        assert jobs["test"] == {"uses": "./.github/workflows/ci.yml"}, name


def test_release_pushes_the_multi_arch_image_on_a_v_tag() -> None:
    flow = workflow("release.yml")
    assert flow["on"] == {"push": {"tags": ["v*"]}}
    build = next(
        s for s in steps(flow) if s.get("uses", "").startswith("docker/build-push-action")
    )
    assert build["with"]["platforms"] == "linux/amd64,linux/arm64"
    assert build["with"]["push"] is True
    meta = next(s for s in steps(flow) if s.get("uses", "").startswith("docker/metadata-action"))
    # The image is named once, in the job's env, and every step reads it from there.
    assert flow["jobs"]["image"]["env"]["IMAGE"] == "ownego/runpod-pool-controller"
    assert meta["with"]["images"] == "${{ env.IMAGE }}"
    assert "ownego/runpod-pool-controller" not in yaml.safe_dump(flow["jobs"]["image"]["steps"])
    assert any(s.get("uses", "").startswith("docker/setup-qemu-action") for s in steps(flow))


def test_latest_moves_only_for_a_release_never_for_a_prerelease() -> None:
    flow = workflow("release.yml")
    meta = next(s for s in steps(flow) if s.get("uses", "").startswith("docker/metadata-action"))
    assert meta["with"]["flavor"] == "latest=false"  # no automatic latest
    latest = [t for t in meta["with"]["tags"].splitlines() if "latest" in t]
    assert latest == [
        "type=raw,value=latest,enable=${{ steps.version.outputs.prerelease == 'false' }}"
    ]
    version = next(s for s in steps(flow) if s.get("id") == "version")["run"]
    # A semver prerelease (0.3.0-rc.1) has a hyphen; the check classifies it so.
    for tag, prerelease in (("0.3.0", "false"), ("0.3.0-rc.1", "true")):
        script = version.split("case", 1)[1].split("esac", 1)[0]
        result = subprocess.run(
            ["bash", "-c", f'version={tag}; case{script}esac; echo "$prerelease"'],
            capture_output=True,
            text=True,
            check=True,
        )
        assert result.stdout.strip() == prerelease, tag


def test_the_image_gets_a_syft_sbom_and_keyless_signatures() -> None:
    flow = workflow("release.yml")
    job = flow["jobs"]["image"]
    assert job["permissions"]["id-token"] == "write"
    sbom = next(s for s in job["steps"] if s.get("uses", "").startswith("anchore/sbom-action@"))
    assert sbom["with"]["image"] == "${{ env.IMAGE }}@${{ steps.build.outputs.digest }}"
    assert sbom["with"]["format"] == "spdx-json"
    assert any(s.get("uses", "").startswith("sigstore/cosign-installer@") for s in job["steps"])
    script = "\n".join(s.get("run", "") for s in job["steps"])
    assert 'cosign sign --yes "$IMAGE@$DIGEST"' in script
    assert "cosign attest --yes --type spdxjson --predicate sbom.spdx.json" in script
    assert "--key" not in script  # keyless: the workflow's OIDC identity


def test_the_chart_is_signed_keyless_by_the_digest_it_was_pushed_as() -> None:
    job = workflow("release-chart.yml")["jobs"]["chart"]
    assert job["permissions"]["id-token"] == "write"
    script = "\n".join(s.get("run", "") for s in job["steps"])
    assert 'cosign sign --yes "ghcr.io/ownego/charts/runpod-pool-controller@$digest"' in script
    assert "--key" not in script


def test_release_chart_pushes_to_the_registry_the_seed_installs_from() -> None:
    flow = workflow("release-chart.yml")
    assert flow["on"] == {"push": {"tags": ["chart-v*"]}}
    assert flow["jobs"]["chart"]["permissions"]["packages"] == "write"
    scripts = "\n".join(s.get("run", "") for s in steps(flow))
    assert "helm package helm/runpod-pool-controller" in scripts
    assert "helm push dist/runpod-pool-controller-*.tgz oci://ghcr.io/ownego/charts" in scripts
    # The token goes through the environment and stdin, never on a command line.
    assert "--password-stdin" in scripts
    assert "secrets.GITHUB_TOKEN" not in scripts


def test_the_nightly_soak_runs_1000_scenarios_under_check_and_keeps_the_failures() -> None:
    flow = workflow("soak.yml")
    assert set(flow["on"]) == {"schedule", "workflow_dispatch"}
    assert flow["on"]["schedule"][0]["cron"]
    (job,) = flow["jobs"].values()
    commands = [s["run"] for s in job["steps"] if "run" in s]
    # On what the image ships: the hash-checked lock, then the package without dependencies.
    install = next(c for c in commands if "pip install" in c).splitlines()
    assert install[:2] == [
        "python -m pip install --require-hashes -r requirements.lock",
        "python -m pip install --no-deps .",
    ]
    soak = next(c for c in commands if "rpp simulate" in c)
    assert "--soak 1000" in soak
    assert "--keep soak-failures" in soak
    upload = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/upload"))
    assert upload["if"] == "failure()"
    assert upload["with"]["path"] == "soak-failures/"
