"""A clone passes its own tests with nothing beside it: no file names a path above the root.

The contract tests once read RunPod's OpenAPI document from a folder beside the clone,
so every clone but the original failed. This scans every project file (tests, scripts,
CI, benchmarks, docs, the package, the install files) for the three ways a path leaves
the repository: an absolute path into a home or work folder, a relative `../` that
climbs above the root, and a `Path(__file__)` parent chain longer than the file is deep.
Third-party files kept verbatim (vendor/) are not ours to scan.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[2]

SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "vendor",
    "build",
    "dist",
    "node_modules",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
}
TEXT_SUFFIXES = {".py", ".sh", ".md", ".toml", ".yaml", ".yml", ".json", ".cfg", ".ini", ".txt"}
# Files without a suffix that are text: scripts/test, .ci/run, Makefile, Dockerfile...
BINARY_SUFFIXES = {".svg", ".png", ".jpg", ".gif", ".whl", ".gz", ".tgz", ".dot"}

# Where the sibling folders of a working copy live; the names are split so this file
# does not match itself.
ABSOLUTE = re.compile(r"(?<![\w.])/(?:" + "wo" + r"rk|home|Users|root)/[\w.-]+")
SIBLINGS = re.compile(r"\b" + "sha" + r"red/(?:runpod|design|seed)\b")
CLIMB = re.compile(r"(?<![\w.$)}\]])((?:\.\./)+)")
FILE_PARENTS = re.compile(r"Path\(__file__\)(?:\.resolve\(\))?((?:\.parent\b|\.parents\[\d+\])+)")


def project_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in relative.parts):
            continue
        if not path.is_file() or path.suffix in BINARY_SUFFIXES:
            continue
        if path.suffix and path.suffix not in TEXT_SUFFIXES:
            continue
        yield path


def parent_levels(chain: str) -> int:
    """How many folders up `.parent.parents[1]...` goes from the file itself."""
    levels = 0
    for step in re.findall(r"\.parent\b|\.parents\[(\d+)\]", chain):
        levels += int(step) + 1 if step else 1
    return levels


def escapes(relative: PurePosixPath, text: str) -> list[str]:
    """Each place in `text` (the file at `relative` under the root) that leaves the root."""
    found: list[str] = []
    depth = len(relative.parts) - 1  # folders between the root and the file
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{relative}:{number}"
        found += [f"{where}: absolute path {m.group(0)}" for m in ABSOLUTE.finditer(line)]
        found += [f"{where}: {m.group(0)} lies beside the clone" for m in SIBLINGS.finditer(line)]
        for match in CLIMB.finditer(line):
            ups = match.group(1).count("../")
            # A markdown link resolves from its own folder; a path in code or a script
            # resolves from wherever it runs, which is the root at best.
            allowed = depth if relative.suffix == ".md" else 0
            if ups > allowed:
                found.append(f"{where}: {match.group(0)}... climbs {ups} folders up")
        for match in FILE_PARENTS.finditer(line):
            levels = parent_levels(match.group(1))
            if levels > depth + 1:
                found.append(f"{where}: {match.group(0)} is {levels - depth - 1} above the root")
    return found


def test_no_project_file_names_a_path_above_the_repository_root() -> None:
    # This file's own examples of each way out are the only ones allowed.
    files = [f for f in project_files(ROOT) if f != Path(__file__).resolve()]
    scanned = {f.relative_to(ROOT).parts[0] for f in files}
    # The scan reaches the folders the rule is about.
    assert {"tests", "scripts", ".ci", "benchmarks", "docs", "rpp"} <= scanned
    found = [
        line
        for path in files
        for line in escapes(
            PurePosixPath(path.relative_to(ROOT).as_posix()),
            path.read_text(encoding="utf-8", errors="replace"),
        )
    ]
    assert found == []


@pytest.mark.parametrize(
    ("relative", "text"),
    [
        ("tests/test_x.py", 'SPEC = Path(__file__).parents[1].parent / "spec.json"'),
        ("tests/test_x.py", "SPEC = Path(__file__).resolve().parents[2]"),
        ("tests/stories/kit.py", "ROOT = Path(__file__).parent.parent.parent.parent"),
        ("tests/test_x.py", 'open("../' + 'shared/runpod/openapi-v2.json")'),
        ("scripts/test", "cat ../notes.txt"),
        ("docs/x.md", "see [the design](../../design.md)"),
        (".ci/run", "cp /" + "work/" + "shared/file ."),
        ("benchmarks/b.py", 'Path("/home/someone/data")'),
    ],
)
def test_the_scan_catches_each_way_out(relative: str, text: str) -> None:
    assert escapes(PurePosixPath(relative), text) != []


@pytest.mark.parametrize(
    ("relative", "text"),
    [
        ("tests/test_x.py", "ROOT = Path(__file__).parents[1]"),
        ("tests/decide/health/test_x.py", "ROOT = Path(__file__).parents[3]"),
        ("tests/stories/kit.py", "ROOT = Path(__file__).parents[2]"),
        ("docs/install.md", "[pool](../examples/pool.yaml)"),
        ("scripts/test", 'cd "$(dirname "$0")/.."'),
        ("tests/kmock_strict.py", "PUT and PATCH on `.../status`"),
    ],
)
def test_the_scan_lets_paths_inside_the_repository_pass(relative: str, text: str) -> None:
    assert escapes(PurePosixPath(relative), text) == []
