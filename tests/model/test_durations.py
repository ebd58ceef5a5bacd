"""Kubernetes-style durations: the grammar the CRD allows, read exactly, the shortest
spelling written back, and one sentence for a bad one from `rpp validate` and from the
API server (tests/crd_admission.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from rpp.cli import main
from rpp.model.durations import (
    DURATION_FITS_PATTERN,
    MAX_DURATION,
    NOT_A_DURATION,
    TOO_LONG,
    TOO_SHORT,
    DurationError,
    format_duration,
    parse_duration,
    read_duration,
)
from tests.cel_k8s import go_duration_nanos
from tests.crd_admission import refusals

EXAMPLE = Path(__file__).parents[2] / "examples" / "pool.yaml"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("150s", 150), ("2m", 120), ("1h30m", 5400), ("500ms", 0.5), ("1.5m", 90), ("0.5ms", 0.0005)],
)
def test_durations_read_as_kubernetes_writes_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    [
        "2 minutes", "1d", "-5s", "5", "", "1w", "99999999999999h",
        # What Python alone would let through, and the API server (Go) refuses:
        " 10s ", "10s\n", "1.2345s", "\u0661\u0660s",
    ],
)  # fmt: skip
def test_what_the_crd_pattern_refuses_is_refused_with_advice(text: str) -> None:
    with pytest.raises(DurationError, match="is not a duration; write a number with a unit"):
        parse_duration(text)


def test_a_number_is_not_a_duration_string() -> None:
    with pytest.raises(DurationError, match='expected a duration string such as "150s"'):
        parse_duration(150)


@pytest.mark.parametrize(
    ("seconds", "text"), [(150, "150s"), (120, "2m"), (5400, "1h30m"), (0.5, "500ms"), (0, "0s")]
)
def test_format_writes_the_shortest_exact_spelling(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@given(millis=st.integers(min_value=0, max_value=10**9))
def test_every_formatted_duration_parses_back_to_the_same_time(millis: int) -> None:
    assert round(parse_duration(format_duration(millis / 1000)) * 1000) == millis


def test_a_duration_past_gos_range_is_read_exactly_so_the_spec_can_call_it_too_long() -> None:
    # 9999999999999h is past int64 nanoseconds: Go's ParseDuration refuses it, so the
    # API server's duration() would fail on it; read exactly, it is simply too long.
    assert read_duration("9999999999999h") == 9999999999999 * 3600
    with pytest.raises(DurationError, match="is not a duration"):
        parse_duration("9999999999999h")


@pytest.mark.parametrize("text", ["720h", "43200m", "2592000s", "2592000000ms", "0001h", "1.5h"])
def test_the_durations_cel_may_convert_include_every_spelling_up_to_the_maximum(
    text: str,
) -> None:
    assert re.fullmatch(DURATION_FITS_PATTERN, text)


@pytest.mark.parametrize(
    "text", ["1000h", "100000m", "10000000s", "10000000000ms", "9999999999999h"]
)
def test_what_cel_is_not_trusted_to_convert_is_longer_than_the_maximum(text: str) -> None:
    assert not re.fullmatch(DURATION_FITS_PATTERN, text)
    assert read_duration(text) > read_duration(MAX_DURATION)


@given(text=st.from_regex(DURATION_FITS_PATTERN, fullmatch=True).filter(lambda t: len(t) <= 32))
def test_every_duration_cel_is_trusted_with_converts_in_go(text: str) -> None:
    # Go's time.ParseDuration (tests/cel_k8s.py) fails past int64 nanoseconds.
    assert go_duration_nanos(text) == round(read_duration(text) * 1_000_000) * 1000


def _pool(path: tuple[str, ...], value: str) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    target = obj["spec"]
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    return obj


CASES = [
    *(
        (path, text)
        for path in (("drain", "period"), ("probe", "timeout"), ("health", "warmupTimeout"))
        for text in ("150 seconds", "9999999999999h", "2562048h", "1000h", "721h", "1d")
    ),
    *((("drain", "period"), text) for text in ("0.5ms", "0s", "0.0005s")),
]


@pytest.mark.parametrize(("path", "text"), CASES, ids=[f"{'.'.join(p)}={t}" for p, t in CASES])
def test_a_bad_duration_gets_one_sentence_the_same_from_rpp_validate_and_the_api_server(
    path: tuple[str, ...], text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not `type conversion error ... google.protobuf.Duration` from the API server, not
    the grammar's regular expression: the sentence `rpp validate` prints after the value."""
    obj = _pool(path, text)
    field = "spec." + ".".join(path)
    [(where, said)] = refusals(obj)
    assert where == field
    assert said in (NOT_A_DURATION, TOO_SHORT, TOO_LONG)

    file = tmp_path / "pool.yaml"
    file.write_text(yaml.safe_dump(obj))
    assert main(["validate", str(file)]) == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if f": {field}: " in line]
    assert lines == [f"{file}: {field}: {text!r} is {said}"]
