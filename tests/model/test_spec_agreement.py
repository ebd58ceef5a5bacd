"""`rpp validate` and the API server (the CRD) give the same verdict on every pool.

A user who applies with kubectl must get the verdict of a user who runs `rpp validate`,
in both directions (issue 15 found NaN, trailing newlines, durations with spaces,
integers past 2^63 and long list items accepted by one and refused by the other).

A fixed generator builds a corpus from examples/pool.yaml: every field of the spec (read
from the generated CRD, so a new field is covered the day it is added) set to each
hostile value of its kind, the rules between fields at and around their edges, and the
pool's name. Every case is written as its own YAML file and the whole corpus goes
through `rpp validate` as a subprocess, as a user runs it; every case also goes through
tests/crd_admission.py, the model of the API server's admission from the same CRD. The
test lists every case where the two verdicts differ.
"""

from __future__ import annotations

import copy
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.crd_admission import admit_object, spec_schema

ROOT = Path(__file__).parents[2]
NAN, INF = math.nan, math.inf

STRINGS: list[Any] = [
    "", " ", "\t", "x", "a\n", "\na", "x" * 128, "x" * 129, "x" * 5000, "\u00a0", "\u2003x",
    "EU-RO-1", "/health", "health", "rpp-x-", "rpp-x-\n", "RPP-X-", "rpp-x", "-x-",
    "abcdefgh1234", "abcdefgh1234\n", "Not A Pod", "150s",
    None, 5, 1.5, True, [], {}, NAN,
]  # fmt: skip
DURATIONS: list[Any] = [
    "0s", "0ms", "150s", " 150s", "150s\n", "150 s", "1h30m", "1.5h", "0.5ms", "1ms",
    "0.001s", "0.0005s", "1.2345s", "0.0000000001s", "720h", "721h", "719h60m1ms",
    "99999999999h", "99999999999999999999999ms", "\u0661\u0665\u0660s", "1d", "-1s", "",
    "x" * 40, None, 150, 1.5, True, [],
    # Around Go's int64 nanoseconds and the digits CEL's duration() is trusted with:
    "9999999999999h", "2562047h", "2562048h", "999h", "1000h", "43200m", "99999m",
    "100000m", "2592000s", "9999999s", "10000000s", "2592000000ms", "9999999999ms",
    "10000000000ms", "0000000000000000000000000001h", "0000000000000000000000001000h",
    "719h59m60s", "1h1h1h1h1h1h1h1h1h1h", "999h999h999h999h999h999h",
]  # fmt: skip
INTEGERS: list[Any] = [
    -1, 0, 1, 2, 3, 4, 8, 64, 255, 256, 257, 1000, 1001, 1023, 1024, 65535, 65536,
    2**31, 2**53 + 1, 2**63 - 1, 2**63, 10**30, 1.0, 1.5, "2", True, None, NAN, INF,
    # Integral floats are integers to kubectl and the API server; the rest are not.
    2.0, 4.0, -1.0, 256.0, 2.5, 1e-9, 2.0**53, 2.0**60, 2.0**64, 1e21, 1e300,
]  # fmt: skip
NUMBERS: list[Any] = [
    -1, -0.0, 0, 0.01, 0.05, 1, 1.0000001, 1.5, 4, 1e300, 2**63, 10**30, NAN, INF, -INF,
    "1", True, None,
]  # fmt: skip
BOOLEANS: list[Any] = [True, False, "true", 0, 1, None]
LISTS: list[Any] = [
    [], ["EU-RO-1"], ["EU-RO-1", "EU-RO-1"], ["a", " "], ["a", "\t\n"], ["\u00a0"],
    ["x" * 128], ["x" * 129], [5], ["ok", None], ["a\n"], ["abcdefgh1234"],
    ["abcdefgh1234", "abcdefgh1234"], ["abcdefgh1234\n"], ["Not A Pod"],
    [f"dc{i}" for i in range(33)], [f"dc{i}" for i in range(65)], "EU-RO-1", None, {},
]  # fmt: skip
OBJECTS: list[Any] = [None, {}, [], "x", 5, {"unknown": 1}]
VALUES = {
    "string": STRINGS,
    "duration": DURATIONS,
    "integer": INTEGERS,
    "number": NUMBERS,
    "boolean": BOOLEANS,
    "array": LISTS,
    "object": OBJECTS,
}
NAMES: list[Any] = [
    "inference", "a" * 50, "a" * 51, "Inference", "a.b", "inf\n", "-a", "a-", "a_b", "", 5,
]  # fmt: skip

