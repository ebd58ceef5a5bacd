"""`rpp validate FILE...`: check RunPodPool files the way the controller will read them.

Exit codes: 0 every pool is valid (one summary line each); 1 at least one pool has
problems (every problem listed as `FILE: spec.path: message`) or two pools would fight
(rpp/model/clashes.py: the same pool twice, one namePrefix, one ConfigMap, one adopted
pod; checked across every file given); 2 a file could not be read, is not UTF-8 YAML
within the limits of rpp/model/documents.py, or holds no RunPodPool. Every message is
one line naming the file, values echoed from the file are clipped, never a traceback.
A valid pool whose limits leave no room for a surge pod gets a `FILE: warning:
spec.path: message` line on stderr and still exits 0 (rpp/model/spec_advice.py).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from rpp.adapters.files import UnreadableFile, read_documents
from rpp.model import spec as model
from rpp.model.clashes import Placed, clashes
from rpp.model.documents import clip, describe
from rpp.model.spec_advice import surge_room_warnings
from rpp.model.spec_load import Pool, load_pool

CLIP_LINE = 400  # a problem line: its path and sentence, and a clipped value


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


def _expected(group: str) -> str:
    return f"expected apiVersion: {group}/{model.API_VERSION} and kind: {model.KIND}"


def pool_documents(name: str, documents: list[Any], *, group: str) -> list[Any]:
    """The documents that should be RunPodPools; UnreadableFile when the file holds none,
    or holds something that cannot be one (a list, a scalar, a mapping without kind).
    Objects of other kinds beside a pool (its ConfigMap, say) are left alone."""
    if not documents:
        raise UnreadableFile(f"{name}: holds no YAML document; {_expected(group)}")
    for index, document in enumerate(documents):
        where = f"{name}: document {index + 1}" if len(documents) > 1 else name
        if isinstance(document, list):
            raise UnreadableFile(
                f"{where}: is {describe(document)}, not a {model.KIND}; write each pool as "
                "its own YAML document, separated by a line ---"
            )
        if not isinstance(document, dict):
            raise UnreadableFile(f"{where}: is {describe(document)}; {_expected(group)}")
        if "kind" not in document:
            raise UnreadableFile(f"{where}: has no kind; {_expected(group)}")
    pools = [d for d in documents if d.get("kind") == model.KIND]
    if not pools:
        found = ", ".join(sorted({describe(d) for d in documents}))
        raise UnreadableFile(f"{name}: no {model.KIND} here, found {found}; {_expected(group)}")
    return pools


def say(line: str, *, err: bool = False) -> None:
    print(clip(line, CLIP_LINE), file=sys.stderr if err else sys.stdout)


def run(args: argparse.Namespace) -> int:
    worst = 0
    valid: list[Placed] = []
    for name in args.files:
        try:
            pools = pool_documents(name, read_documents(name), group=args.group)
        except UnreadableFile as error:
            say(str(error), err=True)
            worst = 2
            continue
        for index, document in enumerate(pools):
            pool, problems = load_pool(document, group=args.group)
            source = name if len(pools) == 1 else f"{name}[{index}]"
            if pool is None:
                for problem in problems:
                    say(f"{source}: {problem}", err=True)
                worst = max(worst, 1)
                continue
            valid.append(Placed(source=source, pool=pool))
            say(f"{source}: {summary(pool)}")
            for path, message in surge_room_warnings(pool.spec):
                say(f"{source}: warning: {path}: {message}", err=True)
            if args.show_defaults:
                spec = pool.spec.model_dump(mode="json", by_alias=True)
                resolved = {"metadata": {"name": pool.name}, "spec": spec}
                sys.stdout.write(yaml.safe_dump(resolved, sort_keys=False))
    for line in clashes(valid):
        say(line, err=True)
        worst = max(worst, 1)
    return worst
