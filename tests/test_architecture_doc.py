"""docs/ARCHITECTURE.md tells the truth about the layout.

The layers diagram must list exactly the layers of the import-linter contract in
pyproject.toml, in the same order, so the picture a newcomer reads is the rule the tests
enforce; and every row of the "where does X live" table must name one file that exists.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[1]
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text()


def between(start: str, end: str) -> str:
    match = re.search(rf"<!-- {start} -->(.*?)<!-- {end} -->", DOC, re.S)
    assert match, f"docs/ARCHITECTURE.md lost its <!-- {start} --> block"
    return match.group(1)


def contract_layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
    return [str(layer) for layer in layers]


def test_layers_diagram_lists_the_contract_layers_in_order() -> None:
    nodes = dict(
        re.findall(r'^\s*(L\d+)\["([^"]+)"\]', between("layers:start", "layers:end"), re.M)
    )
    chain = re.search(
        r"^\s*(L\d+(?:\s*-->\s*L\d+)+)\s*$", between("layers:start", "layers:end"), re.M
    )
    assert chain, "the diagram needs one chain of arrows from the top layer down"
    order = [nodes[name] for name in re.split(r"\s*-->\s*", chain.group(1).strip())]
    assert order == contract_layers()


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
