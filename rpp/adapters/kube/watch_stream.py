"""One watch stream over HTTP: opened with bookmarks asked for, read one event per line.

Where it sits: under the real Kubernetes adapter's watches (rpp/adapters/kube/real.py);
rpp/adapters/kube/watching.py opens one of these per stream and decides what to do when
it ends or answers 410. The request carries `allowWatchBookmarks=true` (the server then
sends BOOKMARK events with its current resourceVersion) and a `timeoutSeconds` drawn per
stream between 5 and 10 minutes, as client-go's reflector does, so that many watchers do
not reconnect together. Opening goes through the adapter's patience with passing
refusals (rpp/adapters/kube/transient.py); a failed answer is the typed error of its
status, an ERROR event in the stream the typed error of its Status (410 Gone included).
A stream cut mid-way (a restart, a proxy, a dead connection) ends like one the server
ended: opening the next says whether the server is still there.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any

import aiohttp

from rpp.adapters.kube import transport
from rpp.adapters.kube.transient import TransientAnswers

WATCH_SECONDS = (300, 600)
"""The range timeoutSeconds is drawn from, as client-go's reflector (5 to 10 minutes)."""
_SLACK_S = 30
"""How much longer than its timeoutSeconds the client waits for a stream to end."""

Send = Callable[[Sequence[tuple[str, str]], aiohttp.ClientTimeout], Awaitable[Any]]
"""Sends the watch GET with these query parameters; the raw response."""


async def events(
    *,
    send: Send,
    answers: TransientAnswers,
    op: transport.Op,
    query: Sequence[tuple[str, str]],
    version: str | None,
    host: str,
    connect_timeout: float,
) -> AsyncGenerator[dict[str, Any], None]:
    """The events of one stream from `version` (None: every object as ADDED first),
    until the stream ends."""
    seconds = random.randint(*WATCH_SECONDS)
    sent = [
        ("watch", "true"),
        ("allowWatchBookmarks", "true"),
        ("timeoutSeconds", str(seconds)),
        *query,
    ]
    if version:
        sent.append(("resourceVersion", version))
    # Connecting is bounded as any call is; the stream may stay quiet for its whole
    # timeoutSeconds, so only one the server fails to end is cut.
    timeout = aiohttp.ClientTimeout(total=seconds + _SLACK_S, sock_connect=connect_timeout)

    async def open_stream() -> aiohttp.ClientResponse:
        try:
            response: aiohttp.ClientResponse = await send(sent, timeout)
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise transport.unreachable(op, host=host, error=error) from None
        if response.status >= 300:
            body = await response.read()
            response.release()
            raise transport.failure(
                op, status=response.status, body=body, headers=response.headers
            )
        return response

    response = await answers.call(op, open_stream)
    try:
        while True:
            try:
                line = await response.content.readline()
            except (aiohttp.ClientError, TimeoutError, OSError):
                return  # cut mid-way: as an ended stream
            if not line:
                return  # the server ended it (timeoutSeconds)
            if line.strip():
                yield decode(op, line)
    finally:
        response.close()


def decode(op: transport.Op, line: bytes) -> dict[str, Any]:
    """One line of a watch stream as its event; an ERROR event as its typed error."""
    try:
        event = json.loads(line)
    except ValueError:
        event = None
    if not isinstance(event, dict):
        raise op.error(f"watching {op.target}: the API server sent an event that is not JSON")
    if event.get("type") == "ERROR":
        status = event.get("object") or {}
        raise transport.error_for(
            op,
            status=int(status.get("code") or 500),
            message=str(status.get("message", "")),
            reason=str(status.get("reason", "")),
        )
    return event
