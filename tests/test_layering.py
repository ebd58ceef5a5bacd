"""Decide stays pure: its modules import no adapter, no HTTP, no clock.

The architecture's one rule (observe -> decide -> act) checked mechanically, like kopf's
import-linter contracts: a decision module that imported the Kubernetes client or the
RunPod client could do I/O, and one that imported the executor could act.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PURE = sorted(
    [
        *(ROOT / "rpp" / "decide").glob("*.py"),
        *(ROOT / "rpp" / "machines").glob("*.py"),
        *(ROOT / "rpp").glob("status*.py"),
        ROOT / "rpp" / "spec.py",
        ROOT / "rpp" / "spec_load.py",
        ROOT / "rpp" / "effects.py",
        ROOT / "rpp" / "outcome.py",
        ROOT / "rpp" / "observations.py",
        ROOT / "rpp" / "nginx_slots.py",
    ]
)
FORBIDDEN = (
    "httpx",
    "kubernetes",
    "uvicorn",
    "asyncio",
    "socket",
    "time",
    "os",
    "random",
    "rpp.act",
    "rpp.kube",
    "rpp.observe",
    "rpp.reconcile",
    "rpp.controller",
    "rpp.runpod.client",
    "rpp.runpod.placement",
    "rpp.sim",
    "rpp.clock",
)


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("path", PURE, ids=[str(p.relative_to(ROOT)) for p in PURE])
def test_decision_modules_import_no_adapter_and_no_clock(path: Path) -> None:
    bad = sorted(
        name
        for name in imports(path)
        if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)
    )
    assert bad == [], f"{path.relative_to(ROOT)} imports {bad}: decide must stay pure"


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import httpx\nfrom rpp.kube.real import RealKubeApi\n")
    assert {"httpx", "rpp.kube.real"} <= imports(sample)
