"""rpp/model/kube_yaml.py: a YAML file means to rpp what it means to kubectl.

kubectl turns YAML into JSON with sigs.k8s.io/yaml over go.yaml.in/yaml/v2. The expected
values below are read off those sources (v2's resolve.go and decode.go, sigs.k8s.io/yaml's
yaml.go, as vendored by Kubernetes 1.36) and Go's strconv and encoding/json; each case
where PyYAML's YAML 1.1 reads the text otherwise says what PyYAML made of it.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml

from rpp.model.documents import DocumentError, parse_documents
from rpp.model.kube_yaml import KubeYamlError, float32_text, load_all
from rpp.sim.scenario import parse_scenario_text

SCALARS: list[tuple[str, Any]] = [
    # Base 60 was dropped ("purposefully unsupported", resolve.go): text. PyYAML: 80.
    ("1:20", "1:20"),
    ("2:30", "2:30"),
    # strconv.ParseInt(s, 0, 64) after underscores go. PyYAML: '0o120', 8080, 80, 83, 80.
    ("0o120", 80),
    ("8_080", 8080),
    ("0x50", 80),
    ("0123", 83),
    ("+80", 80),
    ("0b101", 5),
    ("-0b101010", -42),
    ("0x_0A_74_AE", 685230),
    ("9223372036854775807", 2**63 - 1),
    ("18446744073709551615", 2**64 - 1),  # ParseUint after ParseInt's range error
    # Not an integer (09 is no octal), so yamlStyleFloat: the float 9, sent as 9.
    ("09", 9),
    # Floats, written by encoding/json without a point when whole and below 1e21.
    # PyYAML: '8e1', '1e3', '8.0e1' (its floats need a dot and a signed exponent).
    ("8e1", 80),
    ("8.0e1", 80),
    ("1e3", 1000),
    ("80.0", 80),
    ("-0.0", 0),
    ("1.5", 1.5),
    (".5", 0.5),
    ("685.230_15e+03", 685230.15),
    ("1e21", 1e21),
    ("1e400", "1e400"),  # ParseFloat's range error: text
    ("5" * 5000, "5" * 5000),  # the same, not Python's 4,300-digit limit
    # Booleans: three spellings of y/yes/on/true and n/no/off/false. PyYAML: 'y', 'n'.
    ("y", True),
    ("Yes", True),
    ("ON", True),
    ("n", False),
    ("off", False),
    ("FALSE", False),
    ("yES", "yES"),
    # Null, and the special floats.
    ("~", None),
    ("null", None),
    ("", None),
    (".inf", math.inf),
    ("-.Inf", -math.inf),
    # A timestamp into interface{} stays its text (decode.go). PyYAML: a date, or a
    # "month must be in 1..12" error for the second.
    ("2001-12-14", "2001-12-14"),
    ("2026-13-45", "2026-13-45"),
    ("2015-02-24T18:19:39Z", "2015-02-24T18:19:39Z"),
    # Text.
    ("<<", "<<"),
    ("abc", "abc"),
    ("-b_c", "-b_c"),
    ("50cent_of_dollar", "50cent_of_dollar"),
    ("0x", "0x"),
    ("+", "+"),
]


@pytest.mark.parametrize(("text", "value"), SCALARS, ids=[t[:20] for t, _ in SCALARS])
def test_a_plain_scalar_is_read_as_go_yaml_v2_and_encoding_json_read_it(
    text: str, value: Any
) -> None:
    [document] = load_all(f"v: {text}\n")
    assert document["v"] == value
    assert type(document["v"]) is type(value)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("v: '0o120'", "0o120"),
        ('v: "yes"', "yes"),
        ("v: |\n  80\n", "80\n"),
        ("v: ! 12", "12"),  # the non-specific tag: text to v2 (PyYAML resolves it: 12)
        ("v: !foo 12", "12"),  # a tag v2 does not know leaves the text
        ("v: !!str 80", "80"),
        ('v: !!int "0x50"', 80),
        ("v: !!float 1", 1),
        ("v: !!float 1.5", 1.5),
        ("v: !!bool yes", True),
        ("v: !!null ''", None),
        ("v: !!timestamp 2015-01-01", "2015-01-01"),
        ("v: !!binary aGk=", "hi"),
        ("%TAG !y! tag:yaml.org,2002:\n---\nv: !y!int '1'", 1),
    ],
)
def test_quotes_and_tags_decide_as_they_do_for_v2(text: str, value: Any) -> None:
    assert load_all(text) == [{"v": value}]


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("80: x", "80"),
        ("-1: x", "-1"),
        ("y: x", "true"),  # a boolean key, as sigs.k8s.io/yaml writes it
        ("on: x", "true"),
        ("no: x", "false"),
        ("1.5: x", "1.5"),
        ("1e6: x", "1e+06"),  # FormatFloat(f, 'g', -1, 32), not encoding/json's form
        ("1.0: x", "1"),
        ("123456789.0: x", "1.2345679e+08"),  # float32's shortest digits
        (".inf: x", ".inf"),
        ("2001-12-14: x", "2001-12-14"),
        ("'80': x", "80"),
    ],
)
def test_a_key_becomes_the_json_string_sigs_k8s_io_yaml_writes(text: str, key: str) -> None:
    assert load_all(text) == [{key: "x"}]


@pytest.mark.parametrize(
    ("number", "text"),
    [(0.0001, "0.0001"), (0.00001, "1e-05"), (100000.0, "100000"), (1e39, ".inf"), (-2.5, "-2.5")],
)
def test_float32_text_is_go_formatfloat_g_32(number: float, text: str) -> None:
    assert float32_text(number) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("~: 1", "line 1: a mapping key is null"),
        ("18446744073709551615: x", "past int64"),  # convertToJSONableObject has no uint64 key
        ("? [a]\n: 1", "line 1: a mapping key is a list"),
        ("<<: 5", "line 1: a merge key (<<) takes a mapping or a list of mappings"),
        ("v: !!int abc", "line 1: cannot read !!str `abc` as a !!int"),
        ("v: !!binary '!!'", "line 1: !!binary value contains invalid base64 data"),
    ],
)
def test_what_kubectl_cannot_turn_into_json_is_one_line(text: str, message: str) -> None:
    with pytest.raises(KubeYamlError) as caught:
        load_all(text)
    assert str(caught.value).startswith(message) or message in str(caught.value)
    with pytest.raises(DocumentError):
        parse_documents(text)


def test_a_merge_key_sets_its_keys_where_it_stands_as_v2_does() -> None:
    """decode.go merges in document order: a key before `<<` is overridden by it (PyYAML
    keeps that key), a key after overrides it, and in a list the first mapping wins."""
    text = "base: &b {a: 1, b: 2}\nm:\n  a: 0\n  <<: *b\n  b: 3\nk: {<<: [{c: 1}, {c: 2, d: 3}]}\n"
    assert yaml.safe_load(text)["m"] == {"a": 0, "b": 3}
    assert load_all(text)[0]["m"] == {"a": 1, "b": 3}
    assert load_all(text)[0]["k"] == {"c": 1, "d": 3}


def test_a_later_duplicate_key_wins_as_with_kubectl() -> None:
    assert load_all("a: 1\na: 2\n") == [{"a": 2}]


def test_a_scenarios_pool_is_read_in_the_same_dialect() -> None:
    """`rpp simulate --scenario` reads its files with the same reader: a pool in a
    scenario means what the same pool applied with kubectl means."""
    text = (
        "duration: 10m\npool:\n  apiVersion: runpodpool.ownego.com/v1alpha1\n"
        "  kind: RunPodPool\n  metadata: {name: inference}\n  spec:\n    port: 0o120\n"
    )
    assert parse_scenario_text(text, source="s.yaml").pool["spec"]["port"] == 80
