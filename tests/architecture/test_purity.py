"""Decide, the machines and the model are pure, and a planted violation fails the suite.

Pure means a function of `now` and the observations: no clock, file, network, environment,
thread, process or import by name. Three checks hold it, each where it really sees:

- ruff's TID251 (pyproject.toml: flake8-tidy-imports.banned-api, applied to these three
  packages only by a negated per-file-ignore) names the line that imports a banned module
  or reaches a banned attribute such as `datetime.datetime.now`;
- the import-linter contract "decisions and the model do no I/O and read no clock"
  forbids the same modules, also through a chain of our own modules;
- `impure_calls` here walks the source for what neither tool resolves: builtins (`open`,
  `__import__`, `exec`), a path's methods on a value handed in (`p.read_text()`), and the
  clock read through an instance (`now.now()`).

Each check runs over the real packages, and over a plant of each violation the issue
listed (importlib.import_module, datetime.now, Path().read_text, urllib.request,
threading) to show it fails there.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
BIN = Path(sys.executable).parent
PURE = ("rpp/decide", "rpp/machines", "rpp/model")
CONTRACT = "decisions and the model do no I/O and read no clock"

# Calls of a builtin by its bare name: neither ruff's banned-api nor import-linter sees them.
_BUILTINS = {
    "open": ("filesystem", "opens a file; the command or adapter layer reads it"),
    "__import__": ("dynamic-import", "imports by name; import the module at the top"),
    "exec": ("dynamic-import", "runs code from a string"),
    "eval": ("dynamic-import", "runs code from a string"),
    "compile": ("dynamic-import", "compiles code from a string"),
    "input": ("console", "reads stdin"),
    "print": ("console", "writes stdout; return the text, or an Event or log effect"),
    "breakpoint": ("console", "stops for a debugger"),
}
# Methods that reach the filesystem or the clock on a value whose type the linters cannot
# know (a Path or a datetime handed in as an argument).
_METHODS = {
    **dict.fromkeys(
        (
            "read_text", "read_bytes", "write_text", "write_bytes", "open", "iterdir",
            "glob", "rglob", "touch", "unlink", "mkdir", "rmdir", "exists", "is_file",
            "is_dir", "stat",
        ),
        ("filesystem", "reaches the filesystem; the command or adapter layer reads it"),
    ),
    **dict.fromkeys(
        ("now", "utcnow", "today"),
        ("clock", "reads the clock; take `now` as a parameter"),
    ),
}  # fmt: skip


def impure_calls(source: str, filename: str) -> list[str]:
    """Each impure call in `source` as "file:line: rule: what it does"."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in _BUILTINS:
            rule, why = _BUILTINS[func.id]
            found.append(f"{filename}:{node.lineno}: {rule}: `{func.id}(...)` {why}")
        elif isinstance(func, ast.Attribute) and func.attr in _METHODS:
            rule, why = _METHODS[func.attr]
            found.append(f"{filename}:{node.lineno}: {rule}: `.{func.attr}(...)` {why}")
    return found


def impure_calls_under(tree: Path) -> list[str]:
    """`impure_calls` over every module of the pure packages in `tree`."""
    paths = sorted(path for package in PURE for path in (tree / package).rglob("*.py"))
    return [
        problem
        for path in paths
        for problem in impure_calls(path.read_text(), str(path.relative_to(tree)))
    ]


def ruff_banned(tree: Path, *paths: str) -> subprocess.CompletedProcess[str]:
    """ruff's TID251 alone over `paths` of `tree`, with `tree`'s pyproject.toml."""
    command = [str(BIN / "ruff"), "check", "--no-cache", "--select", "TID251"]
    return subprocess.run(
        [*command, "--output-format", "concise", *paths],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "lint-imports"), "--no-cache", "--config", str(tree / "pyproject.toml")],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# -- the real packages ------------------------------------------------------------------


def test_pure_packages_make_no_call_the_linters_cannot_see() -> None:
    assert impure_calls_under(ROOT) == []