# The rules between fields, at and around their edges, each merged into the example.
CROSS: list[dict[str, Any]] = [
    *(
        {
            "replicas": {"min": lo, "max": hi},
            "limits": {"maxPods": 2 * lo},
            "nginx": {"slotPorts": slots},
        }
        for lo, hi in ((1, 1), (2, 1), (2, 2), (3, 3), (3, 7))
        for slots in (1, 2, 3, 4, 8, 256)
    ),
    *({"nginx": {"basePort": base, "slotPorts": slots}} for base, slots in (
        (65535, 1), (65535, 2), (65533, 3), (65533, 4), (65280, 256), (65281, 256),
        (1024, 256), (65300, 236), (65300, 237),
    )),
    *({"datacenters": {"allow": allow, "deny": deny}} for allow, deny in (
        (["A"], ["A"]), (["A", "B"], ["B"]), (["A"], ["B"]), ([], ["A"]), (["A"], []),
    )),
    *(
        {"templateId": template, "dryRun": dry, "paused": paused, "datacenters": {"allow": allow}}
        for template in (None, "", " ", "tpl")
        for dry in (True, False)
        for paused in (True, False)
        for allow in ([], ["EU-RO-1"])
    ),
    *({"metricsTokenKey": key, "envFromSecret": secret} for key, secret in (
        (None, None), ("T", None), ("", None), ("T", ""), ("T", "s"), (None, "s"), ("", ""),
    )),
    *({"replicas": {"min": lo}, "limits": {"maxPods": cap}} for lo, cap in (
        (1, 0), (1, 1), (2, 1), (2, 2), (3, None),
    )),
    *({"autoscaling": {"enabled": on, "query": query}} for on in (True, False) for query in (
        None, "", " ", "\t\n", "\u00a0", "q", " q ",
    )),
    *(
        {"probe": {"timeout": t}, "health": {"replaceWhen": {"slowScrape": {"threshold": s}}}}
        for t, s in (
            ("2s", "2s"), ("2s", "2000ms"), ("2.001s", "2s"), ("1s", "2s"), ("10s", "2s"),
            ("3.6s", "0.001h"), ("3.601s", "0.001h"), ("1m", "60s"), ("61s", "1m"),
            ("9999999999999h", "2s"), ("10s", "9999999999999h"), ("150 seconds", "2s"),
            ("1000h", "2s"), ("10s", "1000h"), ("1s", "0.5ms"),
        )
    ),
    *({"rollout": {"maxParallel": p}, "replicas": {"min": 2, "max": m}} for p, m in (
        (1, 2), (2, 2), (3, 2), (256, 255),
    )),
]  # fmt: skip


def example() -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "pool.yaml").read_text())
    return obj


def leaves(
    node: dict[str, Any], path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], str]]:
    """Every field of the spec schema, with its kind (objects too: they can be odd)."""
    for key, sub in node.get("properties", {}).items():
        kind = sub["type"]
        if kind == "string" and any(
            "duration(self)" in r["rule"] for r in sub.get("x-kubernetes-validations", [])
        ):
            kind = "duration"
        yield (*path, key), kind
        if kind == "object":
            yield from leaves(sub, (*path, key))


def with_value(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    target = out["spec"]
    for key in path[:-1]:
        child = target.get(key)
        if not isinstance(child, dict):
            child = target[key] = {}
        target = child
    target[path[-1]] = copy.deepcopy(value)
    return out


def merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def corpus() -> dict[str, dict[str, Any]]:
    base = example()
    cases: dict[str, dict[str, Any]] = {}
    for path, kind in leaves(spec_schema()):
        for value in VALUES[kind]:
            cases[f"spec.{'.'.join(path)}={value!r:.60}"] = with_value(base, path, value)
    for i, changes in enumerate(CROSS):
        obj = copy.deepcopy(base)
        obj["spec"] = merged(obj["spec"], changes)
        cases[f"cross[{i}] {changes!r:.100}"] = obj
    for name in NAMES:
        obj = copy.deepcopy(base)
        obj["metadata"]["name"] = name
        cases[f"metadata.name={name!r:.60}"] = obj
    return cases


def validate_verdicts(cases: dict[str, dict[str, Any]], tmp: Path) -> dict[str, bool]:
    """`rpp validate` over every case, each its own file: True where it says valid."""
    files = {}
    for index, (name, obj) in enumerate(cases.items()):
        path = tmp / f"case{index:05d}.yaml"
        path.write_text(yaml.safe_dump(obj, allow_unicode=True, sort_keys=False))
        files[path.name] = name
    done = subprocess.run(
        [sys.executable, "-m", "rpp", "validate", *sorted(files)],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    valid = {line.split(":", 1)[0] for line in done.stdout.splitlines()}
    return {name: file in valid for file, name in files.items()}


def test_rpp_validate_and_the_crd_agree_on_every_case_of_the_corpus(tmp_path: Path) -> None:
    cases = corpus()
    assert len(cases) > 1000
    validate = validate_verdicts(cases, tmp_path)
    disagree = []
    for name, obj in cases.items():
        refusals = admit_object(obj)
        if validate[name] != (not refusals):
            said = "admits" if not refusals else f"refuses ({refusals[0][:120]})"
            verdict = "valid" if validate[name] else "invalid"
            disagree.append(f"{name}: rpp validate says {verdict}, the API server {said}")
    assert not disagree, f"{len(disagree)} disagreements:\n" + "\n".join(disagree[:60])
