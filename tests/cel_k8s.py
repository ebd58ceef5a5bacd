"""CEL as the Kubernetes API server evaluates a CRD's rules, on top of cel-python.

Shared by tests/crd_admission.py (admitting pools) and tests/install/test_crd_install.py (creating
the CRD). The API server runs `x-kubernetes-validations` with cel-go over values it
converts by the schema (k8s.io/apiserver pkg/cel/common/values.go); cel-python differs
where that matters to us, so this module makes it behave as cel-go does:

- `has(a.b)` evaluates `a` and fails when `a` is missing ("no such key"); cel-python
  answers false;
- `||` and `&&` absorb an error only when the other side decides (true, false), else the
  error is the result; cel-python reports an overload error instead of the first error;
- `duration(text)` is Go's `time.ParseDuration`, which refuses a value past int64
  nanoseconds with "type conversion error from 'string' to 'google.protobuf.Duration'";
  cel-python's allows ten thousand years and other spellings;
- values take their CEL type from the schema: a number field's 2 is a double, an integer
  field's 2.0 is the error "invalid data, expected int, got float64" (values.go);
- an evaluation error refuses the object, reported as "<error> evaluating rule: <message>"
  (apiextensions-apiserver, pkg/apiserver/schema/cel/validation.go).

`matches()` is cel-python's, which uses RE2 as cel-go does.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import celpy
import lark
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, Evaluator

Path = tuple[str, ...]
_GO_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": 10**9}
_GO_UNITS |= {"m": 60 * 10**9, "h": 3600 * 10**9}
_INT64 = 2**63


def _error(text: str) -> CELEvalError:
    return CELEvalError(text)


def go_duration_nanos(text: str) -> int | None:
    """Go's time.ParseDuration: nanoseconds, or None where Go returns an error."""
    rest, negative = text, False
    if rest[:1] in ("-", "+"):
        negative, rest = rest[0] == "-", rest[1:]
    if rest == "0":
        return 0
    if not rest:
        return None
    total = 0
    while rest:
        number = re.match(r"([0-9]*)(?:\.([0-9]*))?", rest)
        assert number is not None
        whole, fraction = number.group(1), number.group(2)
        if not whole and not fraction:
            return None  # no digits ("s", ".s")
        rest = rest[number.end() :]
        unit_text = re.match(r"[^0-9.]*", rest)
        assert unit_text is not None
        unit = _GO_UNITS.get(unit_text.group(0))
        if unit is None:
            return None
        rest = rest[unit_text.end() :]
        value = int(whole or "0")
        if value > _INT64 // unit:
            return None  # overflow
        value *= unit
        if fraction:
            value += int(fraction) * unit // 10 ** len(fraction)
        total += value
        if total > _INT64:
            return None
    if not negative and total > _INT64 - 1:
        return None
    return -total if negative else total


def go_duration(value: Any) -> Any:
    """CEL's `duration()` as cel-go evaluates it."""
    if isinstance(value, celtypes.DurationType):
        return value
    if not isinstance(value, str):
        return _error("no such overload")
    nanos = go_duration_nanos(str(value))
    if nanos is None:
        return _error("type conversion error from 'string' to 'google.protobuf.Duration'")
    seconds, rest = divmod(nanos, 10**9)
    return celtypes.DurationType(seconds, rest)


class _GoEvaluator(Evaluator):
    """cel-python's evaluator with cel-go's `has()`, `||` and `&&`."""

    def macro_has_eval(self, exprlist: lark.Tree[Any]) -> Any:
        node: Any = exprlist
        while isinstance(node, lark.Tree) and node.data != "member_dot":
            if len(node.children) != 1:
                return _error("invalid argument to has() macro")
            node = node.children[0]
        if not isinstance(node, lark.Tree):
            return _error("invalid argument to has() macro")
        operand, name = node.children
        value = self.visit(operand)
        if isinstance(value, CELEvalError):
            return value
        if isinstance(value, celtypes.MapType):
            return celtypes.BoolType(celtypes.StringType(str(name)) in value)
        return _error("no such overload")

    def _logical(self, tree: lark.Tree[Any], *, decides: bool) -> Any:
        left, right = self.visit_children(tree)
        sides = (left, right)
        if any(isinstance(v, celtypes.BoolType) and bool(v) is decides for v in sides):
            return celtypes.BoolType(decides)
        for value in sides:
            if isinstance(value, CELEvalError):
                return value
        if all(isinstance(v, celtypes.BoolType) for v in sides):
            return celtypes.BoolType(not decides)
        return _error("no such overload")

    def conditionalor(self, tree: lark.Tree[Any]) -> Any:
        if len(tree.children) == 1:
            return super().conditionalor(tree)
        return self._logical(tree, decides=True)

    def conditionaland(self, tree: lark.Tree[Any]) -> Any:
        if len(tree.children) == 1:
            return super().conditionaland(tree)
        return self._logical(tree, decides=False)


class _GoRunner(celpy.InterpretedRunner):
    def evaluate(self, context: Any) -> Any:
        return _GoEvaluator(ast=self.ast, activation=self.new_activation()).evaluate(context)


_ENV = celpy.Environment(runner_class=_GoRunner)


@functools.cache
def parse(rule: str) -> lark.Tree[Any]:
    """The rule's syntax tree; a CELParseError when it does not compile."""
    return _ENV.compile(rule)


@functools.cache
def _program(rule: str) -> Any:
    return _ENV.program(parse(rule), functions={"duration": go_duration})


