"""Flux's verdict on a custom resource under a Kustomization's `healthCheckExprs`, with
cel-python standing in for cel-go, for the GitOps tests.

What it follows (github.com/fluxcd/pkg, runtime/cel):

- `NewStatusEvaluator`: each expression is parsed, not compiled (`NewExpression` without
  `WithCompile`): no variable is declared, so the object's top-level fields (apiVersion,
  kind, metadata, spec, status) are the variables, and one the object lacks is an error
  when read ("no such attribute(s)").
- `StatusEvaluator.Evaluate`: when `status.observedGeneration` is an integer and differs
  from `metadata.generation`, InProgress without evaluating anything. Then `inProgress`,
  `failed`, `current`, in that order (RFC 0009), each only if given: the first true one
  decides (InProgress, Failed, Current); none true is InProgress. An expression that errors,
  or gives something other than a bool, returns the error.
- the status reader (cli-utils `genericStatusReader.ReadStatusForObject`, then
  `errResourceToResourceStatus`) turns that error into the Unknown status: Flux's wait
  (fluxcd/pkg ssa `WaitForSetWithContext`) keeps waiting, and reports it at the timeout.

One difference from cel-go is bridged here: cel-python's `has(e.f)` is false when `e`
itself is an error (an unbound `status`), where cel-go returns the error; `GoEvaluator`
returns it, as tests/install/test_gitops_health.py checks on fluxcd/pkg's own test cases.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import celpy
import lark
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError, Evaluator

FluxStatus = Literal["InProgress", "Current", "Failed", "Unknown"]
ORDER: tuple[tuple[str, FluxStatus], ...] = (
    ("inProgress", "InProgress"),
    ("failed", "Failed"),
    ("current", "Current"),
)


class GoEvaluator(Evaluator):
    """cel-python's evaluator, with cel-go's `has()` on an operand that is an error."""

    def macro_has_eval(self, exprlist: lark.Tree[Any]) -> Any:
        node: Any = exprlist
        while isinstance(node, lark.Tree) and node.data != "member_dot":
            if len(node.children) != 1:
                break
            node = node.children[0]
        if isinstance(node, lark.Tree) and node.data == "member_dot":
            base = self.visit(node.children[0])
            if isinstance(base, CELEvalError):
                return base
        return super().macro_has_eval(exprlist)


class GoRunner(celpy.InterpretedRunner):
    def evaluate(self, context: Any) -> Any:
        return GoEvaluator(ast=self.ast, activation=self.new_activation()).evaluate(context)


def evaluate_boolean(expr: str, obj: Mapping[str, Any]) -> bool:
    """`Expression.EvaluateBoolean`: the object's top-level fields as the variables."""
    env = celpy.Environment(runner_class=GoRunner)
    program = env.program(env.compile(expr))
    activation = {key: json_to_cel(value) for key, value in obj.items()}
    value = program.evaluate(activation)
    if isinstance(value, CELEvalError):
        raise value
    if not isinstance(value, celpy.celtypes.BoolType):
        raise TypeError(f"failed to evaluate CEL expression as boolean: '{expr}'")
    return bool(value)


def flux_status(exprs: Mapping[str, str], obj: Mapping[str, Any]) -> FluxStatus:
    """What Flux's wait sees for `obj` (see the module docstring)."""
    status = obj.get("status")
    observed = status.get("observedGeneration") if isinstance(status, Mapping) else None
    generation = (obj.get("metadata") or {}).get("generation")
    if _int64(observed) and _int64(generation) and observed != generation:
        return "InProgress"
    for key, verdict in ORDER:
        expr = exprs.get(key)
        if not expr:
            continue
        try:
            if evaluate_boolean(expr, obj):
                return verdict
        except (CELEvalError, TypeError):
            return "Unknown"
    return "InProgress"


def _int64(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
