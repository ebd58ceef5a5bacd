"""Plain-ASGI plumbing shared by the fake RunPod apps (cloud API, control, proxy).

The fakes are bare ASGI callables, served in-process through `httpx.ASGITransport`
and over real HTTP by uvicorn: one app, two transports. No web framework is needed
for a handful of routes, so this module holds the few helpers they share: the scope
types, reading a request, and sending a JSON, problem+json or empty answer.

The proxy and the pods behind it answer most of the simulator's requests (every
probe, all app traffic), so they are written as responders instead: a `Request` in,
a whole `Reply` out. `asgi_app` serves a responder over ASGI (uvicorn, tests), and
rpp/sim/in_process.py calls it straight from an httpx transport, which skips the
ASGI messages for the requests that are most of a simulated loop.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


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


@dataclass(frozen=True)
class Reply:
    """One whole HTTP answer (the fakes' answers are small)."""

    status: int
    body: bytes = b""
    content_type: str | None = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def text(cls, status: int, text: str) -> Reply:
        return cls(status, text.encode())


Responder = Callable[[Request], Awaitable[Reply]]


async def send_reply(send: Send, reply: Reply) -> None:
    await send_bytes(
        send, reply.status, reply.body, content_type=reply.content_type, headers=reply.headers
    )


def asgi_app(respond: Responder) -> ASGIApp:
    """Serve a responder as an ASGI app (uvicorn, httpx.ASGITransport)."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if await reject_non_http(scope, receive, send):
            return
        await send_reply(send, await respond(await read_request(scope, receive)))

    return app


def host_of(scope: Scope) -> str:
    """The Host header without port, lowercase: what the proxy routes every request on."""
    for key, value in scope.get("headers", ()):
        if key.lower() == b"host":
            host: str = value.decode("latin-1")
            return host.rsplit(":", 1)[0].lower()
    return ""


def headers_of(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


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


async def send_bytes(
    send: Send,
    status: int,
    body: bytes,
    *,
    content_type: str | None,
    headers: Iterable[tuple[str, str]] = (),
) -> None:
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    if content_type is not None:
        raw.append((b"content-type", content_type.encode("latin-1")))
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def send_json(
    send: Send,
    status: int,
    data: Any,
    *,
    content_type: str = "application/json",
    headers: Iterable[tuple[str, str]] = (),
) -> None:
    await send_bytes(
        send, status, json.dumps(data).encode(), content_type=content_type, headers=headers
    )


async def send_problem(
    send: Send,
    status: int,
    *,
    title: str,
    detail: str,
    errors: list[str] | None = None,
    headers: Iterable[tuple[str, str]] = (),
) -> None:
    """An RFC 9457 problem+json answer, RunPod's error shape."""
    body: dict[str, Any] = {"title": title, "status": status, "detail": detail}
    if errors:
        body["errors"] = errors
    await send_json(send, status, body, content_type="application/problem+json", headers=headers)


async def reject_non_http(scope: Scope, receive: Receive, send: Send) -> bool:
    """Answer lifespan/websocket scopes; True when the scope was not plain HTTP."""
    if scope["type"] == "http":
        return False
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return True
    return True
