"""The layer contracts in pyproject.toml catch what a hand-made checker missed.

`lint-imports` runs in scripts/test over the real package. Here it runs over a copy of
the package with one import added, to show the contracts fail where they must: the
controller's HTTP API once imported the simulator's ASGI helpers, so `rpp run` loaded
rpp.sim; and a decision reaching the RunPod client through a model module is caught
although decide never imports the client itself.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
LINT = Path(sys.executable).parent / "lint-imports"


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT), "--no-cache", "--config", str(tree / "pyproject.toml")],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "rpp", tmp_path / "rpp", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def add_import(module: Path, line: str) -> None:
    text = module.read_text()
    head, sep, rest = text.partition("from __future__ import annotations\n")
    module.write_text(head + sep + line + "\n" + rest)


def test_the_package_keeps_every_contract(package_copy: Path) -> None:
    result = lint(package_copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_production_code_importing_the_simulator_breaks_the_layers(package_copy: Path) -> None:
    add_import(package_copy / "rpp/controller/http_api.py", "import rpp.sim.asgi_io")
    result = lint(package_copy)
    assert result.returncode != 0
    assert "rpp.controller.http_api -> rpp.sim.asgi_io" in result.stdout


def test_decide_reaching_an_adapter_through_the_model_is_caught(package_copy: Path) -> None:
    # decide/placement.py imports rpp.model.timestamps; make that module reach the client.
    add_import(package_copy / "rpp/model/timestamps.py", "import rpp.adapters.runpod.client")
    result = lint(package_copy)
    assert result.returncode != 0
    assert "rpp.decide" in result.stdout
    assert "rpp.model.timestamps -> rpp.adapters.runpod.client" in result.stdout


def test_act_reaching_a_decision_is_caught(package_copy: Path) -> None:
    # The layers allow it (act sits above decide); act must still carry out, not decide.
    add_import(package_copy / "rpp/act/create.py", "import rpp.decide.capacity.placement")
    result = lint(package_copy)
    assert result.returncode != 0
    assert "act carries out and decides nothing BROKEN" in result.stdout
    assert "rpp.act.create -> rpp.decide.capacity.placement" in result.stdout
