"""The prober's HTTP client (aiohttp) over real TLS, one origin per pod.

Pods are local, each its own host name over TLS with verification on, as behind RunPod's
proxy. The regression this file exists for: httpcore 1.0.9 leaked a pool slot whenever a
probe was cancelled while its connection was being set up (encode/httpcore#1093), so
episodes of slow connects around the probe timeout left the prober blind for good. Here
connects are slowed around the timeout for several sweeps, then a healthy sweep must see
every pod.
"""

from __future__ import annotations

import asyncio
import asyncio.selector_events
import asyncio.sslproto
import contextlib
import datetime as dt
import random
from collections.abc import AsyncIterator

import pytest

from rpp.adapters.clock import ManualClock
from rpp.adapters.pod_http import PodHttpClient, PodRequest
from rpp.adapters.process_memory import (
    SOCKET_READ_BUFFER,
    TLS_READ_BUFFER,
    trim_socket_buffers,
    trim_tls_buffers,
)
from rpp.observe.prober import Prober, ProbeSettings, ProbeTarget, make_client
from rpp.sim.hostile_pods import Hostile, HostilePods
from rpp.sim.localhttp import POD_DOMAIN, Loopback, pod_pattern
from tests.certificates import Certificates

START = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def certificates() -> Certificates:
    return Certificates()


