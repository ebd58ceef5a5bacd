"""HTTP to the pods for the prober: one GET, its answer read up to a limit.

Where it sits: under observe. The prober asks a `PodClient` for `get(request, limit=...)`
and nothing more, so `rpp run` hands it `PodHttpClient` (aiohttp, here) and the simulator
an in-process client (rpp/sim/in_process.py); nothing above the interface knows which
carries the bytes. The interface is this small on purpose: a probe is a bodiless GET
whose status and first bytes are all that matter, and at a thousand pods, two probes
each every loop, every object built per request (an httpx request and response, their
header maps, a byte stream) was a third of the controller's CPU.

Why aiohttp (rather than httpx's own pool, httpcore):

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
  releases the slot (tests/adapters/test_pod_http.py holds it to that).

Settings chosen for a loop every 30 s over up to thousands of origins: keep-alive 90 s
(aiohttp's default of 15 s would reconnect, and over TLS re-handshake, every pod every
loop), DNS answers cached 5 minutes for up to 65,536 names (the default 1,000 is below a
big fleet), no cookies (a pod's cookie must never travel to another), no transport
timeouts (the prober's `asyncio.timeout` is the only deadline: a trickling answer resets
any read timeout), no redirects, no proxies from the environment, and bodies left as sent
(no Accept-Encoding, no decompression), so the size limit counts the bytes that travelled.

Errors name the failure's type and at most the host, never the URL: the metrics token
travels in the query string.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterable
from dataclasses import dataclass
from typing import Protocol, Self

import aiohttp
from aiohttp.abc import AbstractResolver

PER_POD_CONNECTIONS = 2  # health and metrics side by side
KEEPALIVE_S = 90.0  # above the reconcile interval, so a loop reuses the last loop's connections
DNS_TTL_S = 300
DNS_CACHE_SIZE = 65_536
_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class PodRequest:
    """A bodiless GET to one pod: the full URL (query included) and the Host to send."""

    url: str
    host: str
    user_agent: str


@dataclass(frozen=True, slots=True)
class PodAnswer:
    """A pod's answer: its status and body, or `body=None` when the body passed the limit."""

    status: int
    body: bytes | None


class PodUnreachable(Exception):
    """No answer came: no connection (DNS, refused, TLS), or the peer broke the exchange
    (closed mid-answer, sent no valid HTTP). The prober counts it as a hard failure."""


class PodRequestFailed(Exception):
    """The request could not be made at all (e.g. a URL the client refuses)."""


class PodClient(Protocol):
    """What the prober needs of HTTP: one GET, read up to `limit` bytes."""

    async def get(self, request: PodRequest, *, limit: int) -> PodAnswer: ...

    async def aclose(self) -> None: ...


class PodHttpClient:
    """`PodClient` over one aiohttp `ClientSession` (one per event loop)."""

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

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

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

    async def get(self, request: PodRequest, *, limit: int) -> PodAnswer:
        session = self._current_session()
        try:
            answer = await session.get(
                request.url,
                headers={"Host": request.host, "User-Agent": request.user_agent},
                allow_redirects=False,
            )
        except aiohttp.InvalidURL:  # no host, a bad port, a newline: nothing was sent
            raise PodRequestFailed("InvalidURL") from None
        except aiohttp.ClientConnectorError as error:  # DNS, refused, TLS, certificate
            # "Cannot connect to host X:443 ssl:... [reason]": host and port, no path.
            raise PodUnreachable(f"{type(error).__name__}: {error}") from None
        except aiohttp.ClientResponseError as error:  # a malformed status line or headers
            raise PodUnreachable(f"{type(error).__name__}: HTTP {error.status}") from None
        except (aiohttp.ClientError, OSError) as error:
            raise PodUnreachable(type(error).__name__) from None
        except ValueError as error:  # a header aiohttp will not send (a newline in it)
            raise PodRequestFailed(type(error).__name__) from None
        try:
            return PodAnswer(answer.status, await _read_capped(answer, limit))
        except (aiohttp.ClientError, OSError) as error:
            raise PodUnreachable(type(error).__name__) from None
        finally:
            # Read to the end: the connection goes back to the pool. Not (over the limit,
            # a cancelled probe): aiohttp closes it instead of draining an unknown rest.
            answer.release()

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def _read_capped(answer: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """The body, or None as soon as it is known to pass `limit` bytes: the announced
    length refuses a big answer before a byte of it is read, `read_up_to` the rest."""
    length = answer.content_length
    if length is not None and length > limit:
        return None
    return await read_up_to(answer.content.iter_chunked(_CHUNK), limit)


async def read_up_to(chunks: AsyncIterable[bytes], limit: int) -> bytes | None:
    """The chunks joined, or None as soon as they pass `limit` bytes (a chunked or lying
    answer is cut there, the rest never read). Every `PodClient` reads bodies with it."""
    parts = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
    return b"".join(parts)


def _is_a_pod_client(client: PodHttpClient) -> PodClient:
    """Never called: mypy checks here that the aiohttp client satisfies the protocol."""
    return client
