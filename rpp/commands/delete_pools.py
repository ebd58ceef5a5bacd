"""`rpp delete-pools NAME... --wait --timeout 4m`: delete pools while the controller still runs.

Why it exists: every pool in Manage carries the controller's finalizer, and only a running
controller removes it (after terminating the pool's pods, or naming them in an Event with
`deletionPolicy: Retain`). `helm uninstall` deletes the controller and the pools together,
so the pools would stay Terminating for ever with their pods billing. The chart's
pre-delete hook runs this command from the controller's own image first: it deletes the
chart's pools and waits until each is gone, while the controller is still there to finish
them. Where it sits: a command over the pool-deletion adapter
(rpp/adapters/kube/pool_deletion.py); it decides nothing about pods.

Exit codes: 0 every pool is gone (or was never there); 1 the timeout ran out with pools
left, each named with what holds it (its DeletionBlocked condition, or that no controller
has acted on it), so Helm reports the hook failed and keeps the controller running; 2 bad
arguments or no cluster access, in one line. Configuration as `rpp run`: NAMESPACE (or the
ServiceAccount's) and CRD_GROUP.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TextIO

from rpp.adapters.clock import Clock, SystemClock
from rpp.adapters.kube.api import KubeError, KubeSettings
from rpp.adapters.kube.pool_deletion import PoolDeletion
from rpp.controller.config import ConfigError, read_crd_group, read_namespace
from rpp.decide.state.conditions import Cond
from rpp.model.documents import clip
from rpp.model.durations import DurationError, format_duration, parse_duration

POLL_S = 2.0
DEFAULT_TIMEOUT = "4m"
Sleep = Callable[[float], Awaitable[None]]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "delete-pools",
        description="Delete RunPodPools by name and wait until the controller has let each "
        "go (its deletionPolicy applied). The Helm chart's pre-delete hook runs it. "
        "Configuration from the environment: NAMESPACE, CRD_GROUP.",
    )
    parser.add_argument("names", nargs="+", metavar="NAME", help="pools to delete")
    parser.add_argument(
        "--wait", action="store_true", help="wait until every pool is gone (exit 1 on timeout)"
    )
    parser.add_argument(
        "--timeout",
        default=DEFAULT_TIMEOUT,
        help=f"how long --wait waits, e.g. 4m or 300s (default {DEFAULT_TIMEOUT})",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig to use outside a pod")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        timeout = parse_duration(args.timeout)
    except DurationError as error:
        print(f"rpp delete-pools: --timeout: {error}", file=sys.stderr)
        return 2
    try:
        # Checked as `rpp run` checks them: a wrong group or namespace finds no pool, and
        # "nothing to delete" would let the uninstall go on with the pods still billing.
        namespace = read_namespace(os.environ)
        group = read_crd_group(os.environ)
    except ConfigError as error:
        print(f"rpp delete-pools: {error}", file=sys.stderr)
        return 2
    return asyncio.run(_main(args, timeout=timeout, namespace=namespace, group=group))


async def _main(
    args: argparse.Namespace, *, timeout: float, namespace: str | None, group: str
) -> int:
    from kubernetes.aio import client

    from rpp.adapters.kube.connect import ClusterConfigError, load_cluster_access
    from rpp.adapters.kube.pool_deletion import RealPoolDeletion

    try:
        access = await load_cluster_access(kubeconfig=args.kubeconfig)
    except ClusterConfigError as error:
        print(f"rpp delete-pools: {error}", file=sys.stderr)
        return 2
    namespace = namespace or access.namespace
    if not namespace:
        print("rpp delete-pools: NAMESPACE: not set; set NAMESPACE", file=sys.stderr)
        return 2
    settings = KubeSettings(namespace=namespace, crd_group=group)
    pools = RealPoolDeletion(client.ApiClient(access.configuration), settings)
    try:
        return await delete_pools(
            pools, args.names, wait=args.wait, timeout=timeout, clock=SystemClock()
        )
    finally:
        await pools.close()


async def delete_pools(
    pools: PoolDeletion,
    names: Sequence[str],
    *,
    wait: bool,
    timeout: float,
    clock: Clock,
    sleep: Sleep = asyncio.sleep,
    out: TextIO | None = None,
) -> int:
    """Delete each pool, then (with `wait`) read them back every POLL_S until all are gone
    or `timeout` seconds have passed on `clock`. Returns the exit code."""
    say = out or sys.stdout
    namespace = pools.settings.namespace
    left: list[str] = []
    try:
        for name in dict.fromkeys(names):
            if await pools.delete(name):
                left.append(name)
                print(f"{namespace}/{name}: deleted; its deletionPolicy is applied", file=say)
            else:
                print(f"{namespace}/{name}: not found, nothing to delete", file=say)
        if not wait:
            return 0
        deadline = clock.now().timestamp() + timeout
        while True:
            for name in list(left):
                if await pools.read(name) is None:
                    left.remove(name)
                    print(f"{namespace}/{name}: gone", file=say)
            if not left or clock.now().timestamp() >= deadline:
                break
            await sleep(POLL_S)
        for name in left:
            pool = await pools.read(name)
            if pool is not None:
                why = what_holds(pool, namespace=namespace)
                after = format_duration(timeout)
                print(f"{namespace}/{name}: still there after {after}: {why}", file=say)
    except KubeError as error:
        print(f"rpp delete-pools: {error}", file=sys.stderr)
        return 1
    if left:
        print(
            f"rpp delete-pools: {len(left)} pool(s) still there after "
            f"{format_duration(timeout)}; the controller keeps working on them. Run the "
            "uninstall again later, or see docs/install.md (Uninstall) for the manual path.",
            file=sys.stderr,
        )
        return 1
    return 0


def what_holds(pool: dict[str, Any], *, namespace: str) -> str:
    """Why a deleted pool is still there, from what the controller wrote on it."""
    status = pool.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    blocked = conditions.get(Cond.DELETION_BLOCKED.value)
    if blocked is None:
        return (
            "no controller has acted on its deletion yet: is one running and leading? "
            f"(kubectl -n {namespace} get lease runpod-pool-controller)"
        )
    state = "blocked" if blocked.get("status") == "True" else "in progress"
    reason = blocked.get("reason") or "?"
    message = blocked.get("message", "")
    return clip(f"{Cond.DELETION_BLOCKED.value} {state} ({reason}): {message}", 400)
