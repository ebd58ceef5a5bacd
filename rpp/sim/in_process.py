"""The simulator's transports: requests answered in-process, with no sockets.

Where it sits: under the real RunPod client, prober and traffic in the simulator and
the story tests (rpp/sim/world.py). Only the transports are swapped: the controller
sends the same requests it would send to RunPod and to the pods.

- `InProcessPods` is the prober's `PodClient` (rpp/adapters/pod_http.py): each probe
  goes straight to the proxy's `respond`, the pod's answer read up to the limit as
  over a network, with no ASGI messages.
- `InProcessTransport` is httpx's: requests for a RunPod proxy host
  (`{podId}-{port}.proxy.runpod.net`: the world's app traffic) go to the proxy's
  `respond` too; everything else (the REST API, GraphQL, the fake's control routes) to
  the fallback transport, the cloud API over `httpx.ASGITransport`.
  `ResponderTransport` serves any one responder so (the fake Prometheus).
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from rpp.adapters.pod_http import PodAnswer, PodClient, PodRequest, PodUnreachable
from rpp.model.proxy_hosts import PROXY_SUFFIX
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
        parts, size = [], 0
        try:
            async for chunk in reply.chunks:
                size += len(chunk)
                if size > limit:
                    return PodAnswer(reply.status, None)
                parts.append(chunk)
        except StreamCut as cut:
            raise PodUnreachable(f"peer closed the connection: {cut}") from None
        return PodAnswer(reply.status, b"".join(parts))

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
        # The fakes' view of each request that is sent again and again: the prober and
        # the world's traffic build each pod's bodiless GETs once. Kept only while the
        # request object lives.
        self._seen: weakref.WeakKeyDictionary[httpx.Request, Request] = weakref.WeakKeyDictionary()
        # Answer headers by (status, type, extra headers, length): most answers repeat.
        self._headers: dict[tuple[Any, ...], httpx.Headers] = {}

    def knows(self, request: httpx.Request) -> bool:
        """This request object was sent here before (so no need to look at its host)."""
        return request in self._seen

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        fake = self._seen.get(request)
        if fake is None:
            fake = await _request(request)
            if fake.method in ("GET", "HEAD") and not fake.body:
                self._seen[request] = fake
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


class InProcessTransport(httpx.AsyncBaseTransport):
    """Proxy hosts to a responder, other hosts to `fallback`."""

    def __init__(self, *, proxy: Responder, fallback: httpx.AsyncBaseTransport) -> None:
        self._proxy = ResponderTransport(proxy)
        self._fallback = fallback

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not self._proxy.knows(request):
            host = request.headers.get("host", request.url.host).rsplit(":", 1)[0].lower()
            if not host.endswith(PROXY_SUFFIX):
                return await self._fallback.handle_async_request(request)
        return await self._proxy.handle_async_request(request)

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
