"""Benchmark: one probe sweep over 9 hostile pods beside 20 healthy ones.

Not a test: it prints figures; run it by hand:

    .venv/bin/python benchmarks/bench_hostile_pods.py [--write]

The pods are rpp/sim/hostile_pods.py served by another process: 50 MB bodies (with their
length and chunked, on health and on metrics), million-line metrics pages (chunked and
with their length), a page of 262,143 four-byte lines just under the 1 MiB limit, and
answers trickled a byte every 100 ms (the status line, the body). Every pod is its own
host name, probed by the prober as `rpp run` builds it, with requireMetric set (every
page is parsed) and the shipped 10 s timeout. Each configuration runs in a fresh process,
so its peak resident memory is its own: the shipped limits, then PROBE_METRICS_MAX_KIB
raised to 64 MiB, which lets the million-line pages through to the parser (cut at the
probe's deadline).

Figures: the sweep's wall time and CPU, the process's peak resident memory, whether every
healthy pod passed, and the healthy pods' slowest metrics answer (other pods must not
make it slow).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import multiprocessing
import resource
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import recording

from rpp.adapters.clock import ManualClock
from rpp.adapters.pod_http import PodHttpClient
from rpp.observe.prober import DEFAULT_METRICS_LIMIT, Prober, ProbeSettings, ProbeTarget
from rpp.sim.hostile_pods import HOSTILE, HostilePods
from rpp.sim.localhttp import Loopback, pod_pattern

HEALTHY = [f"ok{i:02d}" for i in range(20)]
START = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def serve(conn: Connection) -> None:
    async def main() -> None:
        pods = HostilePods(clock=ManualClock(START), hostile=HOSTILE, latency_s=0.05)
        async with pods.serve() as port:
            conn.send(port)
            await asyncio.get_running_loop().run_in_executor(None, conn.recv)

    asyncio.run(main())


async def sweep(port: int, metrics_limit: int) -> dict[str, Any]:
    async with PodHttpClient(resolver=Loopback()) as client:
        prober = Prober(
            client=client, url_pattern=pod_pattern("http", port), metrics_limit=metrics_limit
        )
        settings = ProbeSettings(require_metric="app_queue_length")
        targets = [ProbeTarget(pod_id=p, settings=settings) for p in [*HOSTILE, *HEALTHY]]
        before = resource.getrusage(resource.RUSAGE_SELF)
        wall0 = time.perf_counter()
        results = await prober.probe(targets)
        wall = time.perf_counter() - wall0
        after = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "metrics_limit_kib": metrics_limit // 1024,
        "sweep_wall_s": wall,
        "sweep_cpu_s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
        "rss_before_mib": before.ru_maxrss / 1024,
        "peak_rss_mib": after.ru_maxrss / 1024,
        "healthy_passed": sum(results[p].passed for p in HEALTHY),
        "healthy": len(HEALTHY),
        "healthy_slowest_metrics_s": max(results[p].metrics_latency_s or 0.0 for p in HEALTHY),
        "hostile_errors": {p: results[p].error for p in HOSTILE},
    }


def child(metrics_limit: int) -> None:
    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(theirs,), daemon=True)
    server.start()
    try:
        port = ours.recv()
        print(json.dumps(asyncio.run(sweep(port, metrics_limit))))
    finally:
        ours.send("stop")
        server.join(timeout=20)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child)
        return 0
    started = recording.machine()
    runs = []
    for limit in (DEFAULT_METRICS_LIMIT, 64 * 1024 * 1024):
        done = subprocess.run(
            [sys.executable, __file__, "--child", str(limit)],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        )
        run = json.loads(done.stdout.strip().splitlines()[-1])
        runs.append(run)
        print(
            f"metrics limit {run['metrics_limit_kib']} KiB: sweep {run['sweep_wall_s']:.1f}s "
            f"wall, {run['sweep_cpu_s']:.1f}s CPU, peak RSS {run['peak_rss_mib']:.0f} MiB "
            f"({run['rss_before_mib']:.0f} before); healthy {run['healthy_passed']}/"
            f"{run['healthy']} passed, slowest healthy metrics answer "
            f"{run['healthy_slowest_metrics_s'] * 1000:.0f} ms"
        )
        for pod, error in run["hostile_errors"].items():
            print(f"  {pod}: {error}")
    if args.write:
        shipped, raised = runs
        recording.write(
            "hostile_pods",
            benchmark="benchmarks/bench_hostile_pods.py",
            what=(
                "one probe sweep of 9 hostile pods and 20 healthy ones (answering in 50 ms), "
                "requireMetric set, 10 s timeout, each configuration in a fresh process"
            ),
            started=started,
            measured={"runs": runs},
            figures={
                "peak_rss_shipped": f"{shipped['peak_rss_mib']:.0f} MiB",
                "sweep_cpu_shipped": f"{shipped['sweep_cpu_s'] * 1000:.0f} ms",
                "healthy_slowest_shipped": f"{shipped['healthy_slowest_metrics_s'] * 1000:.0f} ms",
                "peak_rss_raised": f"{raised['peak_rss_mib']:.0f} MiB",
                "sweep_cpu_raised": f"{raised['sweep_cpu_s'] * 1000:.0f} ms",
                "healthy_slowest_raised": f"{raised['healthy_slowest_metrics_s'] * 1000:.0f} ms",
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
