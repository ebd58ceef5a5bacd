"""HTTP to the pods for the prober: an httpx transport over one aiohttp session.

Where it sits: under observe. The prober speaks httpx's transport interface
(`handle_async_request`), so the simulator hands it an in-process transport
(rpp/sim/in_process.py) and `rpp run` hands it this one; nothing above the transport
knows which library carries the bytes.

Why aiohttp underneath rather than httpx's own pool (httpcore):

- Cost per request. Behind RunPod's proxy every pod is its own origin
  (`{podId}-{port}.proxy.runpod.net`). aiohttp's connector keeps idle connections in a
  dict of queues per origin, so taking or returning one costs the same with 10 or 10,000
  pods kept alive; httpcore 1.0's pool re-checks every pooled connection on every
  request, which made it most of the controller's CPU at 1,000 pods.
- Probes never wait on each other. `limit=0` (no global cap) and `limit_per_host=2`
  (a pod's health and metrics side by side): one pod's slow or hostile answers hold
  only its own two connections.
- Cancellation. httpcore 1.0.9 leaks a pool slot when a request is cancelled while its
  new connection is being set up (encode/httpcore#1093), which is exactly what a probe
  timeout does to a slow proxy connect; enough of them leave the prober blind. aiohttp
  releases the slot (tests/test_pod_http.py holds it to that).

Settings chosen for a loop every 30 s over up to thousands of origins: keep-alive 90 s
(aiohttp's default of 15 s would reconnect, and over TLS re-handshake, every pod every
loop), DNS answers cached 5 minutes for up to 65,536 names (the default 1,000 is below a
big fleet), no cookies (a pod's cookie must never travel to another), no transport
timeouts (the prober's `asyncio.timeout` is the only deadline: a trickling answer resets
any read timeout), no redirects, no proxies from the environment, and bodies left as sent
(no Accept-Encoding, no decompression), so the prober's size caps count the bytes that
travelled.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator

import aiohttp
import httpx
from aiohttp.abc import AbstractResolver

PER_POD_CONNECTIONS = 2  # health and metrics side by side
KEEPALIVE_S = 90.0  # above the reconcile interval, so a loop reuses the last loop's connections
DNS_TTL_S = 300
DNS_CACHE_SIZE = 65_536
_CHUNK = 64 * 1024


class PodTransport(httpx.AsyncBaseTransport):
    """httpx's transport interface over one aiohttp `ClientSession` (one per event loop)."""

    def __init__(
        self,
        *,
        per_host: int = PER_POD_CONNECTIONS,
        ssl_context: ssl.SSLContext | None = None,
        resolver: AbstractResolver | None = None,
        keepalive_s: float = KEEPALIVE_S,
    ) -> None:
        if per_host < 0:
            raise ValueError(f"per_host must be 0 (no limit) or more, got {per_host}")
        self._per_host = per_host
        # One context for every pod: loading the CA bundle once, not per connection.
        self._ssl = ssl_context or ssl.create_default_context()
        self._resolver = resolver
        self._keepalive_s = keepalive_s
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def per_host(self) -> int:
        """Connections one origin may hold at once (0: no limit)."""
        return self._per_host

    def _current_session(self) -> aiohttp.ClientSession:
        # A session belongs to the loop it was made on; tests run several loops.
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            self._loop = loop
            connector = aiohttp.TCPConnector(
                limit=0,
                limit_per_host=self._per_host,
                ssl=self._ssl,
                keepalive_timeout=self._keepalive_s,
                ttl_dns_cache=DNS_TTL_S,
                dns_cache_max_size=DNS_CACHE_SIZE,
                resolver=self._resolver,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                timeout=aiohttp.ClientTimeout(total=None),
                auto_decompress=False,
                skip_auto_headers=("Accept-Encoding",),
                trust_env=False,
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._current_session()
        try:
            answer = await session.request(
                request.method,
                str(request.url),
                headers=request.headers.multi_items(),
                allow_redirects=False,
            )
        # Error texts name the failure's type and host at most, never the URL: the
        # metrics token travels in the query string.
        except aiohttp.ClientConnectorError as error:  # DNS, refused, TLS, certificate
            raise httpx.ConnectError(_connect_reason(error), request=request) from None
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError) as error:
            raise httpx.RemoteProtocolError(type(error).__name__, request=request) from None
        except aiohttp.ClientResponseError as error:  # a malformed status line or headers
            reason = f"{type(error).__name__}: HTTP {error.status}"
            raise httpx.RemoteProtocolError(reason, request=request) from None
        except (aiohttp.ClientError, OSError) as error:
            raise httpx.NetworkError(type(error).__name__, request=request) from None
        return httpx.Response(
            answer.status,
            headers=answer.raw_headers,
            stream=_Body(answer),
            request=request,
            extensions={"http_version": b"HTTP/1.1"},
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class _Body(httpx.AsyncByteStream):
    """An aiohttp answer's body as httpx's stream; the reader decides how much it takes."""

    def __init__(self, answer: aiohttp.ClientResponse) -> None:
        self._answer = answer

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._answer.content.iter_chunked(_CHUNK):
                yield chunk
        except (aiohttp.ClientError, OSError) as error:
            raise httpx.ReadError(type(error).__name__) from None

    async def aclose(self) -> None:
        # Read to the end: the connection goes back to the pool. Not (a capped read, a
        # cancelled probe): aiohttp closes it instead of draining an unknown rest.
        self._answer.release()


def _connect_reason(error: aiohttp.ClientConnectorError) -> str:
    # "Cannot connect to host X:443 ssl:... [reason]": host and port, no path or query.
    return f"{type(error).__name__}: {error}"
