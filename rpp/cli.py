"""The `rpp` command line: one subcommand per job, each in rpp/commands/<name>.py.

Every subcommand module exposes `register(subparsers)`, which adds its parser and sets
`func` to a callable taking the parsed arguments and returning an exit code. Modules
are imported only when their command runs, so `rpp validate` never pays for the
Kubernetes client and a missing optional tool breaks only the command that needs it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from rpp import __version__

# name -> module; the order is the order `rpp --help` lists them in.
COMMANDS: dict[str, str] = {
    "validate": "rpp.commands.validate",
    "crd": "rpp.commands.crd",
    "diagrams": "rpp.commands.diagrams",
    "fake-runpod": "rpp.commands.fake_runpod",
    "run": "rpp.commands.run",
    "simulate": "rpp.commands.simulate",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rpp",
        description="runpod-pool-controller: keep a pool of RunPod GPU pods healthy.",
    )
    parser.add_argument("--version", action="version", version=f"rpp {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            subparsers.add_parser(name, help=f"(run `rpp {name} --help`)")
            continue
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in args_list if not a.startswith("-")), None)
    parser = build_parser(only=command if command in COMMANDS else None)
    if command is None or command not in COMMANDS:
        if command is not None:
            parser.error(f"unknown command {command!r}; choose one of {', '.join(COMMANDS)}")
        parser.print_help()
        return 0 if any(a in ("-h", "--help") for a in args_list) else 2
    args = parser.parse_args(args_list)
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
