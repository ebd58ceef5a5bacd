"""`rpp` itself: --version, --help, no command and an unknown one, run as a user runs them."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

from rpp import __version__
from rpp.cli import COMMANDS

ROOT = Path(__file__).parents[2]


def rpp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rpp", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_version_prints_the_version_and_exits_0() -> None:
    result = rpp("--version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"rpp {__version__}\n", "")


def test_help_lists_every_command_without_importing_any() -> None:
    result = rpp("--help")
    assert result.returncode == 0
    for name in COMMANDS:
        assert name in result.stdout
    # The listing comes from the table: no command module (so no development tool and no
    # Kubernetes client) is imported to print it.
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, contextlib, io\n"
            "from rpp.cli import main\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['--help'])\n"
            "print(sorted(m for m in sys.modules if m.startswith(('rpp.commands.', 'pydot'))))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert probe.stdout.strip() == "[]"


def test_no_command_prints_help_and_exits_2() -> None:
    result = rpp()
    assert result.returncode == 2
    assert "COMMAND" in result.stdout


def test_an_unknown_command_is_one_line_naming_the_choices() -> None:
    result = rpp("valdiate")
    assert result.returncode == 2
    assert "unknown command 'valdiate'; choose one of validate," in result.stderr
    assert "Traceback" not in result.stderr


def test_the_readme_table_lists_every_command() -> None:
    table = (ROOT / "README.md").read_text().split("| command | what it does |", 1)[1]
    table = table.split("\n\n", 1)[0]
    for name in COMMANDS:
        assert f"| `rpp {name}" in table, f"README's command table lacks rpp {name}"


def test_the_speed_claim_is_one_figure_from_the_simulate_benchmark() -> None:
    """README, `rpp --help` and the simulate command say the same, measured, number."""
    measured = json.loads((ROOT / "benchmarks/results/simulate.json").read_text())
    runs = measured["measured"]["day_of_10_pods"]["runs"]
    seconds = round(statistics.median(run["process_cpu_s"] for run in runs))
    claim = f"a day of a 10-pod pool in about {seconds} s of CPU"
    assert claim in (ROOT / "README.md").read_text()
    assert claim in " ".join(COMMANDS["simulate"][1].split())
    doc = " ".join((ROOT / "rpp/commands/simulate.py").read_text().split())
    assert f"A day of a 10-pod pool takes about {seconds} s of CPU" in doc
