"""`rpp diagrams`: generated from the machine, deterministic, and `--check` catches drift."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from rpp.cli import main
from rpp.commands import diagrams
from rpp.machines.member import MemberMachine
from rpp.machines.release import ReleaseMachine

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """The committed README and docs/diagrams, copied so a test may damage them."""
    shutil.copy(REPO / "README.md", tmp_path / "README.md")
    shutil.copytree(REPO / "docs" / "diagrams", tmp_path / "docs" / "diagrams")
    return tmp_path


def test_committed_diagrams_and_readme_block_are_up_to_date(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["diagrams", "--check", "--root", str(REPO)]) == 0
    assert "up to date" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("path", "damage"),
    [
        pytest.param("docs/diagrams/member.dot", lambda t: t.replace("Warming", "Warm"), id="dot"),
        pytest.param("README.md", lambda t: t.replace("| Warming |", "| Cold |", 1), id="readme"),
        pytest.param("docs/diagrams/member.md", lambda t: t + "hand edit\n", id="table"),
        pytest.param(
            "docs/diagrams/release.dot", lambda t: t.replace("Baking", "Bake"), id="release-dot"
        ),
        pytest.param(
            "README.md",
            lambda t: t.replace("| any phase | `roll` |", "| Rolling | `roll` |", 1),
            id="release-readme",
        ),
        pytest.param(
            "docs/diagrams/release.md",
            lambda t: t.replace("otherwise", "always"),
            id="release-table",
        ),
    ],
)
def test_check_fails_on_a_stale_copy_and_says_to_run_rpp_diagrams(
    repo_copy: Path, path: str, damage: Callable[[str], str], capsys: pytest.CaptureFixture[str]
) -> None:
    target = repo_copy / path
    target.write_text(damage(target.read_text()))
    assert main(["diagrams", "--check", "--root", str(repo_copy)]) == 1
    err = capsys.readouterr().err
    assert path in err
    assert "run `rpp diagrams`" in err


def test_check_fails_when_the_dot_file_is_missing(repo_copy: Path) -> None:
    (repo_copy / "docs/diagrams/member.dot").unlink()
    assert main(["diagrams", "--check", "--root", str(repo_copy)]) == 1


@pytest.mark.parametrize(
    ("doc", "drawn"),
    [(diagrams.MEMBER, "Terminating"), (diagrams.RELEASE, "RolledBack")],
    ids=["member", "release"],
)
def test_writing_regenerates_everything_and_then_check_passes(
    repo_copy: Path, doc: diagrams.MachineDoc, drawn: str
) -> None:
    (repo_copy / doc.dot_path).write_text("stale")
    (repo_copy / doc.svg_path).unlink()
    readme = (repo_copy / "README.md").read_text()
    start = readme.index(doc.start_marker) + len(doc.start_marker)
    end = readme.index(doc.end_marker)
    (repo_copy / "README.md").write_text(readme[:start] + "\nold\n" + readme[end:])
    assert main(["diagrams", "--root", str(repo_copy)]) == 0
    svg = (repo_copy / doc.svg_path).read_text()
    assert "<svg" in svg
    assert drawn in svg
    assert main(["diagrams", "--check", "--root", str(repo_copy)]) == 0
    # Text outside the markers is the lead's and stays as it was.
    assert (repo_copy / "README.md").read_text().replace(readme[start:end], "") == readme.replace(
        readme[start:end], ""
    )


def test_missing_graphviz_is_a_one_line_error_and_writes_nothing(
    repo_copy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo_copy / "docs/diagrams/member.dot").write_text("stale")
    monkeypatch.setenv("PATH", str(repo_copy))  # no `dot` there
    assert main(["diagrams", "--root", str(repo_copy)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "rpp diagrams: Graphviz `dot` is not on PATH; install graphviz (apt-get install graphviz)"
    )
    assert (repo_copy / "docs/diagrams/member.dot").read_text() == "stale"


def test_readme_without_markers_is_a_clear_error(
    repo_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo_copy / "README.md").write_text("# readme without the block\n")
    assert main(["diagrams", "--check", "--root", str(repo_copy)]) == 2
    assert "add the two markers" in capsys.readouterr().err


def test_readme_without_the_release_block_names_its_markers(
    repo_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = (repo_copy / "README.md").read_text()
    (repo_copy / "README.md").write_text(readme.replace(diagrams.RELEASE.start_marker, ""))
    assert main(["diagrams", "--check", "--root", str(repo_copy)]) == 2
    assert "<!-- release-machine:start -->" in capsys.readouterr().err


def test_dot_is_deterministic_and_draws_every_declared_transition() -> None:
    first, second = diagrams.render_dot(), diagrams.render_dot()
    assert first == second
    assert "__initial" not in first  # no object ids, unlike the library's renderer
    drawn = [line for line in first.splitlines() if " -> " in line and "start" not in line]
    declared = [t for state in MemberMachine.states for t in state.transitions]
    assert len(drawn) == len(declared) == len(diagrams.edges())


def test_table_names_every_guard_with_its_docstring() -> None:
    table = diagrams.render_table()
    guards = {g.removeprefix("not ") for edge in diagrams.edges() for g in edge.guards}
    assert "warmup_timed_out" in guards
    for guard in guards:
        doc = (getattr(MemberMachine, guard).__doc__ or "").strip()
        assert doc
        assert f"| `{guard}` | {doc} |" in table


def test_release_transitions_from_every_phase_are_drawn_once_from_any_phase() -> None:
    edges = diagrams.edges(diagrams.RELEASE)
    roll = [edge for edge in edges if edge.event == "roll"]
    assert {edge.source for edge in roll} == {diagrams.ANY_PHASE}
    # One row per declared transition, in the order the machine tries them.
    declared = [t for t in ReleaseMachine.canary.transitions if t.event == "roll"]
    assert [(e.target, e.guards) for e in roll] == [
        (
            str(t.target.name),
            tuple(str(c.func) if c.expected_value else f"not {c.func}" for c in t.cond),
        )
        for t in declared
    ]
    assert roll[-1].guards == ()
    # The bake's transitions leave only Canary and Baking, so they keep their sources.
    bake = [(edge.source, edge.target) for edge in edges if edge.event == "judge_bake"]
    assert bake == [
        ("Canary", "Rolling"),
        ("Canary", "Baking"),
        ("Baking", "Rolling"),
        ("Baking", "Baking"),
    ]
    dot = diagrams.render_dot(diagrams.RELEASE)
    assert dot.count("any_phase -> ") == len(roll)
    assert 'any_phase [label="any phase"' in dot


def test_release_table_reads_the_fallback_as_otherwise_and_names_every_guard() -> None:
    table = diagrams.render_table(diagrams.RELEASE)
    assert "| any phase | `roll` | otherwise | Canary | asks for a canary" in table
    guards = {g.removeprefix("not ") for e in diagrams.edges(diagrams.RELEASE) for g in e.guards}
    assert {"canary_passed", "every_pod_on_image", "updates_paused"} <= guards
    for guard in guards:
        doc = (getattr(ReleaseMachine, guard).__doc__ or "").strip()
        assert doc
        assert f"| `{guard}` | {doc} |" in table