def value_of(node: dict[str, Any], value: Any) -> Any:
    """`value` as the CEL value the API server makes of it under schema `node`."""
    kind = node.get("type")
    if value is None:
        return None if node.get("nullable") else _error("invalid data, got null")
    if kind == "object" and isinstance(value, dict):
        props, more = node.get("properties"), node.get("additionalProperties")
        if props is not None:
            fields = {k: value_of(props[k], v) for k, v in value.items() if k in props}
        elif isinstance(more, dict):
            fields = {k: value_of(more, v) for k, v in value.items()}
        else:
            return _error("invalid object type")
        return celtypes.MapType({celtypes.StringType(k): v for k, v in fields.items()})
    if kind == "array" and isinstance(value, list):
        return celtypes.ListType([value_of(node["items"], v) for v in value])
    if kind == "string" and isinstance(value, str):
        return celtypes.StringType(value)
    if kind == "boolean" and isinstance(value, bool):
        return celtypes.BoolType(value)
    if kind == "integer" and isinstance(value, int) and not isinstance(value, bool):
        return celtypes.IntType(value)
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return celtypes.DoubleType(value)
    go_type = {bool: "bool", str: "string", float: "float64", int: "int64"}.get(type(value), "map")
    wanted = {"integer": "int", "number": "float", "boolean": "bool"}.get(str(kind), kind)
    return _error(f"invalid data, expected {wanted}, got {go_type}")


def _text(error: Exception) -> str:
    text = str(error.args[0]) if error.args else str(error)
    missing = re.fullmatch(r"no such member in mapping: '(.*)'", text)
    return f"no such key: {missing.group(1)}" if missing else text


_VERDICTS: dict[tuple[str, int, str], str | None] = {}
_FROZEN: dict[int, dict[str, Any]] = {}
"""The nodes of schemas no one changes (`remember_verdicts_under`), by id; holding them
keeps their ids from being reused by another object."""


def remember_verdicts_under(schema: dict[str, Any]) -> None:
    """Verdicts of the rules of `schema` and every node below it are remembered from now
    on. Only for a schema no one changes afterwards: tests that edit a copy of the CRD's
    schema (to plant a broken rule) must be judged afresh."""
    stack = [schema]
    while stack:
        node = stack.pop()
        _FROZEN[id(node)] = node
        stack.extend(node.get("properties", {}).values())
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                stack.append(node[key])


def evaluate(rule: str, node: dict[str, Any], value: Any) -> str | None:
    """None when `rule` holds for `value` (under schema `node`); else why not: "false",
    or the evaluation error's text as cel-go words it.

    Under a frozen schema a verdict is remembered: it depends only on the rule, its node
    and `self`, and a corpus that varies one field at a time asks every other node the
    same question thousands of times (celpy's tree walk took 77 s of the spec corpus
    test). `repr` tells 1, 1.0 and True apart, as CEL does."""
    if id(node) not in _FROZEN:
        return _evaluate(rule, node, value)
    key = (rule, id(node), repr(value))
    if key not in _VERDICTS:
        _VERDICTS[key] = _evaluate(rule, node, value)
    return _VERDICTS[key]


def _evaluate(rule: str, node: dict[str, Any], value: Any) -> str | None:
    try:
        program = _program(rule)
    except CELParseError as error:
        return f"rule compile error: {error}"
    try:
        result = program.evaluate({"self": value_of(node, value)})
    except CELEvalError as error:
        return _text(error)
    if isinstance(result, CELEvalError):
        return _text(result)
    return None if result is True or result == celtypes.BoolType(True) else "false"


def rule_failures(node: dict[str, Any], value: Any, path: str) -> Iterator[tuple[str, str, str]]:
    """The API server's CEL validator over `value`: the rules of `node` and of every node
    below it that `value` reaches, each refusal as (path, the node's type, detail)."""
    if value is None:
        return
    kind = str(node.get("type", ""))
    for rule in node.get("x-kubernetes-validations", []):
        why = evaluate(rule["rule"], node, value)
        if why == "false":
            yield path, kind, rule["message"]
        elif why is not None:
            yield path, kind, f"{why} evaluating rule: {rule['message']}"
    if isinstance(value, dict):
        props, more = node.get("properties", {}), node.get("additionalProperties")
        for key, sub in value.items():
            if key in props:
                yield from rule_failures(props[key], sub, f"{path}.{key}")
            elif isinstance(more, dict):
                yield from rule_failures(more, sub, f"{path}[{key}]")
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        for index, item in enumerate(value):
            yield from rule_failures(node["items"], item, f"{path}[{index}]")


def field_reads(rule: str) -> list[tuple[Path, bool]]:
    """Every `self.a.b` the rule selects (outermost selections only; a method's name is
    not a field), each with whether it is the argument of `has()`."""
    found: list[tuple[Path, bool]] = []

    def chain(member: lark.Tree[Any]) -> Path | None:
        names: list[str] = []
        node: Any = member
        while isinstance(node, lark.Tree) and node.data == "member":
            child = node.children[0]
            if isinstance(child, lark.Tree) and child.data == "member_dot":
                names.append(str(child.children[1]))
                node = child.children[0]
                continue
            ident = child.children[0] if isinstance(child, lark.Tree) else None
            if isinstance(ident, lark.Tree) and ident.data == "ident":
                return tuple(reversed(names)) if str(ident.children[0]) == "self" else None
            return None
        return None

    def walk(tree: Any, *, outer: bool, in_has: bool) -> None:
        if not isinstance(tree, lark.Tree):
            return
        if tree.data == "member" and outer:
            path = chain(tree)
            if path:
                found.append((path, in_has))
        if tree.data == "ident_arg" and str(tree.children[0]) == "has":
            for child in tree.children[1:]:
                walk(child, outer=True, in_has=True)
            return
        for child in tree.children:
            inner = tree.data == "member_dot"
            walk(child, outer=not inner, in_has=in_has and not inner)

    walk(parse(rule), outer=True, in_has=False)
    return found
