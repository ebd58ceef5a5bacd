"""The `rpp` command line: one subcommand per job, each in rpp/commands/<name>.py.

Every subcommand module exposes `register(subparsers)`, which adds its parser and sets
`func` to a callable taking the parsed arguments and returning an exit code. Modules
are imported only when their command runs, so `rpp validate` never pays for the
Kubernetes client, and `rpp --help` and `rpp --version` import none of them: a tool
missing from an install (pydot comes only with the dev extra) breaks at most the one
command that needs it, with one line.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from rpp import __version__

# name -> (module, the line `rpp --help` shows); the order is the order listed.
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": (
        "rpp.commands.validate",
        "check RunPodPool YAML files and print a summary of each pool",
    ),
    "crd": ("rpp.commands.crd", "print the RunPodPool CRD (deploy/crd.yaml is its output)"),
    "diagrams": (
        "rpp.commands.diagrams",
        "write the member and release machines' diagrams and tables (docs/diagrams, README)",
    ),
    "fake-runpod": (
        "rpp.commands.fake_runpod",
        "serve a fake RunPod API and proxy locally (no money spent)",
    ),
    "run": ("rpp.commands.run", "run the controller (configured by environment variables)"),
    "delete-pools": (
        "rpp.commands.delete_pools",
        "delete pools and wait until the controller lets each go (the chart's pre-delete hook)",
    ),
    "nginx-reloader": (
        "rpp.commands.nginx_reloader",
        "sidecar of an nginx pod: serve the slots ConfigMap at once, reloading gracefully",
    ),
    "simulate": (
        "rpp.commands.simulate",
        "run the real controller against a simulated RunPod "
        "(a day of a 10-pod pool in about 36 s of CPU)",
    ),
}


class _SubParsers:
    """The subparsers action, with each command's help line filled in from COMMANDS."""

    def __init__(self, action: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        self.action = action

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return self.action.add_parser(name, help=COMMANDS[name][1], **kwargs)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; only the module of command `only` is imported (none when None)."""
    parser = argparse.ArgumentParser(
        prog="rpp",
        description="runpod-pool-controller: keep a pool of RunPod GPU pods healthy.",
    )
    parser.add_argument("--version", action="version", version=f"rpp {__version__}")
    subparsers = _SubParsers(parser.add_subparsers(dest="command", metavar="COMMAND"))
    for name, (module_name, _) in COMMANDS.items():
        if name == only:
            importlib.import_module(module_name).register(subparsers)
        else:
            subparsers.add_parser(name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in args_list if not a.startswith("-")), None)
    if command is not None and command not in COMMANDS:
        build_parser().error(f"unknown command {command!r}; choose one of {', '.join(COMMANDS)}")
    parser = build_parser(only=command)
    args_list = _join_dashed_values(parser, args_list, command=command)
    args = parser.parse_args(args_list)  # --help and --version answer here and exit 0
    if command is None:
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`rpp simulate --json | head`): stop quietly, as Unix tools
        # do, and keep Python from complaining when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return code


def _join_dashed_values(
    parser: argparse.ArgumentParser, args: list[str], *, command: str | None
) -> list[str]:
    """`--until -5m` as `--until=-5m`: argparse takes a value that starts with a dash for
    an option and answers "expected one argument", so the value would never reach the
    check that says what is wrong with it. Joined only after an option that takes a
    value, and only when the next word is not an option itself."""
    if command is None:
        return args
    sub = next(
        (
            action.choices[command]
            for action in parser._actions
            if isinstance(action, argparse._SubParsersAction) and command in action.choices
        ),
        None,
    )
    if sub is None:
        return args
    options = {o for a in sub._actions for o in a.option_strings}
    takes_value = {o for a in sub._actions if a.nargs != 0 for o in a.option_strings}
    joined: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        following = args[i + 1] if i + 1 < len(args) else None
        if (
            word in takes_value
            and following is not None
            and following.startswith("-")
            and following.split("=", 1)[0] not in options
            and following != "--"
        ):
            joined.append(f"{word}={following}")
            i += 2
            continue
        joined.append(word)
        i += 1
    return joined
