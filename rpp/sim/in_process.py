"""The simulator's connections: requests answered in-process, with no sockets.

Where it sits: under the real prober and Prometheus client in the simulator and the
story tests (rpp/sim/world.py), and the world's app traffic. Only the connections are
swapped: the controller sends the same requests it would send to the pods and to
Prometheus. (Its RunPod client reaches the fake cloud's API over `httpx.ASGITransport`.)

- `InProcessPods` is the prober's `PodClient` (rpp/adapters/pod_http.py): each GET goes
  straight to the proxy's `respond`, the pod's answer read up to the limit as over a
  network, with no ASGI messages.
- `ResponderTransport` is httpx's transport onto any one responder (the fake
  Prometheus; the proxy, in tests that stream through it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from rpp.adapters.pod_http import (
    PodAnswer,
    PodClient,
    PodRequest,
    PodUnreachable,
    read_up_to,
)
from rpp.sim.asgi_io import Reply, Request, Responder, StreamCut

HEADERS_KEPT = 4096  # answer header sets kept (bounded, whatever the answers)
REQUESTS_KEPT = 16384  # the fakes' view of the probes sent again and again


class InProcessPods:
    """The prober's `PodClient`: every GET to the proxy's responder, in-process."""

    def __init__(self, respond: Responder) -> None:
        self._respond = respond
        # The prober builds each pod's two requests once and sends them every loop.
        self._seen: dict[PodRequest, Request] = {}

    async def get(self, request: PodRequest, *, limit: int) -> PodAnswer:
        fake = self._seen.get(request)
        if fake is None:
            if len(self._seen) >= REQUESTS_KEPT:
                self._seen.clear()
            fake = self._seen[request] = _pod_request(request)
        reply = await self._respond(fake)
        if reply.chunks is None:
            return PodAnswer(reply.status, reply.body if len(reply.body) <= limit else None)
        try:
            return PodAnswer(reply.status, await read_up_to(reply.chunks, limit))
        except StreamCut as cut:
            raise PodUnreachable(f"peer closed the connection: {cut}") from None

    async def aclose(self) -> None:
        self._seen.clear()


def _pod_request(request: PodRequest) -> Request:
    url = urlsplit(request.url)
    return Request(
        method="GET",
        path=url.path,
        query=parse_qs(url.query, keep_blank_values=True),
        headers={"host": request.host, "user-agent": request.user_agent},
        body=b"",
    )


def _is_a_pod_client(pods: InProcessPods) -> PodClient:
    """Never called: mypy checks here that the in-process client satisfies the protocol."""
    return pods


class ResponderTransport(httpx.AsyncBaseTransport):
    """Every request to one responder, in-process (no ASGI messages, no sockets)."""

    def __init__(self, respond: Responder) -> None:
        self._respond = respond
        # Answer headers by (status, type, extra headers, length): most answers repeat.
        self._headers: dict[tuple[Any, ...], httpx.Headers] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        fake = await _request(request)
        reply = await self._respond(fake)
        if reply.chunks is not None:
            headers = list(reply.headers)
            if reply.content_type is not None:
                headers.append(("content-type", reply.content_type))
            return httpx.Response(
                reply.status, headers=headers, stream=_Chunks(reply.chunks), request=request
            )
        body = b"" if fake.method == "HEAD" else reply.body
        # A stream, as a network transport returns: the caller reads it (`content=` would
        # read it here and re-derive the headers, a third of this method's cost).
        return httpx.Response(
            reply.status,
            headers=self._answer_headers(reply),
            stream=httpx.ByteStream(body),
            request=request,
        )

    def _answer_headers(self, reply: Reply) -> httpx.Headers:
        key = (reply.status, reply.content_type, reply.headers, len(reply.body))
        headers = self._headers.get(key)
        if headers is None:
            listed = list(reply.headers)
            if reply.content_type is not None:
                listed.append(("content-type", reply.content_type))
            listed.append(("content-length", str(len(reply.body))))
            if len(self._headers) >= HEADERS_KEPT:
                self._headers.clear()
            headers = self._headers[key] = httpx.Headers(listed)  # each answer copies it
        return headers


async def _request(request: httpx.Request) -> Request:
    """The fakes' view of an httpx request (the body is read whole: they are small)."""
    return Request(
        method=request.method.upper(),
        path=request.url.path,
        query=parse_qs(request.url.query.decode("latin-1"), keep_blank_values=True),
        headers={k.lower(): v for k, v in request.headers.items()},
        body=await request.aread(),
    )


class _Chunks(httpx.AsyncByteStream):
    """A streamed answer; a cut stream reads as the peer closing, as over a network."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._chunks:
                yield chunk
        except StreamCut as cut:
            raise httpx.RemoteProtocolError(f"peer closed the connection: {cut}") from None
