"""Pods that answer the prober badly on purpose, over real HTTP, beside healthy ones.

Outside observe -> decide -> act: this is what the prober observes in the tests and the
hostile-pod benchmark. uvicorn cannot trickle a status line or lie about a length, so
this is a small HTTP/1.1 server on asyncio streams. It routes on the Host header as
RunPod's proxy does (`{pod_id}-{port}.proxy.runpod.net`): a pod id listed in `hostile`
misbehaves on the paths given with it ("health", "metrics" or "both"); everything else
is served by a healthy `FakeInferencePod`, keep-alive included.

Behaviours (`Hostile`): a huge body, sent with its length or chunked; a metrics page of
many short lines; a status line or a body trickled a byte at a time (slowloris). Bodies
are generated as they are sent, so the server itself stays small.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import ssl
from collections.abc import AsyncIterator, Mapping
from urllib.parse import parse_qs, urlsplit

from rpp.adapters.clock import Clock
from rpp.sim.asgi_io import Request
from rpp.sim.inference import FakeInferencePod

MAX_HEAD = 16 * 1024
_CHUNK = 64 * 1024


class Hostile(enum.Enum):
    """What a hostile pod does to every probe it gets."""

    HUGE_BODY = "50 MB body, length announced"
    HUGE_CHUNKED = "50 MB body, chunked (no length)"
    MANY_LINES = "a million-line metrics page, chunked"
    MANY_LINES_SIZED = "a million-line metrics page, length announced"
    SMALL_MANY_LINES = "a page just under 1 MiB of 4-byte lines"
    SLOW_HEAD = "status line trickled, a byte every 100 ms"
    SLOW_BODY = "body trickled, a byte every 100 ms"


# The mix the prober's test and the hostile-pod benchmark serve beside healthy pods: pod id
# -> (what it does, on "health", "metrics" or "both").
HOSTILE: Mapping[str, tuple[Hostile, str]] = {
    "hugehealth": (Hostile.HUGE_BODY, "health"),
    "hugechunked": (Hostile.HUGE_CHUNKED, "both"),
    "hugemetrics": (Hostile.HUGE_BODY, "metrics"),
    "lines": (Hostile.MANY_LINES, "metrics"),
    "linessized": (Hostile.MANY_LINES_SIZED, "metrics"),
    "smalllines": (Hostile.SMALL_MANY_LINES, "metrics"),
    "slowhead": (Hostile.SLOW_HEAD, "both"),
    "slowbody": (Hostile.SLOW_BODY, "metrics"),
    "slowhealth": (Hostile.SLOW_BODY, "health"),
}

HUGE = 50 * 1000 * 1000
LINES = 1_000_000
TRICKLE_S = 0.1


class HostilePods:
    """One server for healthy and hostile pods; `serve()` yields its port."""

    def __init__(
        self,
        *,
        clock: Clock,
        hostile: Mapping[str, tuple[Hostile, str]],
        latency_s: float = 0.0,
    ) -> None:
        self.clock = clock
        self.hostile = dict(hostile)
        self.latency_s = latency_s
        self.healthy: dict[str, FakeInferencePod] = {}
        # Server.close() leaves accepted connections open (until Python 3.13's
        # close_clients); a kept-alive one would outlive the event loop and warn later.
        self._writers: set[asyncio.StreamWriter] = set()

    @contextlib.asynccontextmanager
    async def serve(
        self, host: str = "127.0.0.1", *, tls: ssl.SSLContext | None = None
    ) -> AsyncIterator[int]:
        """Serve on a free port of `host` (over TLS with a `tls` context); yields the port."""
        server = await asyncio.start_server(self._connection, host, 0, backlog=4096, ssl=tls)
        try:
            yield int(server.sockets[0].getsockname()[1])
        finally:
            server.close()
            for writer in list(self._writers):
                writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 5)

    def pod(self, pod_id: str) -> FakeInferencePod:
        if pod_id not in self.healthy:
            self.healthy[pod_id] = FakeInferencePod(pod_id=pod_id, clock=self.clock)
            if self.latency_s:
                self.healthy[pod_id].slow(self.latency_s)
        return self.healthy[pod_id]

    async def _connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._writers.add(writer)
        try:
            while True:
                request = await _read_head(reader)
                if request is None:
                    return
                pod_id = request.host.split(".", 1)[0].rsplit("-", 1)[0]
                behaviour, where = self.hostile.get(pod_id, (None, ""))
                path = "health" if request.path == "/health" else "metrics"
                if behaviour is not None and where in (path, "both"):
                    await _misbehave(writer, behaviour)
                    return  # hostile answers end the connection
                reply = await self.pod(pod_id).respond(request)
                writer.write(_head(reply.status, reply.content_type, len(reply.body)) + reply.body)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()


async def _read_head(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    if len(head) > MAX_HEAD:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    url = urlsplit(target)
    return Request(
        method=method,
        path=url.path,
        query=parse_qs(url.query, keep_blank_values=True),
        headers=headers,
        body=b"",
    )


def _head(status: int, content_type: str | None, length: int | None) -> bytes:
    lines = [f"HTTP/1.1 {status} X", f"content-type: {content_type or 'text/plain'}"]
    lines.append(
        f"content-length: {length}" if length is not None else "transfer-encoding: chunked"
    )
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _misbehave(writer: asyncio.StreamWriter, behaviour: Hostile) -> None:
    if behaviour is Hostile.SLOW_HEAD:
        for byte in b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok":
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(TRICKLE_S)
        return
    if behaviour is Hostile.SLOW_BODY:
        writer.write(_head(200, None, 1000))
        for _ in range(1000):
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(TRICKLE_S)
        return
    if behaviour is Hostile.SMALL_MANY_LINES:
        body = b"a 1\n" * (1024 * 1024 // 4 - 1)
        writer.write(_head(200, "text/plain; version=0.0.4", len(body)) + body)
        await writer.drain()
        return
    sized = behaviour in (Hostile.HUGE_BODY, Hostile.MANY_LINES_SIZED)
    lines = behaviour in (Hostile.MANY_LINES, Hostile.MANY_LINES_SIZED)
    piece = (
        b"".join(b'h_bucket{le="%d"} 1\n' % i for i in range(_CHUNK // 24))
        if lines
        else b"x" * _CHUNK
    )
    total = LINES * (len(piece) // (_CHUNK // 24)) if lines else HUGE
    writer.write(_head(200, "text/plain; version=0.0.4", total if sized else None))
    sent = 0
    while sent < total:
        part = piece[: total - sent]
        writer.write(part if sized else b"%x\r\n%s\r\n" % (len(part), part))
        sent += len(part)
        await writer.drain()
    if not sized:
        writer.write(b"0\r\n\r\n")
        await writer.drain()
