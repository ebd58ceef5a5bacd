"""`rpp diagrams [--check]`: the state machines' diagrams and tables, generated from their classes.

Two machines are documented: the member lifecycle (`MemberMachine`) and the release
phases (`ReleaseMachine`). Each in three places (docs/diagrams/NAME.dot and .svg,
docs/diagrams/NAME.md, and a block of README.md between the `NAME-machine` markers),
and all three are generated here from the machine's own definition: its states, its
transitions in the order they are tried, the guard names and their docstrings, and
the docstrings of the actions (which name the effects). So the docs cannot drift from
the code: `--check` regenerates in memory and exits 1 when a committed copy differs,
and a test runs it.

The DOT text is deterministic (states and edges in definition order, no object ids);
the SVG comes from Graphviz's `dot` and is not compared, since its bytes vary with
the Graphviz version. This is a developer tool, not part of the controller loop: pydot
comes with the `dev` extra, not with the package, so it is imported only when a diagram
is drawn and its absence is one line, not a traceback (the image has no use for it).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statemachine import StateMachine
from statemachine.event import Event

from rpp.machines.member import MemberMachine
from rpp.machines.release import ReleaseMachine

README_PATH = Path("README.md")
ANY_PHASE = "any phase"
"""The source the docs give a transition declared from every state (`from_.any()`)."""


class DiagramError(Exception):
    """A problem the user fixes (missing markers, missing Graphviz); exit code 2."""


@dataclass(frozen=True)
class MachineDoc:
    """One machine's generated docs: where they go and the words around the table."""

    name: str  # the files' stem and the README markers' prefix
    machine: type[StateMachine]
    title: str
    reading: str  # how to read the table, under the title
    unguarded: str = "always"  # "When" of a transition without guards, not an order
    any_phase: bool = False  # one row for a transition declared from every state

    @property
    def dot_path(self) -> Path:
        return Path(f"docs/diagrams/{self.name}.dot")

    @property
    def svg_path(self) -> Path:
        return Path(f"docs/diagrams/{self.name}.svg")

    @property
    def table_path(self) -> Path:
        return Path(f"docs/diagrams/{self.name}.md")

    @property
    def start_marker(self) -> str:
        return f"<!-- {self.name}-machine:start -->"

    @property
    def end_marker(self) -> str:
        return f"<!-- {self.name}-machine:end -->"

    @property
    def source(self) -> str:
        return self.machine.__module__.replace(".", "/") + ".py"


MEMBER = MachineDoc(
    name="member",
    machine=MemberMachine,
    title="Member state machine",
    reading="Transitions from one state are tried top to bottom; the first whose guards all\n"
    "hold is taken. When none applies, `observe` leaves the member as it is.",
)
RELEASE = MachineDoc(
    name="release",
    machine=ReleaseMachine,
    title="Release state machine",
    reading="Transitions are tried top to bottom; the first whose guards all hold is taken.\n"
    "The phase follows from the pods and the canary's verdict, not from the phase\n"
    "before, so `roll` goes from any phase, and its last transition always applies.",
    unguarded="otherwise",
    any_phase=True,
)
MACHINES = (MEMBER, RELEASE)


@dataclass(frozen=True)
class Edge:
    """One declared transition, as the docs show it."""

    source: str  # a state's name, or ANY_PHASE
    target: str
    event: str
    guards: tuple[str, ...]  # guard method names; "not x" for `unless`
    actions: tuple[str, ...]  # action method names, in the order they run


def _first_line(obj: Any) -> str:
    doc = getattr(obj, "__doc__", None) or ""
    return doc.strip().splitlines()[0].strip() if doc.strip() else ""


def edges(doc: MachineDoc = MEMBER) -> list[Edge]:
    """Every transition, in definition order; with `any_phase`, event by event, and a
    transition declared from every state once, from ANY_PHASE."""
    machine = doc.machine
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
    return _from_any_phase(machine, result) if doc.any_phase else result


def _from_any_phase(machine: type[StateMachine], every: list[Edge]) -> list[Edge]:
    # The class body's order, the one the machine was written in.
    order = [name for name, value in vars(machine).items() if isinstance(value, Event)]
    every = sorted(every, key=lambda e: order.index(e.event))
    states = {str(s.name) for s in machine.states if not s.final}
    sources: dict[Edge, set[str]] = {}
    for edge in every:
        sources.setdefault(dataclasses.replace(edge, source=ANY_PHASE), set()).add(edge.source)
    result: list[Edge] = []
    for edge in every:
        shared = dataclasses.replace(edge, source=ANY_PHASE)
        if sources[shared] != states:
            result.append(edge)
        elif shared not in result:
            result.append(shared)
    return result


def effects_text(edge: Edge, doc: MachineDoc = MEMBER) -> str:
    return "; ".join(_first_line(getattr(doc.machine, name)) for name in edge.actions)


def guard_text(edge: Edge, doc: MachineDoc = MEMBER) -> str:
    """The guards as a sentence from their docstrings: "a and b, unless c or d"."""
    machine = doc.machine
    wanted = [_first_line(getattr(machine, g)) for g in edge.guards if not g.startswith("not ")]
    unless = [
        _first_line(getattr(machine, g.removeprefix("not ")))
        for g in edge.guards
        if g.startswith("not ")
    ]
    orders: dict[str, str] = getattr(machine, "ORDERS", {})
    text = " and ".join(wanted) or orders.get(edge.event, doc.unguarded)
    return f"{text}, unless {' or '.join(unless)}" if unless else text


