"""docs/ARCHITECTURE.md tells the truth about the layout.

The layers diagram must list exactly the layers of the import-linter contract in
pyproject.toml, in the same order, so the picture a newcomer reads is the rule the tests
enforce; and every row of the "where does X live" table must name one file that exists.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text()


def between(start: str, end: str) -> str:
    match = re.search(rf"<!-- {start} -->(.*?)<!-- {end} -->", DOC, re.S)
    assert match, f"docs/ARCHITECTURE.md lost its <!-- {start} --> block"
    return match.group(1)


def contract_layers(container: str | None) -> list[str]:
    """The layers of the one layers contract over `container` (None: the whole package)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [
        c["layers"]
        for c in config["contracts"]
        if c["type"] == "layers" and c.get("containers", [None]) == [container]
    ]
    return [str(layer) for layer in layers]


def diagram_order(block: str, prefix: str) -> list[str]:
    """The nodes of a mermaid block's one chain of arrows, top layer first."""
    text = between(f"{block}:start", f"{block}:end")
    nodes = dict(re.findall(rf'^\s*({prefix}\d+)\["([^"]+)"\]', text, re.M))
    chain = re.search(rf"^\s*({prefix}\d+(?:\s*-->\s*{prefix}\d+)+)\s*$", text, re.M)
    assert chain, f"the {block} diagram needs one chain of arrows from the top layer down"
    return [nodes[name] for name in re.split(r"\s*-->\s*", chain.group(1).strip())]


def test_layers_diagram_lists_the_contract_layers_in_order() -> None:
    assert diagram_order("layers", "L") == contract_layers(None)


def test_decide_diagram_lists_decides_own_layers_in_order() -> None:
    assert diagram_order("decide-layers", "D") == contract_layers("rpp.decide")


def test_every_decide_module_has_a_row_in_the_decide_table() -> None:
    """A module added to decide is described where a newcomer looks for it."""
    table = DOC.split("## Decide, one level down", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`decide/([a-z_/]+\.py)`", table))
    for pkg in re.findall(r"`decide/([a-z_]+)/[a-z_]+\.py`, `([a-z_]+\.py)`", table):
        named.add(f"{pkg[0]}/{pkg[1]}")
    modules = {
        str(p.relative_to(ROOT / "rpp" / "decide"))
        for p in (ROOT / "rpp" / "decide").rglob("*.py")
        if p.name != "__init__.py"
    }
    assert modules - named == set(), "decide modules missing from the table"
    assert named - modules == set(), "the table names decide modules that do not exist"


def test_every_place_in_the_where_table_is_one_existing_file() -> None:
    rows = re.findall(r"^\| (.+?) \| (.+?) \|$", between("where:start", "where:end"), re.M)
    places = {what: where for what, where in rows if what not in ("what", "---")}
    for what, where in places.items():
        files = re.findall(r"`([^`]+)`", where)
        assert len(files) == 1, f"{what!r} should name one file, names {files}"
        assert (ROOT / files[0]).is_file(), f"{what!r} names {files[0]}, which does not exist"


def test_the_where_table_covers_every_rule_a_newcomer_asks_about() -> None:
    table = between("where:start", "where:end").lower()
    for topic in (
        "unreachable",
        "slowscrape",
        "relativelatency",
        "errorrate",
        "hostnotice",
        "surge-first",
        "quarantine",
        "placement",
        "caps",
        "rolling update",
        "autoscale",
        "nginx slots",
        "status writes",
    ):
        assert topic in table, f"docs/ARCHITECTURE.md's where-table lacks {topic!r}"