def test_pure_packages_import_and_reach_nothing_banned() -> None:
    result = ruff_banned(ROOT, *PURE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_and_the_import_contract_ban_the_same_modules() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    banned = config["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-api"]
    (contract,) = (c for c in config["tool"]["importlinter"]["contracts"] if c["name"] == CONTRACT)
    assert sorted(contract["source_modules"]) == ["rpp.decide", "rpp.machines", "rpp.model"]
    assert sorted(name for name in banned if "." not in name) == sorted(
        contract["forbidden_modules"]
    )


# -- planted violations -------------------------------------------------------------------

# (what the issue or the brief names, the planted source, what ruff reports on which line)
RUFF_PLANTS = [
    ("dynamic import", "import importlib\n\nimportlib.import_module('os')\n", 1, "importlib"),
    (
        "datetime.now",
        "from datetime import datetime\n\nNOW = datetime.now()\n",
        3,
        "datetime.datetime.now",
    ),
    ("date.today", "import datetime as dt\n\nTODAY = dt.date.today()\n", 3, "datetime.date.today"),
    ("Path().read_text", "from pathlib import Path\n\nPath('x').read_text()\n", 1, "pathlib"),
    ("urllib.request", "import urllib.request\n", 1, "urllib"),
    ("threading", "import threading\n\nLOCAL = threading.local()\n", 1, "threading"),
    ("time.monotonic", "from time import monotonic\n", 1, "time"),
    ("os.environ", "import os\n\nHOME = os.environ['HOME']\n", 1, "os"),
    ("socket", "import socket\n", 1, "socket"),
    ("httpx", "import httpx\n", 1, "httpx"),
    ("asyncio", "import asyncio\n", 1, "asyncio"),
    ("multiprocessing", "import multiprocessing\n", 1, "multiprocessing"),
]


@pytest.fixture
def ruff_tree(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for package in (*PURE, "rpp/act"):
        (tmp_path / package).mkdir(parents=True)
    return tmp_path


@pytest.mark.parametrize("package", PURE)
@pytest.mark.parametrize(
    ("source", "line", "name"),
    [plant[1:] for plant in RUFF_PLANTS],
    ids=[plant[0] for plant in RUFF_PLANTS],
)
def test_ruff_fails_a_planted_violation_in_each_pure_package(
    ruff_tree: Path, package: str, source: str, line: int, name: str
) -> None:
    (ruff_tree / package / "planted.py").write_text(source)
    result = ruff_banned(ruff_tree, package)
    assert result.returncode != 0
    assert f"{package}/planted.py:{line}:" in result.stdout
    assert f"TID251 `{name}` is banned" in result.stdout


def test_ruff_lets_the_controller_layers_read_the_clock_and_files(ruff_tree: Path) -> None:
    # The bans are for pure code only: act, observe and the controller do the I/O.
    for number, (_, source, _, _) in enumerate(RUFF_PLANTS):
        (ruff_tree / "rpp/act" / f"planted_{number}.py").write_text(source)
    result = ruff_banned(ruff_tree, "rpp/act")
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize(
    ("package", "line", "module"),
    [
        ("rpp/decide", "import importlib", "importlib"),
        ("rpp/decide", "import urllib.request", "urllib"),
        ("rpp/machines", "import threading", "threading"),
        ("rpp/model", "from pathlib import Path", "pathlib"),
        ("rpp/model", "import time", "time"),
    ],
)
def test_the_import_contract_fails_a_planted_import(
    tmp_path: Path, package: str, line: str, module: str
) -> None:
    shutil.copytree(ROOT / "rpp", tmp_path / "rpp", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / package / "planted.py").write_text(f"{line}\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert f"{CONTRACT} BROKEN" in result.stdout
    dotted = package.replace("/", ".")
    assert f"{dotted}.planted -> {module}" in result.stdout


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("RAW = open('spec.yaml').read()\n", ":1: filesystem: `open(...)`"),
        ("os = __import__('os')\n", ":1: dynamic-import: `__import__(...)`"),
        ("exec('import os')\n", ":1: dynamic-import: `exec(...)`"),
        ("def spec(path):\n    return path.read_text()\n", ":2: filesystem: `.read_text(...)`"),
        ("def late(now):\n    return now.now() - now\n", ":2: clock: `.now(...)`"),
        ("print('deciding')\n", ":1: console: `print(...)`"),
    ],
)
def test_the_source_walk_fails_a_planted_call_the_linters_cannot_see(
    ruff_tree: Path, source: str, expected: str
) -> None:
    (ruff_tree / "rpp/machines/planted.py").write_text(source)
    found = impure_calls_under(ruff_tree)
    assert len(found) == 1
    assert found[0].startswith("rpp/machines/planted.py" + expected)
