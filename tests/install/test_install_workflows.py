"""The GitHub workflows: actionlint-clean (with shellcheck on every `run:` script), every
action pinned by commit SHA, CI runs the README's test command, a release runs the whole
suite before it pushes anything; a v* tag releases the multi-arch image (`:latest` only for
a release, never a prerelease) with a Syft SBOM and a keyless cosign signature, a chart-v*
tag pushes both charts (the controller's and the CRD's) to the OCI registry the seed installs
from and signs each; and every night 1,000 generated scenarios run under the invariant
checker."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.fixtures_install import CHART, CRD_CHART, ROOT

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


# Stand-ins for helm and cosign on the chart job's PATH: each logs its arguments; `helm
# package` writes <name>-<version>.tgz as Helm names it, and `helm push` refuses a missing
# file and answers as Helm's registry client does (pkg/registry/client.go: "Pushed: <ref>",
# "Digest: <digest>"), the digest one of the package's own. A login reads the password on
# its standard input, as `--password-stdin` makes the real ones do: a stand-in that exits
# without reading it fails the job's `echo ... |` with SIGPIPE (141) under pipefail.
HELM_STUB = """#!/bin/bash
set -e
echo "helm $*" >> "$STUB_LOG"
case "$*" in *--password-stdin*) cat > /dev/null ;; esac
case "$1" in
package)
  version=$(sed -n 's/^version: *//p' "$2/Chart.yaml")
  mkdir -p "$4"
  echo "$(basename "$2")" > "$4/$(basename "$2")-$version.tgz"
  ;;
push)
  [ -f "$2" ] || { echo "Error: $2: no such file" >&2; exit 1; }
  echo "Pushed: ${3#oci://}/$(basename "$2" .tgz)"
  echo "Digest: sha256:$(sha256sum "$2" | cut -c1-64)"
  ;;
esac
"""
COSIGN_STUB = (
    '#!/bin/bash\necho "cosign $*" >> "$STUB_LOG"\n'
    'case "$*" in *--password-stdin*) cat > /dev/null ;; esac\n'
)


def run_chart_job(
    tmp_path: Path, tag: str, *, crd_chart_version: str | None = None
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The chart job's `run:` steps in order, as GitHub runs them (bash -eo pipefail, the
    job's env), on a copy of both charts' Chart.yaml (the CRD chart's version replaced by
    `crd_chart_version`), with helm and cosign stood in for. Returns the last step run and
    every helm and cosign command line, in order."""
    job = workflow("release-chart.yml")["jobs"]["chart"]
    for chart in (CHART, CRD_CHART):
        (tmp_path / "helm" / chart.name).mkdir(parents=True)
        shutil.copy(chart / "Chart.yaml", tmp_path / "helm" / chart.name / "Chart.yaml")
    if crd_chart_version is not None:
        copied = tmp_path / "helm" / CRD_CHART.name / "Chart.yaml"
        text = re.sub(r"(?m)^version: .*$", f"version: {crd_chart_version}", copied.read_text())
        copied.write_text(text)
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, text in (("helm", HELM_STUB), ("cosign", COSIGN_STUB)):
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    log = tmp_path / "stub.log"
    log.touch()
    env = {
        "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}",
        "STUB_LOG": str(log),
        "GITHUB_REF_NAME": tag,
        "REGISTRY_USER": "release-bot",
        "REGISTRY_TOKEN": "token-from-the-environment",
        **job.get("env", {}),
    }
    done = subprocess.CompletedProcess[str]([], 0, "", "")
    for step in job["steps"]:
        if "run" not in step:
            continue
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env=env,
        )
        if done.returncode != 0:
            break
    return done, log.read_text().splitlines()


def test_a_chart_tag_lints_packages_pushes_and_signs_both_charts(tmp_path: Path) -> None:
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]
    done, commands = run_chart_job(tmp_path, f"chart-v{version}")
    assert done.returncode == 0, done.stdout + done.stderr
    registry = "oci://ghcr.io/ownego/charts"
    lint = [c for c in commands if c.startswith("helm lint")]
    package = [c for c in commands if c.startswith("helm package")]
    push = [c for c in commands if c.startswith("helm push")]
    sign = [c for c in commands if c.startswith("cosign sign")]
    names = [CHART.name, CRD_CHART.name]
    assert lint == [f"helm lint --strict helm/{name}" for name in names]
    assert package == [f"helm package helm/{name} --destination dist" for name in names]
    assert push == [f"helm push dist/{name}-{version}.tgz {registry}" for name in names]
    # Each chart is signed by the digest its own push printed, never the other's.
    digests = {
        name: subprocess.run(
            ["sha256sum", tmp_path / "dist" / f"{name}-{version}.tgz"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout[:64]
        for name in names
    }
    assert sign == [
        f"cosign sign --yes ghcr.io/ownego/charts/{name}@sha256:{digests[name]}" for name in names
    ]
    # Keyless (the workflow's OIDC identity), and the token only on stdin.
    assert not [c for c in commands if "--key" in c or "token-from-the-environment" in c]


def test_a_tag_that_does_not_match_either_charts_version_pushes_nothing(tmp_path: Path) -> None:
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]
    done, commands = run_chart_job(tmp_path, f"chart-v{version}", crd_chart_version="0.0.1")
    assert done.returncode == 1
    assert done.stdout.strip() == (
        f"::error::tag chart-v{version} does not match "
        "helm/runpod-pool-controller-crd/Chart.yaml version 0.0.1"
    )
    assert commands == []
    done, commands = run_chart_job(tmp_path / "other", "chart-v0.0.1")
    assert done.returncode == 1
    assert "does not match helm/runpod-pool-controller/Chart.yaml" in done.stdout
    assert commands == []


def test_the_chart_job_signs_with_its_own_oidc_identity() -> None:
    job = workflow("release-chart.yml")["jobs"]["chart"]
    assert job["permissions"]["id-token"] == "write"
    assert job["env"]["CHARTS"].split() == [CHART.name, CRD_CHART.name]


def test_release_chart_pushes_to_the_registry_the_seed_installs_from() -> None:
    flow = workflow("release-chart.yml")
    assert flow["on"] == {"push": {"tags": ["chart-v*"]}}
    assert flow["jobs"]["chart"]["permissions"]["packages"] == "write"
    scripts = "\n".join(s.get("run", "") for s in steps(flow))
    assert "oci://ghcr.io/ownego/charts" in scripts
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
