"""The commands on bad input a newcomer meets in the first minutes: one clear line, the
right exit code, never a traceback. Each runs as a user runs it, in a subprocess.

(Hostile files are in test_hostile_files.py, clashing pools in test_pool_clashes.py.)
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def rpp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rpp", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_validate_names_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("metadata: {name: caf\u00e9}\n".encode("latin-1"))
    result = rpp("validate", str(path))
    assert result.returncode == 2
    assert result.stderr == (
        f"{path}: is not UTF-8 text (byte 0xe9 at offset 20); is it a binary file? "
        "rpp reads YAML saved as UTF-8\n"
    )


def test_simulate_until_0s_is_refused_in_one_line() -> None:
    result = rpp("simulate", "--until", "0s")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        "rpp simulate: --until: '0s' simulates nothing; give at least 1s, or leave --until "
        "out to run the scenario's 4h\n"
    )


def test_simulate_until_says_in_the_header_how_long_it_runs() -> None:
    result = rpp("simulate", "--until", "1s")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        "Scenario (embedded default_scenario.yaml): pool inference, 1s "
        "(--until; the scenario runs 4h)"
    )


def test_simulate_until_past_30_days_is_refused() -> None:
    result = rpp("simulate", "--until", "721h")
    assert result.returncode == 2
    assert result.stderr == (
        "rpp simulate: --until: '721h' is past the limit of 720h of simulated time\n"
    )


def test_fake_runpod_on_a_port_in_use_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = rpp("fake-runpod", "--port", str(port))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"rpp fake-runpod: cannot listen on 127.0.0.1:{port}: address already in use; "
        "pick another --port (0: any free port)\n"
    )


def fake_apt_get(directory: Path, *, lock_held_for: int, other_error: bool = False) -> Path:
    """An `apt-get` that records its arguments and fails on a held lock the first
    `lock_held_for` times, as apt does while unattended-upgrades runs."""
    log = directory / "calls"
    script = directory / "apt-get"
    failure = (
        'echo "E: Unable to locate package nope" >&2; exit 100'
        if other_error
        else 'echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 7 '
        '(unattended-upgr)" >&2; exit 100'
    )
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> "{log}"\n'
        f'n=$(wc -l < "{log}")\n'
        f'if [ "$n" -le {lock_held_for} ]; then {failure}; fi\n'
        "echo done\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return log


def apt_get_wait(
    directory: Path, *args: str, wait: str = "600"
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{directory}{os.pathsep}{os.environ['PATH']}",
        "APT_LOCK_WAIT": wait,
        "APT_LOCK_POLL": "0",
    }
    return subprocess.run(
        [str(ROOT / "scripts" / "apt-get-wait"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_apt_waits_for_the_lists_lock_another_apt_holds(tmp_path: Path) -> None:
    log = fake_apt_get(tmp_path, lock_held_for=3)
    result = apt_get_wait(tmp_path, "update", "-qq")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "done\n"
    assert result.stderr == "apt-get-wait: another apt holds a lock; waiting up to 600s\n"
    # Every call also lets apt itself wait for the dpkg lock.
    assert log.read_text().splitlines() == ["-o DPkg::Lock::Timeout=600 update -qq"] * 4


def test_apt_gives_up_on_the_lock_at_the_deadline(tmp_path: Path) -> None:
    fake_apt_get(tmp_path, lock_held_for=1000)
    result = apt_get_wait(tmp_path, "update", wait="0")
    assert result.returncode == 100
    assert "Could not get lock /var/lib/apt/lists/lock" in result.stderr


def test_apt_returns_any_other_failure_at_once(tmp_path: Path) -> None:
    log = fake_apt_get(tmp_path, lock_held_for=1, other_error=True)
    result = apt_get_wait(tmp_path, "install", "nope")
    assert result.returncode == 100
    assert result.stderr == "E: Unable to locate package nope\n"
    assert len(log.read_text().splitlines()) == 1


def test_bootstrap_installs_debian_packages_through_the_waiting_apt() -> None:
    script = (ROOT / "scripts" / "bootstrap.sh").read_text()
    apt_lines = [line for line in script.splitlines() if "apt-get" in line and "#" not in line]
    assert apt_lines
    assert all("scripts/apt-get-wait" in line for line in apt_lines), apt_lines


def test_a_value_that_starts_with_a_dash_gets_the_same_message_spaced_or_joined() -> None:
    """argparse alone reads `--until -5m` as a missing value ("expected one argument"),
    so the user never learns that a negative duration is the problem."""
    spaced, joined = rpp("simulate", "--until", "-5m"), rpp("simulate", "--until=-5m")
    assert spaced.returncode == joined.returncode == 2
    assert spaced.stderr == joined.stderr
    assert "--until" in spaced.stderr
    assert "is not a duration" in spaced.stderr
    assert "expected one argument" not in spaced.stderr


def test_an_option_after_a_value_option_is_still_an_option() -> None:
    """Only a value is joined: `--until --json` still says --until lacks its value."""
    result = rpp("simulate", "--until", "--json")
    assert result.returncode == 2
    assert "--until: expected one argument" in result.stderr


def test_a_missing_apiversion_is_said_in_words_not_as_python_none(tmp_path: Path) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text(
        "kind: RunPodPool\nmetadata: {name: web}\nspec: {image: ghcr.io/example/inference:1}\n"
    )
    result = rpp("validate", str(path))
    assert result.returncode == 1  # an invalid pool, as any other
    assert result.stderr == (
        f"{path}: apiVersion: expected runpodpool.ownego.com/v1alpha1, got nothing\n"
    )
