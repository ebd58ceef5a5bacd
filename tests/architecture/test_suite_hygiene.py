"""The suite's own rules, checked: strict mypy covers the tests too, every helper has one
module name, and any warning fails the test that raised it."""

from __future__ import annotations

import re
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
