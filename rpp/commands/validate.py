"""`rpp validate FILE...`: check RunPodPool files the way the controller will read them.

Exit codes: 0 every pool is valid (one summary line each), 1 at least one pool has
problems (every problem listed as `FILE: spec.path: message`), 2 a file could not be
read or is not YAML (with the line of the syntax error). Never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from rpp.model import spec as model
from rpp.model.spec_load import Pool, load_pool


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate",
        description="Check RunPodPool YAML files and print a summary of each pool.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="YAML files (- for stdin)")
    parser.add_argument(
        "--show-defaults", action="store_true", help="print each pool's resolved spec"
    )
    parser.add_argument(
        "--group", default=model.API_GROUP, help="API group the files must use (CRD_GROUP)"
    )
    parser.set_defaults(func=run)


def summary(pool: Pool) -> str:
    s = pool.spec
    size = f"min {s.replicas.min}, max {s.replicas.max}"
    if s.autoscaling.enabled:
        size += ", autoscaling"
    return f"{pool.name}: {s.mode.value}, {size}, GPU types {', '.join(s.gpu_types)}"


def read_documents(name: str) -> list[Any]:
    """The YAML documents of a file; raises OSError or yaml.YAMLError."""
    text = sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")
    return [doc for doc in yaml.safe_load_all(text) if doc is not None]


def yaml_error_text(err: yaml.YAMLError) -> str:
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: YAML syntax error: {problem}"
    return f"YAML syntax error: {problem}"


def run(args: argparse.Namespace) -> int:
    worst = 0
    for name in args.files:
        try:
            docs = read_documents(name)
        except OSError as err:
            print(f"{name}: cannot read: {err.strerror or err}", file=sys.stderr)
            worst = 2
            continue
        except yaml.YAMLError as err:
            print(f"{name}: {yaml_error_text(err)}", file=sys.stderr)
            worst = 2
            continue
        pools = [d for d in docs if not isinstance(d, dict) or d.get("kind") == model.KIND]
        if not pools:
            print(f"{name}: no {model.KIND} object in this file", file=sys.stderr)
            worst = max(worst, 1)
        for index, doc in enumerate(pools):
            pool, problems = load_pool(doc, group=args.group)
            prefix = name if len(pools) == 1 else f"{name}[{index}]"
            if pool is None:
                for problem in problems:
                    print(f"{prefix}: {problem}", file=sys.stderr)
                worst = max(worst, 1)
                continue
            print(f"{prefix}: {summary(pool)}")
            if args.show_defaults:
                spec = pool.spec.model_dump(mode="json", by_alias=True)
                resolved = {"metadata": {"name": pool.name}, "spec": spec}
                sys.stdout.write(yaml.safe_dump(resolved, sort_keys=False))
    return worst
