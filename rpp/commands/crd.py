"""`rpp crd`: print the CustomResourceDefinition generated from the spec model."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rpp.model import spec
from rpp.model.crd import render_crd


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "crd", description="Print the RunPodPool CRD (deploy/crd.yaml is its output)."
    )
    parser.add_argument(
        "--group",
        default=spec.API_GROUP,
        help=f"API group (default {spec.API_GROUP}; CRD_GROUP at run time must match)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(render_crd(args.group))
    return 0
