"""The package as the image installs it: the wheel alone, with its runtime dependencies only.

The Dockerfile installs requirements.lock (hash-checked), then a wheel built from
pyproject.toml, README.md, LICENSE and rpp/ without dependencies, and `pip check`s the
result. So a lock that misses a dependency, a module that imports a development tool at
the top, or a dependency that is used but not declared, breaks the image and no other
test. Here the wheel is built from the same files (setuptools must not warn), installed
into a fresh venv exactly so (the lock with --require-hashes, then the wheel alone, no dev
extra), and the first commands a user types must answer. The install runs once per run;
pip's cache serves the wheels bootstrap already fetched.

A second, static check: every third-party module imported anywhere under rpp/ belongs to a
declared runtime dependency (aiohttp was imported directly for a while without being one).
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from rpp import __version__
from rpp.cli import COMMANDS
from tests.fixtures_install import ROOT

# Imported by rpp but not a runtime dependency of its own, and why that is safe.
NOT_DECLARED = {
    "pydot": "rpp diagrams, a development tool, imports it when it draws, and says so if absent",
    "pydantic_core": "pydantic's own core, pinned to one exact version by pydantic itself; "
    "its documented API (PydanticCustomError, core_schema) is meant to be imported",
}


@dataclass(frozen=True)
class WheelOnly:
    bin: Path
    build_log: str
    work: Path

    def rpp(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / "rpp"), *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=self.work,  # not the repository: its rpp/ must not be the one imported
            check=False,
        )


def copied_by_the_dockerfile() -> list[str]:
    """The build context the image's wheel is made from (the COPY lines of the build stage)."""
    sources: list[str] = []
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            sources += line.split()[1:-1]
    return sources


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def wheel_only(tmp_path_factory: pytest.TempPathFactory) -> WheelOnly:
    work = tmp_path_factory.mktemp("wheel-only")
    src = work / "src"
    src.mkdir()
    for name in copied_by_the_dockerfile():
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, src / name)
    build = pip("wheel", "-v", "--no-deps", "--wheel-dir", str(work / "dist"), str(src))
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    [wheel] = (work / "dist").glob("runpod_pool_controller-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # As the image does: the locked dependencies, every file checked against its hash, then
    # the wheel alone. This interpreter's pip installs into the new venv.
    python = str(venv / "bin" / "python")
    lock = ROOT / "requirements.lock"
    for args in (("--require-hashes", "-r", str(lock)), ("--no-deps", str(wheel))):
        install = pip("--python", python, "install", *args)
        assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    return WheelOnly(bin=venv / "bin", build_log=build.stdout + build.stderr, work=work)


def test_the_wheel_builds_without_a_setuptools_warning(wheel_only: WheelOnly) -> None:
    backend_warnings = [
        line
        for line in wheel_only.build_log.splitlines()
        if re.search(r"\w+Warning\b|deprecated", line, flags=re.IGNORECASE)
    ]
    assert backend_warnings == []


def test_the_venv_holds_the_runtime_dependencies_and_no_dev_tool(wheel_only: WheelOnly) -> None:
    listed = pip("--python", str(wheel_only.bin / "python"), "list", "--format=json")
    installed = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert {"runpod-pool-controller", "kubernetes", "aiohttp", "httpx", "pyyaml"} <= installed
    assert not installed & {"pytest", "pydot", "mypy", "ruff", "hypothesis"}
    checked = pip("--python", str(wheel_only.bin / "python"), "check")
    assert checked.returncode == 0, checked.stdout


def test_the_package_is_the_wheel_not_the_checkout(wheel_only: WheelOnly) -> None:
    where = subprocess.run(
        [str(wheel_only.bin / "python"), "-c", "import rpp; print(rpp.__file__)"],
        capture_output=True,
        text=True,
        cwd=wheel_only.work,
        check=True,
    )
    assert Path(where.stdout.strip()).is_relative_to(wheel_only.bin.parent)


def test_version_prints_the_version(wheel_only: WheelOnly) -> None:
    result = wheel_only.rpp("--version")
    assert (result.returncode, result.stdout.strip()) == (0, f"rpp {__version__}")


def test_help_lists_every_command(wheel_only: WheelOnly) -> None:
    result = wheel_only.rpp("--help")
    assert result.returncode == 0, result.stderr
    for name in COMMANDS:
        assert name in result.stdout


def test_validate_reads_the_example_pool(wheel_only: WheelOnly) -> None:
    result = wheel_only.rpp("validate", str(ROOT / "examples" / "pool.yaml"))
    assert result.returncode == 0, result.stderr
    assert "inference: DryRun" in result.stdout


def test_crd_prints_the_committed_crd(wheel_only: WheelOnly) -> None:
    result = wheel_only.rpp("crd")
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout) == yaml.safe_load(
        (ROOT / "deploy" / "crd.yaml").read_text()
    )


def test_diagrams_without_pydot_says_so_in_one_line(wheel_only: WheelOnly) -> None:
    result = wheel_only.rpp("diagrams", "--check", "--root", str(ROOT))
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "pydot is not installed" in line
    assert "[dev]" in line


def third_party_imports(package: Path) -> Iterator[tuple[str, str]]:
    """(top-level module, file) for every absolute import of another package."""
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "rpp" and top not in sys.stdlib_module_names and top != "__future__":
                    yield top, str(path.relative_to(package.parent))


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_module_rpp_imports_is_a_declared_runtime_dependency() -> None:
    requirements = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    declared = {normalized(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]) for r in requirements}
    providers = importlib.metadata.packages_distributions()
    undeclared = sorted(
        {
            f"{module} ({file})"
            for module, file in third_party_imports(ROOT / "rpp")
            if module not in NOT_DECLARED
            and not {normalized(d) for d in providers.get(module, [module])} & declared
        }
    )
    assert undeclared == []


def test_the_import_check_sees_a_module_that_is_not_declared(tmp_path: Path) -> None:
    package = tmp_path / "rpp"
    package.mkdir()
    (package / "m.py").write_text("import os\nimport aiohttp\nfrom rpp import x\n")
    assert list(third_party_imports(package)) == [("aiohttp", "rpp/m.py")]
