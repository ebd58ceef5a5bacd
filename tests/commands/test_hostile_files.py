"""Hostile files through the commands that read them, run as a user runs them.

`rpp validate`, `rpp simulate --scenario` and `rpp fake-runpod --scenario` share one reader
(rpp/adapters/files.py, rpp/model/documents.py). Each file here once cost a traceback,
minutes of CPU or gigabytes; each must now cost one line naming the file, exit 2, and
bounded time and memory. Memory is bounded by an address-space cap on the child (a
blow-up dies at once instead of swapping the machine, and then fails the test by its
traceback); CPU time is read back from the kernel. The bounds are wide (a run takes about
half a second of CPU and 35 MiB): they catch a blow-up, not a slow machine.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "pool.yaml"

ADDRESS_SPACE = 512 * 1024 * 1024  # `rpp validate` runs in 256 MiB; the alias bomb took 4 GB
CPU_SECONDS = 20.0  # the bomb once took 55 s before it ran out of memory


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str
    cpu_s: float


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def rpp(*args: str) -> Run:
    """`rpp ARGS` with its memory capped: exit code, output and the CPU time it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(
        [sys.executable, "-m", "rpp", *args],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_cap_memory,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return Run(code=result.returncode, out=result.stdout, err=result.stderr, cpu_s=cpu)


def alias_bomb() -> bytes:
    """The classic "billion laughs": 2.2 KB that expands to 387 million strings."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for previous, letter in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{letter}: &{letter} [" + ",".join([f"*{previous}"] * 9) + "]")
    text = "\n".join(lines) + "\n"
    return (text + "# " + "x" * (2200 - len(text)) + "\n").encode()


def pool_with(**spec: object) -> dict[str, object]:
    pool: dict[str, object] = yaml.safe_load(EXAMPLE.read_text())
    pool["spec"] = {**pool["spec"], **spec}  # type: ignore[dict-item]
    return pool


HOSTILE: dict[str, tuple[Callable[[], bytes], str]] = {
    "utf16": (lambda: EXAMPLE.read_text().encode("utf-16"), "is UTF-16 text; rpp reads UTF-8"),
    "binary": (lambda: bytes(range(256)) * 64, "is not UTF-8 text (byte 0x80 at offset 128)"),
    "deep-block": (lambda: ("- " * 20_000 + "x\n").encode(), "nests deeper than 64 levels"),
    "deep-flow": (lambda: ("[" * 20_000 + "]" * 20_000).encode(), "nests deeper than 64 levels"),
    "alias-bomb": (alias_bomb, "holds more than 100,000 values once its YAML aliases"),
    "10mb-value": (
        lambda: yaml.safe_dump(pool_with(image="x" * 10_000_000)).encode(),
        "is 9.5 MiB; rpp reads YAML files up to 1.0 MiB",
    ),
    "null-key": (
        lambda: yaml.safe_dump(pool_with()).encode() + b"~: 1\n",
        "a mapping key is null (~ or nothing); kubectl cannot turn it into JSON",
    ),
}


# The scenario readers share the reader; a few files show it without repeating them all.
SHARED = ["utf16", "deep-flow", "alias-bomb", "10mb-value"]


def write(name: str, directory: Path) -> tuple[Path, str]:
    make, message = HOSTILE[name]
    path = directory / f"{name}.yaml"
    path.write_bytes(make())
    return path, message


@pytest.fixture(params=sorted(HOSTILE))
def hostile(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str]:
    return write(request.param, tmp_path)


@pytest.fixture(params=SHARED)
def hostile_scenario(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str]:
    return write(request.param, tmp_path)


def assert_one_line_naming(run: Run, path: Path, message: str) -> None:
    assert run.code == 2, run.err[-2000:]
    assert "Traceback" not in run.err
    [line] = run.err.splitlines()
    assert line.startswith(str(path)), line
    assert message in line
    assert len(line) < 300
    assert run.cpu_s < CPU_SECONDS


def test_validate_refuses_each_hostile_file_in_one_line(hostile: tuple[Path, str]) -> None:
    path, message = hostile
    run = rpp("validate", str(path))
    assert_one_line_naming(run, path, message)
    assert run.out == ""


def test_simulate_reads_scenarios_with_the_same_limits(
    hostile_scenario: tuple[Path, str],
) -> None:
    path, message = hostile_scenario
    assert_one_line_naming(rpp("simulate", "--scenario", str(path)), path, message)


def test_fake_runpod_reads_scenarios_with_the_same_limits(
    hostile_scenario: tuple[Path, str],
) -> None:
    path, message = hostile_scenario
    run = rpp("fake-runpod", "--port", "0", "--scenario", str(path))
    assert run.code == 2
    [line] = run.err.splitlines()
    assert line.startswith(f"rpp fake-runpod: {path}: ")
    assert message in line
    assert run.cpu_s < CPU_SECONDS


def test_an_endless_stream_is_read_no_further_than_the_limit() -> None:
    run = rpp("validate", "/dev/zero")
    assert run.code == 2
    assert run.err == (
        "/dev/zero: is larger than 1.0 MiB; rpp reads YAML files up to 1.0 MiB "
        "(a RunPodPool is a few KB)\n"
    )


def test_a_long_bad_value_is_echoed_clipped_with_its_size(tmp_path: Path) -> None:
    """Within the size limit a bad value is reported, but never echoed whole."""
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(pool_with(replicas={"min": "x" * 900_000, "max": 3})))
    run = rpp("validate", str(path))
    assert run.code == 1
    [line] = [line for line in run.err.splitlines() if "spec.replicas.min" in line]
    assert line.startswith(f"{path}: spec.replicas.min: ")
    assert "more characters not shown)" in line
    assert len(run.err) < 2000


def test_a_number_of_5000_digits_is_text_refused_at_its_field(tmp_path: Path) -> None:
    """Python's int() refuses 4,300 digits; kubectl reads such a number as text (past
    int64 and float64), so the API server refuses it at its field, and so does rpp."""
    path = tmp_path / "digits.yaml"
    path.write_bytes(
        yaml.safe_dump(pool_with()).encode().replace(b"port: 80", b"port: " + b"9" * 5000)
    )
    run = rpp("validate", str(path))
    assert run.code == 1
    [line] = run.err.splitlines()
    assert line.startswith(f"{path}: spec.port: expected a whole number, got '999")
    assert "more characters not shown)" in line
    assert run.cpu_s < CPU_SECONDS


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n",
            "no RunPodPool here, found kind Deployment (apps/v1); expected apiVersion: "
            "runpodpool.ownego.com/v1alpha1 and kind: RunPodPool",
        ),
        (
            "apiVersion: runpodpool.ownego.com/v1alpha1\nmetadata: {name: web}\nspec: {}\n",
            "has no kind; expected apiVersion: runpodpool.ownego.com/v1alpha1 and kind: "
            "RunPodPool",
        ),
        ("# nothing but a comment\n", "holds no YAML document; expected apiVersion:"),
        ("just some text\n", "is the text 'just some text'; expected apiVersion:"),
    ],
)
def test_a_file_without_a_pool_says_what_it_found_and_what_is_expected(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "other.yaml"
    path.write_text(content)
    run = rpp("validate", str(path))
    assert run.code == 2
    [line] = run.err.splitlines()
    assert line.startswith(f"{path}: {message}")


def test_a_yaml_list_of_two_pools_is_named_in_a_few_words(tmp_path: Path) -> None:
    pool = yaml.safe_load(EXAMPLE.read_text())
    path = tmp_path / "list.yaml"
    path.write_text(yaml.safe_dump([pool, {**pool, "metadata": {"name": "other"}}]))
    run = rpp("validate", str(path))
    assert run.code == 2
    assert run.err == (
        f"{path}: is a list of 2 items: kind RunPodPool (runpodpool.ownego.com/v1alpha1), "
        "not a RunPodPool; write each pool as its own YAML document, separated by a line ---\n"
    )
