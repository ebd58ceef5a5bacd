"""`rpp nginx-reloader` started as its own process, as the nginx Pod's sidecar runs.

For the tests that meet it as a process (tests/commands/test_nginx_reloader.py against kmock,
tests/commands/test_nginx_reloader_api.py against the Kubernetes API stand-in): configured only by
its flags, its environment and a kubeconfig naming the server, for pool `inference`.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from rpp.adapters.nginx import SlotFiles
from rpp.decide.nginx_slots import upstream_name
from tests.kmock_strict import write_kubeconfig
from tests.nginx_runner import free_port


@dataclass(frozen=True)
class ReloaderProcess:
    process: asyncio.subprocess.Process
    """Its JSON log lines come on stderr (a pipe); stdout is discarded."""
    files: SlotFiles
    """Its slots directory and status port."""
    listen: int
    """The port of its /healthz."""


@asynccontextmanager
async def running_reloader(
    *,
    server: str,
    namespace: str,
    workdir: Path,
    pid_file: Path | None = None,
    extra: Sequence[str] = (),
) -> AsyncIterator[ReloaderProcess]:
    """The reloader of pool inference in `namespace` of the API server at `server`,
    writing workdir/slots; its nginx's pid file workdir/nginx.pid unless `pid_file`;
    `extra` flags last. Killed on the way out if it still runs."""
    root = workdir / "slots"
    status_port, listen = free_port(), free_port()
    kubeconfig = write_kubeconfig(workdir / "kubeconfig", server=server)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "KUBECONFIG": str(kubeconfig),
        "NAMESPACE": namespace,
        "LOG_FORMAT": "json",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "rpp",
        "nginx-reloader",
        "--pool",
        "inference",
        "--dir",
        str(root),
        "--pid-file",
        str(pid_file or workdir / "nginx.pid"),
        "--status-port",
        str(status_port),
        "--listen",
        f"127.0.0.1:{listen}",
        *extra,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    files = SlotFiles(root=root, upstream=upstream_name("inference"), status_port=status_port)
    try:
        yield ReloaderProcess(process=process, files=files, listen=listen)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
