"""Plain-ASGI plumbing shared by the fake RunPod apps (cloud API, control, proxy).

The fakes are bare ASGI callables, served in-process through `httpx.ASGITransport`
and over real HTTP by uvicorn: one app, two transports. No web framework is needed
for a handful of routes, so this module holds the few helpers they share: the scope
types, reading a request, and sending a JSON, problem+json or empty answer.

The proxy and the pods behind it answer most of the simulator's requests (every
probe, all app traffic), so they are written as responders instead: a `Request` in,
a `Reply` out, whole or, for a streaming answer, as chunks after the headers (which
may end in `StreamCut`: the connection is cut before the stream's end, as when a pod
dies mid-stream). `asgi_app` serves a responder over ASGI (uvicorn, tests), and
rpp/sim/in_process.py calls it straight from an httpx transport, which skips the
ASGI messages for the requests that are most of a simulated loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from rpp.controller.asgi import ASGIApp as ASGIApp
from rpp.controller.asgi import Message as Message
from rpp.controller.asgi import Receive as Receive
from rpp.controller.asgi import Scope as Scope
from rpp.controller.asgi import Send as Send
from rpp.controller.asgi import headers_of as headers_of
from rpp.controller.asgi import host_of as host_of
from rpp.controller.asgi import reject_non_http as reject_non_http
from rpp.controller.asgi import send_bytes as send_bytes
from rpp.controller.asgi import send_json as send_json
from rpp.controller.asgi import send_problem as send_problem


@dataclass(frozen=True)
class Request:
    """One HTTP request, read whole (the fakes only get small JSON bodies)."""

    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]
    body: bytes

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def host(self) -> str:
        """The host name without port, lowercase (what RunPod's proxy routes on)."""
        return (self.header("host") or "").rsplit(":", 1)[0].lower()


# What uvicorn logs when an app ends without its answer's end: a cut stream, on purpose.
CUT_STREAM_LOG = "ASGI callable returned without completing response."


class StreamCut(Exception):
    """Raised by a streamed answer's chunks: cut the connection, the stream unfinished."""


@dataclass(frozen=True)
class Reply:
    """One HTTP answer: whole (`body`), or streamed (`chunks`, sent chunked after the
    headers; `body` is then unused)."""

    status: int
    body: bytes = b""
    content_type: str | None = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()
    chunks: AsyncIterator[bytes] | None = field(default=None, compare=False)

    @classmethod
    def text(cls, status: int, text: str) -> Reply:
        return cls(status, text.encode())


Responder = Callable[[Request], Awaitable[Reply]]


async def send_reply(send: Send, reply: Reply) -> None:
    """Send the answer; a streamed one raises `StreamCut` when its chunks end in a cut."""
    if reply.chunks is None:
        await send_bytes(
            send, reply.status, reply.body, content_type=reply.content_type, headers=reply.headers
        )
        return
    headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers]
    if reply.content_type is not None:
        headers.append((b"content-type", reply.content_type.encode("latin-1")))
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    async for chunk in reply.chunks:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def asgi_app(respond: Responder) -> ASGIApp:
    """Serve a responder as an ASGI app (uvicorn, httpx.ASGITransport)."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if await reject_non_http(scope, receive, send):
            return
        try:
            await send_reply(send, await respond(await read_request(scope, receive)))
        except StreamCut:
            return  # the server closes the connection: the client sees a cut stream

    return app


async def read_request(scope: Scope, receive: Receive) -> Request:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return Request(
        method=scope["method"].upper(),
        path=scope["path"],
        query=parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True),
        headers=headers_of(scope),
        body=b"".join(chunks),
    )