def render_dot(doc: MachineDoc = MEMBER) -> str:
    try:
        import pydot  # a development tool: see the module docstring
    except ImportError:
        raise DiagramError(
            "pydot is not installed; rpp diagrams is a development tool: "
            "pip install 'runpod-pool-controller[dev]' (or pip install pydot)"
        ) from None
    machine = doc.machine
    graph = pydot.Dot(machine.__name__, graph_type="digraph", rankdir="TB", nodesep="0.4")
    graph.set_node_defaults(shape="box", style="rounded", fontname="Helvetica", fontsize="11")
    graph.set_edge_defaults(fontname="Helvetica", fontsize="9")
    graph.add_node(pydot.Node("start", shape="point", width="0.15", label=""))
    ids = {str(state.name): state.id for state in machine.states}
    drawn = edges(doc)
    if any(edge.source == ANY_PHASE for edge in drawn):
        ids[ANY_PHASE] = "any_phase"
        graph.add_node(pydot.Node("any_phase", label=ANY_PHASE, style='"rounded,dashed"'))
    for state in machine.states:
        peripheries = "2" if state.final else "1"
        graph.add_node(pydot.Node(state.id, label=str(state.name), peripheries=peripheries))
        if state.initial:
            graph.add_edge(pydot.Edge("start", state.id))
    for edge in drawn:
        lines = [edge.event]
        if edge.guards:
            lines.append("[" + " and ".join(edge.guards) + "]")
        lines.extend(f"/ {_first_line(getattr(machine, a))}" for a in edge.actions)
        label = "\\n".join(line.replace('"', "'") for line in lines)
        graph.add_edge(pydot.Edge(ids[edge.source], ids[edge.target], label=f'"{label}"'))
    return str(graph.to_string())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_table(doc: MachineDoc = MEMBER) -> str:
    """The transition table (markdown), then the guards the diagram names."""
    rows = ["| From | Event | When | To | Effects |", "| --- | --- | --- | --- | --- |"]
    for edge in edges(doc):
        cells = (
            edge.source,
            f"`{edge.event}`",
            guard_text(edge, doc),
            edge.target,
            effects_text(edge, doc) or "-",
        )
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    names = sorted({g.removeprefix("not ") for edge in edges(doc) for g in edge.guards})
    rows += ["", "| Guard | Meaning |", "| --- | --- |"]
    rows += [f"| `{name}` | {_cell(_first_line(getattr(doc.machine, name)))} |" for name in names]
    return "\n".join(rows) + "\n"


def render_readme_block(doc: MachineDoc = MEMBER) -> str:
    return f"![{doc.title}]({doc.svg_path.as_posix()})\n\n{render_table(doc)}"


def render_table_doc(doc: MachineDoc = MEMBER) -> str:
    return (
        f"# {doc.title}\n\n"
        f"Generated by `rpp diagrams` from `{doc.source}`; do not edit.\n"
        f"{doc.reading}\n\n"
        f"![{doc.title}]({doc.svg_path.name})\n\n{render_table(doc)}"
    )


def replace_block(readme: str, block: str, doc: MachineDoc = MEMBER) -> str:
    start, end = readme.find(doc.start_marker), readme.find(doc.end_marker)
    if start < 0 or end < start:
        raise DiagramError(
            f"README.md has no {doc.start_marker} ... {doc.end_marker} block; add the two "
            f"markers where the {doc.name} machine table belongs"
        )
    return readme[: start + len(doc.start_marker)] + "\n" + block + readme[end:]


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


def _readme(root: Path) -> str:
    readme = _read(root / README_PATH)
    if readme is None:
        raise DiagramError(
            f"{root / README_PATH} not found; run from the repository root or use --root"
        )
    return readme


def _with_blocks(readme: str) -> str:
    """README.md with every machine's block as the machines say now."""
    for doc in MACHINES:
        readme = replace_block(readme, render_readme_block(doc), doc)
    return readme


def stale_files(root: Path) -> list[str]:
    """The generated files under `root` that differ from what the machines say now."""
    readme = _readme(root)
    stale = []
    for doc in MACHINES:
        for path, text in (
            (doc.dot_path, render_dot(doc)),
            (doc.table_path, render_table_doc(doc)),
        ):
            if _read(root / path) != text:
                stale.append(path.as_posix())
    if _with_blocks(readme) != readme:
        stale.append(README_PATH.as_posix())
    return stale


def write_all(root: Path) -> list[str]:
    """Write each machine's DOT, SVG and table, and the README blocks; returns the paths."""
    readme = _with_blocks(_readme(root))
    # Every SVG before writing anything, so a missing `dot` changes nothing.
    drawn = [(doc, render_dot(doc)) for doc in MACHINES]
    svgs = [render_svg(dot_text) for _, dot_text in drawn]
    written = []
    for (doc, dot_text), svg in zip(drawn, svgs, strict=True):
        (root / doc.dot_path).parent.mkdir(parents=True, exist_ok=True)
        (root / doc.dot_path).write_text(dot_text, encoding="utf-8")
        (root / doc.svg_path).write_bytes(svg)
        (root / doc.table_path).write_text(render_table_doc(doc), encoding="utf-8")
        written += [doc.dot_path, doc.svg_path, doc.table_path]
    (root / README_PATH).write_text(readme, encoding="utf-8")
    return [p.as_posix() for p in (*written, README_PATH)]


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
            print("rpp diagrams: the machines' diagrams and tables are up to date")
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
        description="Generate docs/diagrams/{member,release}.{dot,svg,md} and the README "
        "tables from the member and release state machines' definitions.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when a committed DOT, table or README block is stale",
    )
    parser.add_argument("--root", default=".", help="repository root (default: current dir)")
    parser.set_defaults(func=run)
