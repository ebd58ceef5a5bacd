"""`rpp diagrams [--check]`: the member machine's diagram and table, generated from its class.

The member lifecycle is documented in three places (docs/diagrams/member.dot and .svg,
docs/diagrams/member.md, and a block of README.md between the `member-machine`
markers), and all three are generated here from `MemberMachine`'s own definition:
its states, its transitions in the order they are tried, the guard names and their
docstrings, and the docstrings of the actions (which name the effects). So the docs
cannot drift from the code: `--check` regenerates in memory and exits 1 when a
committed copy differs, and a test runs it.

The DOT text is deterministic (states and edges in definition order, no object ids);
the SVG comes from Graphviz's `dot` and is not compared, since its bytes vary with
the Graphviz version. This is a developer tool, not part of the controller loop: pydot
comes with the `dev` extra, not with the package, so it is imported only when a diagram
is drawn and its absence is one line, not a traceback (the image has no use for it).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rpp.machines.member import MemberMachine

START_MARKER = "<!-- member-machine:start -->"
END_MARKER = "<!-- member-machine:end -->"
DOT_PATH = Path("docs/diagrams/member.dot")
SVG_PATH = Path("docs/diagrams/member.svg")
TABLE_PATH = Path("docs/diagrams/member.md")
README_PATH = Path("README.md")


class DiagramError(Exception):
    """A problem the user fixes (missing markers, missing Graphviz); exit code 2."""


@dataclass(frozen=True)
class Edge:
    """One declared transition, as the docs show it."""

    source: str
    target: str
    event: str
    guards: tuple[str, ...]  # guard method names; "not x" for `unless`
    actions: tuple[str, ...]  # action method names, in the order they run


def _first_line(obj: Any) -> str:
    doc = getattr(obj, "__doc__", None) or ""
    return doc.strip().splitlines()[0].strip() if doc.strip() else ""


def edges(machine: type[MemberMachine] = MemberMachine) -> list[Edge]:
    """Every transition, in definition order."""
    result = []
    for state in machine.states:
        for transition in state.transitions:
            actions = tuple(str(c.func) for c in transition.on if not c.is_convention)
            guards = tuple(
                str(c.func) if c.expected_value else f"not {c.func}" for c in transition.cond
            )
            result.append(
                Edge(
                    source=str(transition.source.name),
                    target=str(transition.target.name),
                    event=str(transition.event),
                    guards=guards,
                    actions=actions,
                )
            )
    return result


def effects_text(edge: Edge, machine: type[MemberMachine] = MemberMachine) -> str:
    return "; ".join(_first_line(getattr(machine, name)) for name in edge.actions)


def guard_text(edge: Edge, machine: type[MemberMachine] = MemberMachine) -> str:
    """The guards as a sentence from their docstrings: "a and b, unless c or d"."""
    wanted = [_first_line(getattr(machine, g)) for g in edge.guards if not g.startswith("not ")]
    unless = [
        _first_line(getattr(machine, g.removeprefix("not ")))
        for g in edge.guards
        if g.startswith("not ")
    ]
    text = " and ".join(wanted) or machine.ORDERS.get(edge.event, "always")
    return f"{text}, unless {' or '.join(unless)}" if unless else text


def render_dot(machine: type[MemberMachine] = MemberMachine) -> str:
    try:
        import pydot  # a development tool: see the module docstring
    except ImportError:
        raise DiagramError(
            "pydot is not installed; rpp diagrams is a development tool: "
            "pip install 'runpod-pool-controller[dev]' (or pip install pydot)"
        ) from None
    graph = pydot.Dot("MemberMachine", graph_type="digraph", rankdir="TB", nodesep="0.4")
    graph.set_node_defaults(shape="box", style="rounded", fontname="Helvetica", fontsize="11")
    graph.set_edge_defaults(fontname="Helvetica", fontsize="9")
    graph.add_node(pydot.Node("start", shape="point", width="0.15", label=""))
    for state in machine.states:
        peripheries = "2" if state.final else "1"
        graph.add_node(pydot.Node(state.id, label=str(state.name), peripheries=peripheries))
        if state.initial:
            graph.add_edge(pydot.Edge("start", state.id))
    ids = {str(state.name): state.id for state in machine.states}
    for edge in edges(machine):
        lines = [edge.event]
        if edge.guards:
            lines.append("[" + " and ".join(edge.guards) + "]")
        lines.extend(f"/ {_first_line(getattr(machine, a))}" for a in edge.actions)
        label = "\\n".join(line.replace('"', "'") for line in lines)
        graph.add_edge(pydot.Edge(ids[edge.source], ids[edge.target], label=f'"{label}"'))
    return str(graph.to_string())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_table(machine: type[MemberMachine] = MemberMachine) -> str:
    """The transition table (markdown), then the guards the diagram names."""
    rows = ["| From | Event | When | To | Effects |", "| --- | --- | --- | --- | --- |"]
    for edge in edges(machine):
        cells = (
            edge.source,
            f"`{edge.event}`",
            guard_text(edge, machine),
            edge.target,
            effects_text(edge, machine) or "-",
        )
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    names = sorted({g.removeprefix("not ") for edge in edges(machine) for g in edge.guards})
    rows += ["", "| Guard | Meaning |", "| --- | --- |"]
    rows += [f"| `{name}` | {_cell(_first_line(getattr(machine, name)))} |" for name in names]
    return "\n".join(rows) + "\n"


def render_readme_block() -> str:
    return f"![Member state machine]({SVG_PATH.as_posix()})\n\n{render_table()}"


def render_table_doc() -> str:
    return (
        "# Member state machine\n\n"
        "Generated by `rpp diagrams` from `rpp/machines/member.py`; do not edit.\n"
        "Transitions from one state are tried top to bottom; the first whose guards all\n"
        "hold is taken. When none applies, `observe` leaves the member as it is.\n\n"
        f"![Member state machine](member.svg)\n\n{render_table()}"
    )


def replace_block(readme: str, block: str) -> str:
    start, end = readme.find(START_MARKER), readme.find(END_MARKER)
    if start < 0 or end < start:
        raise DiagramError(
            f"README.md has no {START_MARKER} ... {END_MARKER} block; add the two markers "
            "where the member machine table belongs"
        )
    return readme[: start + len(START_MARKER)] + "\n" + block + readme[end:]


def render_svg(dot_text: str) -> bytes:
    dot = shutil.which("dot")
    if dot is None:
        raise DiagramError(
            "Graphviz `dot` is not on PATH; install graphviz (apt-get install graphviz)"
        )
    result = subprocess.run(
        [dot, "-Tsvg"], input=dot_text.encode(), capture_output=True, check=False, timeout=60
    )
    if result.returncode != 0:
        first = (result.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[0]
        raise DiagramError(f"Graphviz `dot` failed (exit {result.returncode}): {first}")
    return result.stdout


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None


def stale_files(root: Path) -> list[str]:
    """The generated files under `root` that differ from what the machine says now."""
    readme = _read(root / README_PATH)
    if readme is None:
        raise DiagramError(
            f"{root / README_PATH} not found; run from the repository root or use --root"
        )
    expected = {
        DOT_PATH: render_dot(),
        TABLE_PATH: render_table_doc(),
        README_PATH: replace_block(readme, render_readme_block()),
    }
    current = {DOT_PATH: _read(root / DOT_PATH), TABLE_PATH: _read(root / TABLE_PATH)}
    current[README_PATH] = readme
    return [path.as_posix() for path, text in expected.items() if current[path] != text]


def write_all(root: Path) -> list[str]:
    """Write DOT, SVG, the table and the README block under `root`; returns the paths."""
    readme_path = root / README_PATH
    readme = _read(readme_path)
    if readme is None:
        raise DiagramError(f"{readme_path} not found; run from the repository root or use --root")
    dot_text = render_dot()
    svg = render_svg(dot_text)  # before writing anything, so a missing `dot` changes nothing
    (root / DOT_PATH).parent.mkdir(parents=True, exist_ok=True)
    (root / DOT_PATH).write_text(dot_text, encoding="utf-8")
    (root / SVG_PATH).write_bytes(svg)
    (root / TABLE_PATH).write_text(render_table_doc(), encoding="utf-8")
    readme_path.write_text(replace_block(readme, render_readme_block()), encoding="utf-8")
    return [p.as_posix() for p in (DOT_PATH, SVG_PATH, TABLE_PATH, README_PATH)]


def run(args: argparse.Namespace) -> int:
    root = Path(args.root)
    try:
        if args.check:
            stale = stale_files(root)
            if stale:
                print(
                    f"rpp diagrams: stale: {', '.join(stale)}; run `rpp diagrams` and commit",
                    file=sys.stderr,
                )
                return 1
            print("rpp diagrams: member machine diagram and tables are up to date")
            return 0
        for path in write_all(root):
            print(f"wrote {path}")
        return 0
    except DiagramError as error:
        print(f"rpp diagrams: {error}", file=sys.stderr)
        return 2


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "diagrams",
        description="Generate docs/diagrams/member.{dot,svg,md} and the README table from "
        "the member state machine's definition.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when the committed DOT, table or README block is stale",
    )
    parser.add_argument("--root", default=".", help="repository root (default: current dir)")
    parser.set_defaults(func=run)
