"""Hostile pods through the real prober and its real HTTP client, beside healthy pods.

Each pod is its own host name, as behind RunPod's proxy, resolved to the local server.
What a hostile pod sends (a 50 MB body, a million-line metrics page, a trickled answer)
must cost it its own verdict only: the healthy pods pass, every hostile one fails with an
error that names what it broke, and memory stays bounded by the read limits.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import tracemalloc
from typing import Any

import pytest

from rpp.adapters.clock import ManualClock
from rpp.adapters.pod_http import PodHttpClient
from rpp.observe.metrics_text import MetricsTextError, parse_metrics_page_within
from rpp.observe.prober import Prober, ProbeSettings, ProbeTarget
from rpp.sim.hostile_pods import HOSTILE, HostilePods
from rpp.sim.localhttp import Loopback, pod_pattern

START = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
HEALTH_OVER = "answer over the 64 KiB limit (PROBE_HEALTH_MAX_KIB)"
METRICS_OVER = "answer over the 1 MiB limit (PROBE_METRICS_MAX_KIB)"


async def test_hostile_pods_fail_alone_with_the_limit_they_broke_and_memory_stays_bounded() -> (
    None
):
    pods = HostilePods(clock=ManualClock(START), hostile=HOSTILE, latency_s=0.05)
    healthy = [f"ok{i}" for i in range(20)]
    # Every pool in examples/pool.yaml requires a metric: every page is parsed.
    settings = ProbeSettings(require_metric="app_queue_length", timeout_s=3.0)
    async with pods.serve() as port, PodHttpClient(resolver=Loopback()) as client:
        prober = Prober(client=client, url_pattern=pod_pattern("http", port))
        targets = [ProbeTarget(pod_id=p, settings=settings) for p in [*HOSTILE, *healthy]]
        tracemalloc.start()
        try:
            results = await prober.probe(targets)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        again = await prober.probe(ProbeTarget(pod_id=p, settings=settings) for p in healthy)

    assert all(results[p].passed for p in healthy), {p: results[p].error for p in healthy}
    assert all(r.passed for r in again.values())
    errors: dict[str, Any] = {p: results[p].error for p in HOSTILE}
    assert not any(results[p].passed for p in HOSTILE)
    assert errors["hugehealth"] == f"health /health: {HEALTH_OVER}"
    assert (
        errors["hugechunked"] == f"health /health: {HEALTH_OVER}; metrics /metrics: {METRICS_OVER}"
    )
    assert errors["hugemetrics"] == f"metrics /metrics: {METRICS_OVER}"
    assert errors["lines"] == f"metrics /metrics: {METRICS_OVER}"
    assert errors["linessized"] == f"metrics /metrics: {METRICS_OVER}"
    # Under the limit: parsed in chunks until the pod's deadline, whichever comes first.
    assert errors["smalllines"] in (
        "metrics /metrics: required metric 'app_queue_length' is missing",
    ) or errors["smalllines"].startswith("metrics /metrics: page not parsed within the probe's")
    assert errors["slowhead"] == (
        "health /health: timed out after 3s; metrics /metrics: timed out after 3s"
    )
    assert errors["slowbody"] == "metrics /metrics: timed out after 3s"
    assert errors["slowhealth"] == "health /health: timed out after 3s"
    # 450 MB were on offer; the limits let in about 1 MiB per metrics page, parsed a
    # chunk at a time.
    assert peak < 48 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB"


async def test_a_page_parse_gives_up_at_the_deadline_and_says_how_far_it_got() -> None:
    page = "# TYPE h histogram\n" + "".join(f'h_bucket{{le="{i}"}} 1\n' for i in range(5000))
    loop = asyncio.get_running_loop()
    with pytest.raises(
        MetricsTextError, match=r"page not parsed within the probe's time \(1000 of 5002 lines\)"
    ):
        await parse_metrics_page_within(page, deadline=loop.time() - 1)
    parsed = await parse_metrics_page_within(page, deadline=loop.time() + 3600)
    assert parsed.has_metric("h")
    assert parsed.has_metric("h_bucket")


async def test_other_tasks_run_while_a_long_page_is_parsed() -> None:
    page = "".join(f"m{i} 1\n" for i in range(10_000))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    loop = asyncio.get_running_loop()
    parsed = await parse_metrics_page_within(page, deadline=loop.time() + 3600)
    task.cancel()
    assert parsed.has_metric("m9999")
    assert ticks - before >= 9  # a turn for the others between each of the 10 chunks
