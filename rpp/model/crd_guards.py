"""Guard the CRD's CEL rules for the API server's check of the CRD's own defaults.

Where it sits: outside the reconcile loop, one step of generating the CRD
(rpp/model/crd.py). The model's rules (rpp/model/spec.py) read defaulted fields directly:
on a pool, the API server fills every default in before it runs them. But when the CRD is
created, the API server validates each node's `default` as written (`{}` for a section;
no nested defaulting) and runs the rules of that node and of every node below it over
it (apiextensions-apiserver, pkg/apiserver/schema/defaulting/validation.go). A rule
reading `self.nginx` on `{}` fails there with "no such key", and the CRD is refused.

`guard_rules` rewrites such a rule as `!has(self.nginx) || (<rule>)`. It finds the fields
a rule reads and, for every raw default the rule's node is checked against (its own, and
its part of each ancestor's), the first field on each path that the default lacks. That
field must have a default itself (checked here: otherwise the model's rule has to test
`has()` on its own), so on a pool it is always present and the guard changes no verdict.
"""

from __future__ import annotations

import re
from typing import Any

Path = tuple[str, ...]

_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_HAS = re.compile(r"\bhas\(\s*self((?:\.\w+)+)\s*\)")
_READ = re.compile(r"\bself((?:\.\w+)+)(\s*\()?")


def reads(rule: str) -> list[tuple[Path, bool]]:
    """The fields under `self` that `rule` reads, each with whether it is only tested
    for presence (`has(self.a.b)` needs `a`, not `b`). A method call's name (`.matches(`)
    is not a field; string literals are skipped."""
    text = _LITERAL.sub("''", rule)
    found: list[tuple[Path, bool]] = []
    tested = [(m.span(), tuple(m.group(1)[1:].split("."))) for m in _HAS.finditer(text)]
    found += [(path, True) for _, path in tested]
    for match in _READ.finditer(text):
        if any(start <= match.start() < end for (start, end), _ in tested):
            continue
        path = tuple(match.group(1)[1:].split("."))
        if match.group(2):  # self.x.matches(...): `matches` is a method
            path = path[:-1]
        if path:
            found.append((path, False))
    return found


def _first_missing(value: Any, path: Path) -> Path | None:
    for depth, key in enumerate(path):
        if not isinstance(value, dict):
            return None  # a schema error of the default, reported as such
        if key not in value:
            return path[: depth + 1]
        value = value[key]
    return None


def _always_present(node: dict[str, Any], path: Path) -> bool:
    for key in path:
        node = node.get("properties", {}).get(key, {})
        if "default" not in node:
            return False
    return True


def _guarded(rule: str, node: dict[str, Any], defaults: list[Any]) -> str:
    guards: list[Path] = []
    for path, presence_only in reads(rule):
        needed = path[:-1] if presence_only else path
        for value in defaults:
            missing = _first_missing(value, needed)
            if missing is None or missing in guards:
                continue
            spelled = "self." + ".".join(missing)
            if _always_present(node, missing):
                guards.append(missing)
            elif f"has({spelled})" not in rule.replace(" ", ""):
                raise ValueError(
                    f"the rule {rule!r} reads {spelled}, which a default it is checked "
                    "against lacks and which has no default of its own: test "
                    f"has({spelled}) in the model's rule (rpp/model/spec.py)"
                )
    if not guards:
        return rule
    tests = " || ".join(f"!has(self.{'.'.join(path)})" for path in guards)
    return f"{tests} || ({rule})"


def guard_rules(node: dict[str, Any], defaults: tuple[Any, ...] = ()) -> dict[str, Any]:
    """`node` (a structural schema) with every rule guarded against the raw defaults it
    is checked against: `defaults`, the node's parts of its ancestors' defaults, and its
    own."""
    seen = [*defaults, node["default"]] if "default" in node else list(defaults)
    out = dict(node)
    rules = node.get("x-kubernetes-validations")
    if rules:
        out["x-kubernetes-validations"] = [
            {**r, "rule": _guarded(r["rule"], node, seen)} for r in rules
        ]
    if "properties" in node:
        out["properties"] = {
            key: guard_rules(sub, tuple(v[key] for v in seen if isinstance(v, dict) and key in v))
            for key, sub in node["properties"].items()
        }
    if isinstance(node.get("items"), dict):
        items = tuple(item for v in seen if isinstance(v, list) for item in v)
        out["items"] = guard_rules(node["items"], items)
    if isinstance(node.get("additionalProperties"), dict):
        values = tuple(x for v in seen if isinstance(v, dict) for x in v.values())
        out["additionalProperties"] = guard_rules(node["additionalProperties"], values)
    return out
