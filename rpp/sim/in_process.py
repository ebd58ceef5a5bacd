"""The simulator's transport: httpx requests answered in-process, with no sockets.

Where it sits: under the real RunPod client, prober and traffic in the simulator and
the story tests (rpp/sim/world.py). Only the transport is swapped: the controller
sends the same httpx requests it would send to RunPod. Requests for a RunPod proxy
host (`{podId}-{port}.proxy.runpod.net`: every probe and all app traffic, most of a
simulated loop) go straight to the proxy's `respond`, skipping the ASGI messages;
everything else (the REST API, GraphQL, the fake's control routes) goes to the
fallback transport, the cloud API over `httpx.ASGITransport`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import parse_qs

import httpx

from rpp.model.proxy_hosts import PROXY_SUFFIX
from rpp.sim.asgi_io import Request, Responder, StreamCut


class InProcessTransport(httpx.AsyncBaseTransport):
    """Proxy hosts to a responder, other hosts to `fallback`."""

    def __init__(self, *, proxy: Responder, fallback: httpx.AsyncBaseTransport) -> None:
        self._proxy = proxy
        self._fallback = fallback

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        host = request.headers.get("host", request.url.host).rsplit(":", 1)[0].lower()
        if not host.endswith(PROXY_SUFFIX):
            return await self._fallback.handle_async_request(request)
        reply = await self._proxy(await _request(request))
        headers = list(reply.headers)
        if reply.content_type is not None:
            headers.append(("content-type", reply.content_type))
        if reply.chunks is not None:
            return httpx.Response(
                reply.status, headers=headers, stream=_Chunks(reply.chunks), request=request
            )
        headers.append(("content-length", str(len(reply.body))))
        body = b"" if request.method == "HEAD" else reply.body
        # A stream, as a network transport returns: the caller reads it (`content=` would
        # read it here and re-derive the headers, a third of this method's cost).
        return httpx.Response(
            reply.status, headers=headers, stream=httpx.ByteStream(body), request=request
        )

    async def aclose(self) -> None:
        await self._fallback.aclose()


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
