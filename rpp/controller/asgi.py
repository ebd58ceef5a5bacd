"""Plain-ASGI plumbing: the scope types, the few answers a bare ASGI app sends, and the
uvicorn server the processes serve them with.

Where it sits: beside the controller's HTTP endpoints (rpp/controller/http_api.py), which
are a bare ASGI app served by uvicorn; the simulator's fake RunPod apps (rpp/sim/) build
on the same helpers. No web framework is needed for a handful of routes. `rpp run` and
`rpp nginx-reloader` serve through `Server`, which leaves SIGTERM to them.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from typing import Any

import uvicorn

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Server(uvicorn.Server):
    """uvicorn without its own signal handling: SIGTERM belongs to the process, which
    finishes its own work first and then tells the server to exit."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def host_of(scope: Scope) -> str:
    """The Host header without port, lowercase: what the proxy routes every request on."""
    for key, value in scope.get("headers", ()):
        if key.lower() == b"host":
            host: str = value.decode("latin-1")
            return host.rsplit(":", 1)[0].lower()
    return ""


def headers_of(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


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
