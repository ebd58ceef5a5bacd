"""Serve in-process ASGI fakes over real HTTP on 127.0.0.1, with uvicorn.

The simulator calls the fakes (inference pods, the proxy router) in-process. The tests
and benchmarks that must cross a real socket, because the program on the other side is
real (Prometheus scraping, nginx proxying, the prober's connection pool), serve the same
apps with uvicorn here. Ports are picked by the kernel (bind to port 0) before uvicorn
starts, so parallel tests never race for a port.

Two shapes: `serve_local` runs the server on the caller's event loop (async tests);
`ServerThread` runs servers on a loop in a background thread, for sync fixtures and for
callers whose own loop must not share time with the server (the benchmark).

And the way there by name. Behind RunPod's proxy every pod is its own host name
(`{podId}-{port}.proxy.runpod.net`); a rehearsal keeps that shape with names under
`proxy.test`, all on one local port: `pod_pattern` is the prober's URL pattern for them,
and `Loopback` (aiohttp's resolver interface, given to `PodTransport`) resolves every
name to 127.0.0.1, counting the lookups so a test can see connections are reused. Never
in a running controller: it stands in for DNS.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from types import TracebackType

import uvicorn
from aiohttp.abc import AbstractResolver, ResolveResult

from rpp.sim.asgi_io import ASGIApp

POD_DOMAIN = "proxy.test"


@asynccontextmanager
async def serve_local(app: ASGIApp, *, host: str = "127.0.0.1") -> AsyncIterator[int]:
    """Serve `app` on `host` at a free port until the block ends; yields the port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port: int = sock.getsockname()[1]
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_level="warning",
        access_log=False,
        # Hung requests (FakeInferencePod.hang) must not hold the shutdown for long.
        timeout_graceful_shutdown=1,
        backlog=4096,
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()  # surfaces the start-up error
                raise RuntimeError(f"uvicorn stopped before serving on {host}:{port}")
            await asyncio.sleep(0.005)
        yield port
    finally:
        server.should_exit = True
        await task
        sock.close()


class ServerThread:
    """Serves several ASGI apps, each on its own free port, from a background thread."""

    def __init__(self, apps: Sequence[ASGIApp], *, host: str = "127.0.0.1") -> None:
        self._apps = list(apps)
        self._host = host
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.ports: list[int] = []

    def start(self, *, timeout_s: float = 10.0) -> list[int]:
        self._thread = threading.Thread(target=self._run, name="rpp-local-http", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError(f"local HTTP servers did not start within {timeout_s}s")
        if self._error is not None:
            raise RuntimeError(f"local HTTP servers failed to start: {self._error}")
        return self.ports

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=15)

    def __enter__(self) -> list[int]:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as error:  # reported to the starting thread, not lost
            self._error = error
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with AsyncExitStack() as stack:
            for app in self._apps:
                self.ports.append(
                    await stack.enter_async_context(serve_local(app, host=self._host))
                )
            self._ready.set()
            await self._stop.wait()


class Loopback(AbstractResolver):
    """Every name resolves to 127.0.0.1, as if each pod's proxy host pointed here."""

    def __init__(self) -> None:
        self.lookups = 0

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups += 1
        return [
            ResolveResult(
                hostname=host,
                host="127.0.0.1",
                port=port,
                family=socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
        ]

    async def close(self) -> None:
        pass


def pod_pattern(scheme: str, port: int) -> str:
    """The prober's URL pattern: each pod its own host name, all on `port` here."""
    return f"{scheme}://{{pod_id}}-{{port}}.{POD_DOMAIN}:{port}"