class SlowConnects:
    """A TCP gate in front of a server: each new connection waits before it is let through.

    The client's connection set-up (TCP, then the TLS handshake through the gate) takes
    as long as the wait, so a probe timeout near it cancels probes mid set-up.
    """

    def __init__(self, backend_port: int, *, seed: int = 7) -> None:
        self.backend_port = backend_port
        self.delay: tuple[float, float] = (0.0, 0.0)
        self.connections = 0
        self._random = random.Random(seed)
        # Server.close() leaves relayed connections open; closed by hand so none outlives
        # the event loop and raises a ResourceWarning in a later test.
        self._writers: set[asyncio.StreamWriter] = set()

    @contextlib.asynccontextmanager
    async def serve(self) -> AsyncIterator[int]:
        server = await asyncio.start_server(self._relay, "127.0.0.1", 0, backlog=4096)
        try:
            yield int(server.sockets[0].getsockname()[1])
        finally:
            server.close()
            for writer in list(self._writers):
                writer.close()
            await asyncio.wait_for(server.wait_closed(), 5)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        try:
            await asyncio.sleep(self._random.uniform(*self.delay))
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.backend_port)
        except OSError:
            writer.close()
            return
        finally:
            self._writers.discard(writer)
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            self._writers.difference_update((writer, up_writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def test_slow_connects_cut_by_the_timeout_leave_no_pod_unprobeable(
    certificates: Certificates,
) -> None:
    pods = HostilePods(clock=ManualClock(START), hostile={})
    pod_ids = [f"pod{i:03d}" for i in range(60)]
    async with pods.serve(tls=certificates.server) as backend:
        gate = SlowConnects(backend)
        async with gate.serve() as port:
            client = PodHttpClient(ssl_context=certificates.client, resolver=Loopback())
            prober = Prober(client=client, url_pattern=pod_pattern("https", port))
            # Connects take 0-0.4 s against a 0.2 s timeout: cancelled before, during and
            # after the TLS handshake, several times over.
            gate.delay = (0.0, 0.4)
            storm = ProbeSettings(timeout_s=0.2)
            storms = [
                await prober.probe(ProbeTarget(pod_id=p, settings=storm) for p in pod_ids)
                for _ in range(4)
            ]
            gate.delay = (0.0, 0.0)
            calm = ProbeSettings(timeout_s=10.0)
            after = await prober.probe(ProbeTarget(pod_id=p, settings=calm) for p in pod_ids)
            again = await prober.probe(ProbeTarget(pod_id=p, settings=calm) for p in pod_ids)
            await client.aclose()
    cut = sum(not r.passed for sweep in storms for r in sweep.values())
    assert cut > 0  # the storm did cut probes mid set-up
    assert all(r.passed for r in after.values()), {p: r.error for p, r in after.items()}
    assert all(r.passed for r in again.values())


async def test_each_pod_keeps_its_own_connections_from_loop_to_loop(
    certificates: Certificates,
) -> None:
    pods = HostilePods(clock=ManualClock(START), hostile={})
    pod_ids = [f"pod{i:03d}" for i in range(20)]
    async with pods.serve(tls=certificates.server) as backend:
        gate = SlowConnects(backend)
        async with gate.serve() as port:
            resolver = Loopback()
            client = PodHttpClient(ssl_context=certificates.client, resolver=resolver)
            prober = Prober(client=client, url_pattern=pod_pattern("https", port))
            for _ in range(3):
                results = await prober.probe(ProbeTarget(pod_id=p) for p in pod_ids)
                assert all(r.passed for r in results.values())
            await client.aclose()
    # Health and metrics side by side: two connections and one name lookup per pod, once.
    assert gate.connections == 2 * len(pod_ids)
    assert resolver.lookups == len(pod_ids)


async def test_a_wrong_certificate_fails_the_probe_with_a_connection_error() -> None:
    other = Certificates()  # a CA the client does not trust
    trusting_nobody = Certificates().client
    pods = HostilePods(clock=ManualClock(START), hostile={})
    async with (
        pods.serve(tls=other.server) as port,
        PodHttpClient(ssl_context=trusting_nobody, resolver=Loopback()) as client,
    ):
        prober = Prober(client=client, url_pattern=pod_pattern("https", port))
        result = (await prober.probe([ProbeTarget(pod_id="pod1", metrics_token="s3cr3t")]))["pod1"]
    assert not result.passed
    assert result.error is not None
    assert "connection failed (ClientConnectorCertificateError" in result.error
    assert "s3cr3t" not in result.error


async def test_tls_bodies_arrive_whole_through_trimmed_tls_buffers(
    certificates: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pins the private attribute on the Python this project runs: if it moves, this fails
    # and `rpp run` would quietly keep 256 KiB per TLS connection.
    monkeypatch.setattr(asyncio.sslproto.SSLProtocol, "max_size", 256 * 1024)
    assert trim_tls_buffers()
    assert asyncio.sslproto.SSLProtocol.max_size == TLS_READ_BUFFER
    pods = HostilePods(
        clock=ManualClock(START), hostile={"big": (Hostile.SMALL_MANY_LINES, "metrics")}
    )
    async with (
        pods.serve(tls=certificates.server) as port,
        PodHttpClient(ssl_context=certificates.client, resolver=Loopback()) as client,
    ):
        url = pod_pattern("https", port).format(pod_id="big", port=80) + "/metrics"
        host = "big-80." + POD_DOMAIN
        request = PodRequest(url=url, host=host, user_agent="test")
        answer = await client.get(request, limit=2 * 1024 * 1024)
    assert answer.status == 200
    assert answer.body == b"a 1\n" * (1024 * 1024 // 4 - 1)


async def test_plain_bodies_arrive_whole_through_trimmed_socket_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The same pin for plain TCP: `rpp run` reads 16 KiB at a time instead of 256 KiB.
    transport = asyncio.selector_events._SelectorTransport  # type: ignore[attr-defined]
    monkeypatch.setattr(transport, "max_size", 256 * 1024)
    assert trim_socket_buffers()
    assert transport.max_size == SOCKET_READ_BUFFER
    pods = HostilePods(
        clock=ManualClock(START), hostile={"big": (Hostile.SMALL_MANY_LINES, "metrics")}
    )
    async with pods.serve() as port, PodHttpClient(resolver=Loopback()) as client:
        url = pod_pattern("http", port).format(pod_id="big", port=80) + "/metrics"
        request = PodRequest(url=url, host="big-80." + POD_DOMAIN, user_agent="test")
        answer = await client.get(request, limit=2 * 1024 * 1024)
    assert answer.status == 200
    assert answer.body == b"a 1\n" * (1024 * 1024 // 4 - 1)
    monkeypatch.setattr(transport, "max_size", 8 * 1024)
    assert not trim_socket_buffers()  # a smaller buffer is left alone
    assert transport.max_size == 8 * 1024


def test_the_tls_trim_leaves_a_smaller_buffer_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asyncio.sslproto.SSLProtocol, "max_size", 2 * 1024)
    assert not trim_tls_buffers()
    assert asyncio.sslproto.SSLProtocol.max_size == 2 * 1024


def test_one_base_url_for_every_pod_lifts_the_per_origin_limit() -> None:
    per_pod = make_client(url_pattern="https://{pod_id}-{port}.proxy.runpod.net")
    one_base = make_client(url_pattern="http://127.0.0.1:9000")
    assert per_pod.per_host == 2
    assert one_base.per_host == 0  # else every pod would share two connections
