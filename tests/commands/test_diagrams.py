"""`rpp diagrams`: generated from the machine, deterministic, and `--check` catches drift."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from rpp.cli import main
from rpp.commands import diagrams
from rpp.machines.member import MemberMachine

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


def test_writing_regenerates_everything_and_then_check_passes(repo_copy: Path) -> None:
    (repo_copy / "docs/diagrams/member.dot").write_text("stale")
    (repo_copy / "docs/diagrams/member.svg").unlink()
    readme = (repo_copy / "README.md").read_text()
    start = readme.index(diagrams.START_MARKER) + len(diagrams.START_MARKER)
    end = readme.index(diagrams.END_MARKER)
    (repo_copy / "README.md").write_text(readme[:start] + "\nold\n" + readme[end:])
    assert main(["diagrams", "--root", str(repo_copy)]) == 0
    svg = (repo_copy / "docs/diagrams/member.svg").read_text()
    assert "<svg" in svg
    assert "Terminating" in svg
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
