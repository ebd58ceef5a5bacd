"""`rpp validate PATH...`: check RunPodPool files the way the controller will read them.

Each PATH is a file (- for stdin) or a folder, which stands for its .yaml, .yml and .json
files, not its subfolders (as `kubectl apply -f DIR`). A GitOps folder holds more than
pools (the nginx in front of them, alert rules, a kustomization.yaml): a file with no
RunPodPool is skipped with one note (`FILE: no RunPodPool (ConfigMap, Service); skipped`),
as long as some file given holds a pool. When none does, the command was pointed at the
wrong files, and each says what it holds instead (exit 2). `--strict` wants a pool in
every file, the behaviour before 0.3.0. A document meant as a pool is checked, never
skipped: kind RunPodPool in any spelling of its case, or an apiVersion of the pools' group.

Exit codes: 0 every pool is valid (one summary line each); 1 at least one pool has
problems (every problem listed as `FILE: spec.path: message`) or two pools would fight
(rpp/model/clashes.py: the same pool twice, one namePrefix, one ConfigMap, one adopted
pod; checked across every file given); 2 a file could not be read, is not UTF-8 YAML
within the limits of rpp/model/documents.py, holds a pool that cannot be one (a list of
pools, a pool without kind), or no file holds a RunPodPool (with --strict: a file holds
none). Every message is one line naming the file, values echoed from the file are
clipped, never a traceback. A valid pool whose limits leave no room for a surge pod gets
a `FILE: warning: spec.path: message` line on stderr and still exits 0
(rpp/model/spec_advice.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rpp.adapters.files import STDIN, UnreadableFile, read_documents
from rpp.model import spec as model
from rpp.model.clashes import Placed, clashes
from rpp.model.documents import clip, describe
from rpp.model.spec_advice import surge_room_warnings
from rpp.model.spec_load import Pool, load_pool

CLIP_LINE = 400  # a problem line: its path and sentence, and a clipped value
FOLDER_FILES = (".yaml", ".yml", ".json")  # what `kubectl apply -f DIR` reads


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate",
        description=(
            "Check RunPodPool YAML files and print a summary of each pool. Files of other "
            "kinds (nginx, alert rules, kustomization.yaml) are skipped with a note, as "
            "long as some file holds a pool."
        ),
    )
    parser.add_argument(
        "files",
        nargs="+",
        metavar="PATH",
        help="YAML files (- for stdin), or folders: their .yaml, .yml and .json files",
    )
    parser.add_argument(
        "--show-defaults", action="store_true", help="print each pool's resolved spec"
    )
    parser.add_argument(
        "--group", default=model.API_GROUP, help="API group the files must use (CRD_GROUP)"
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="every file must hold a RunPodPool (exit 2 otherwise), as before 0.3.0",
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
    Objects of other kinds beside a pool (its ConfigMap, say) are left alone. This is
    --strict, and what a file with no pool gets when no file given holds one."""
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


def _in_group(document: dict[Any, Any], group: str) -> bool:
    api = document.get("apiVersion")
    return isinstance(api, str) and api.rpartition("/")[0] == group


def meant_as_pool(document: Any, *, group: str) -> bool:
    """A pool, or a pool written wrong (kind `RunpodPool`, or our group with another kind):
    checked so the mistake is reported, never skipped as some other object."""
    if not isinstance(document, dict):
        return False
    kind = document.get("kind")
    return (isinstance(kind, str) and kind.lower() == model.KIND.lower()) or _in_group(
        document, group
    )


def _label(document: Any) -> str:
    """A document in a skip note: its kind, or what it is when it has none."""
    if isinstance(document, dict):
        kind = document.get("kind")
        return clip(str(kind), 60) if kind is not None else "a mapping without kind"
    return "a YAML list" if isinstance(document, list) else describe(document)


