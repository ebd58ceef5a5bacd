"""`rpp` itself: --version, --help, no command and an unknown one, run as a user runs them."""

from __future__ import annotations

import subprocess
import sys

from rpp import __version__
from rpp.cli import COMMANDS


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
