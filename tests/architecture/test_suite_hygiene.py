"""The suite's own rules, checked: strict mypy covers the tests too, every helper has one
module name, and any warning fails the test that raised it."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_mypy_checks_the_package_and_its_tests_strictly() -> None:
    mypy = PYPROJECT["tool"]["mypy"]
    assert mypy["strict"] is True
    assert mypy["files"] == ["rpp", "tests"]
    assert "\n.venv/bin/mypy " in (ROOT / "scripts" / "test").read_text()


def test_every_test_helper_is_imported_under_one_name() -> None:
    """A helper imported both as `fixtures_x` and `tests.fixtures_x` is two modules to
    mypy (which then stops) and to Python (two copies of its state)."""
    assert (ROOT / "tests" / "__init__.py").exists()
    helpers = {p.stem for p in (ROOT / "tests").glob("*.py") if p.stem != "__init__"}
    bare = re.compile(rf"^\s*(?:from|import) ({'|'.join(sorted(helpers))})\b", re.MULTILINE)
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0).strip()}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for match in bare.finditer(path.read_text())
    ]
    assert found == []


def test_any_warning_fails_the_test_that_raised_it() -> None:
    filters = PYPROJECT["tool"]["pytest"]["ini_options"]["filterwarnings"]
    assert filters[0] == "error"
    # Each exception is an `ignore` of a named third-party warning, never a blanket one.
    for entry in filters[1:]:
        action, _, rest = entry.partition(":")
        assert action == "ignore"
        assert rest.strip()


def test_scripts_test_reports_the_contracts_without_the_linters_banner() -> None:
    """scripts/test's import-linter step, run as it is written there: one line saying the
    contracts held, not the linter's ASCII-art logo in the middle of the test output."""
    script = (ROOT / "scripts" / "test").read_text()
    step = script.split("\n.venv/bin/mypy", 1)[1].split("\n", 1)[1].split("\nexec ", 1)[0]
    assert "lint-imports" in step
    result = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + step],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("import-linter: Contracts: ")
    assert result.stdout.count("\n") == 1
    assert "╔" not in result.stdout