def mixed_documents(name: str, documents: list[Any], *, group: str) -> list[Any]:
    """The documents meant as pools, the others skipped; UnreadableFile only for a pool
    that cannot be read as one (a YAML list of pools, a pool without kind)."""
    for index, document in enumerate(documents):
        where = f"{name}: document {index + 1}" if len(documents) > 1 else name
        if isinstance(document, list) and any(meant_as_pool(d, group=group) for d in document):
            raise UnreadableFile(
                f"{where}: is {describe(document)}, not a {model.KIND}; write each pool as "
                "its own YAML document, separated by a line ---"
            )
        if isinstance(document, dict) and "kind" not in document and _in_group(document, group):
            raise UnreadableFile(f"{where}: has no kind; {_expected(group)}")
    return [d for d in documents if isinstance(d, dict) and meant_as_pool(d, group=group)]


@dataclass
class Source:
    """One file given: its pools, or what it holds instead, or why it cannot be read."""

    name: str
    pools: list[Any] = field(default_factory=list)
    documents: list[Any] = field(default_factory=list)  # kept only when it holds no pool
    error: str | None = None

    def note(self) -> str:
        found = sorted({_label(d) for d in self.documents}) or ["no YAML document"]
        return f"{self.name}: no {model.KIND} ({', '.join(found)}); skipped"


def expand(paths: list[str]) -> list[Source]:
    """Each path given, a folder replaced by its YAML files (sorted), each file once."""
    out: list[Source] = []
    seen: set[str] = set()
    for path in paths:
        names = [path]
        if path != STDIN and Path(path).is_dir():
            try:
                inside = sorted(p for p in Path(path).iterdir() if p.suffix in FOLDER_FILES)
            except OSError as error:
                out.append(Source(path, error=f"{path}: cannot read: {error.strerror or error}"))
                continue
            names = [str(p) for p in inside if p.is_file()]
            if not names:
                listed = f"{', '.join(FOLDER_FILES[:-1])} or {FOLDER_FILES[-1]}"
                out.append(Source(path, error=f"{path}: a folder with no {listed} file"))
        for name in names:
            key = name if name == STDIN else os.path.realpath(name)
            if key not in seen:
                seen.add(key)
                out.append(Source(name))
    return out


def read_sources(paths: list[str], *, group: str, strict: bool) -> list[Source]:
    sources = expand(paths)
    for source in (s for s in sources if s.error is None):
        try:
            documents = read_documents(source.name)
            if strict:
                source.pools = pool_documents(source.name, documents, group=group)
            else:
                source.pools = mixed_documents(source.name, documents, group=group)
                source.documents = [] if source.pools else documents
        except UnreadableFile as error:
            source.error = str(error)
    if not any(s.pools for s in sources):
        # Pointed at files without a single pool: each says what it holds instead.
        for source in (s for s in sources if s.error is None):
            try:
                pool_documents(source.name, source.documents, group=group)
            except UnreadableFile as error:
                source.error = str(error)
    return sources


def say(line: str, *, err: bool = False) -> None:
    print(clip(line, CLIP_LINE), file=sys.stderr if err else sys.stdout)


def run(args: argparse.Namespace) -> int:
    worst = 0
    valid: list[Placed] = []
    sources = read_sources(args.files, group=args.group, strict=args.strict)
    for source in sources:
        if source.error is not None:
            say(source.error, err=True)
            worst = 2
            continue
        if not source.pools:
            say(source.note())
            continue
        name, pools = source.name, source.pools
        for index, document in enumerate(pools):
            pool, problems = load_pool(document, group=args.group, from_file=True)
            where = name if len(pools) == 1 else f"{name}[{index}]"
            if pool is None:
                for problem in problems:
                    say(f"{where}: {problem}", err=True)
                worst = max(worst, 1)
                continue
            valid.append(Placed(source=where, pool=pool))
            say(f"{where}: {summary(pool)}")
            for path, message in surge_room_warnings(pool.spec):
                say(f"{where}: warning: {path}: {message}", err=True)
            if args.show_defaults:
                spec = pool.spec.model_dump(mode="json", by_alias=True)
                resolved = {"metadata": {"name": pool.name}, "spec": spec}
                sys.stdout.write(yaml.safe_dump(resolved, sort_keys=False))
    for line in clashes(valid):
        say(line, err=True)
        worst = max(worst, 1)
    if not args.strict and len(sources) > 1 and not any(s.pools for s in sources):
        say(f"none of the {len(sources)} files given holds a {model.KIND}", err=True)
    return worst
