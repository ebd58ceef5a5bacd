"""RunPod's HTTP proxy, emulated: Host `{podId}-{port}.proxy.runpod.net` -> that pod.

The controller never reaches a pod directly: nginx slots and probes go through
`https://{podId}-{port}.proxy.runpod.net`, which routes on the host name. This app
does the same over the fake cloud, so the prober, nginx and Prometheus in tests see
what they would see on RunPod:

- the pod is RUNNING, the port is declared `<port>/http`, and its service answers:
  the service's answer, unchanged;
- the pod exists but is not RUNNING, the port is not an http port, or nothing listens
  (the server's `is_serving` is False, or it fails before answering): 502;
- the service takes longer than the CDN's limit (100 s; configurable): 524, measured
  on the event loop's clock, so the simulator's virtual time drives it too;
- no such pod: 404.

A streamed answer (server-sent events) passes through chunk by chunk; when the service
stays silent longer than the CDN's limit after its headers, the stream is cut, as
RunPod's CDN does, and a stream the service cuts (its pod died) is cut here too. The
simulator's transport (rpp/sim/in_process.py) calls `respond` directly; over HTTP it is
ASGI.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncIterator

from rpp.model.observations import PodStatus
from rpp.model.proxy_hosts import PROXY_SUFFIX
from rpp.sim import asgi_io as io
from rpp.sim.cloud import FakeCloud

CDN_LIMIT_S = 100.0
_HOST = re.compile(r"^(?P<pod>[a-z0-9]+)-(?P<port>\d+)\.proxy\.runpod\.net$")


class ProxyApp:
    """The RunPod proxy in front of every fake pod's server: a responder, and ASGI."""

    def __init__(self, cloud: FakeCloud, *, limit_s: float = CDN_LIMIT_S) -> None:
        self.cloud = cloud
        self.limit_s = limit_s
        self._asgi = io.asgi_app(self.respond)

    async def __call__(self, scope: io.Scope, receive: io.Receive, send: io.Send) -> None:
        await self._asgi(scope, receive, send)

    async def respond(self, request: io.Request) -> io.Reply:
        host = request.host
        match = _HOST.match(host)
        if match is None:
            return io.Reply.text(404, f"{host or 'no host'} is not a RunPod proxy host\n")
        pod = self.cloud.pods.get(match["pod"])
        if pod is None:
            return io.Reply.text(404, f"pod {match['pod']} not found\n")
        port = int(match["port"])
        running = self.cloud.status(pod) is PodStatus.RUNNING
        server = pod.server
        if not running or port not in pod.info.http_ports or not (server and server.is_serving):
            return io.Reply.text(502, "502 Bad Gateway: the pod's service is not running\n")
        try:
            async with asyncio.timeout(self.limit_s):
                reply = await server.respond(request)
        except TimeoutError:
            return io.Reply.text(524, "524: the origin did not answer in time\n")
        except Exception:  # a service that crashed or is not listening: the CDN sees 502
            return io.Reply.text(502, "502 Bad Gateway: the pod's service is down\n")
        if reply.chunks is None:
            return reply
        return dataclasses.replace(reply, chunks=_until_silent(reply.chunks, self.limit_s))


async def _until_silent(chunks: AsyncIterator[bytes], limit_s: float) -> AsyncIterator[bytes]:
    """The stream's chunks, cut when the service is silent for longer than the CDN allows."""
    try:
        while True:
            try:
                async with asyncio.timeout(limit_s):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise io.StreamCut(f"no byte for {limit_s:g}s") from None
            yield chunk
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()


def route_by_host(api: io.ASGIApp, proxy: io.ASGIApp) -> io.ASGIApp:
    """One server for both: proxy hosts go to the proxy, everything else to the API."""

    async def app(scope: io.Scope, receive: io.Receive, send: io.Send) -> None:
        if scope["type"] == "http" and io.host_of(scope).endswith(PROXY_SUFFIX):
            await proxy(scope, receive, send)
            return
        await api(scope, receive, send)

    return app
