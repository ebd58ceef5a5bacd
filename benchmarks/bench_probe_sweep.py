"""Benchmark: one probe sweep over 1,000 fake pods that each answer after 200 ms.

Not a test (nothing asserts a time); run it by hand:

    .venv/bin/python benchmarks/bench_probe_sweep.py [--pods 1000] [--latency 0.2]
        [--concurrency 64] [--sweeps 3]

The pods sit behind one uvicorn server on 127.0.0.1 that routes by Host, as RunPod's
proxy does, in a separate process so the server's CPU time does not count against the
prober's event loop. Each sweep is what the controller does once a loop: every pod's
health and metrics paths through `Prober.probe`. It prints each sweep's wall time and
its ratio to one probe's latency. With bounded concurrency C the floor is
ceil(pods / C) x latency, i.e. a ratio of ceil(pods / C) (16 for 1,000 pods at 64).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing
import resource
import sys
import time
from multiprocessing.connection import Connection

from rpp.adapters.clock import SystemClock
from rpp.observe.prober import Prober, ProbeTarget, make_transport
from rpp.sim.inference import FakeInferencePod, HostRouter
from rpp.sim.localhttp import ServerThread


def serve(pods: int, latency_s: float, conn: Connection) -> None:
    clock = SystemClock()
    fleet = {}
    for i in range(pods):
        pod = FakeInferencePod(pod_id=f"pod{i:04d}", clock=clock)
        pod.slow(latency_s)  # every answer, health and metrics, takes this long
        fleet[pod.pod_id] = pod
    with ServerThread([HostRouter(fleet)]) as ports:
        conn.send(ports[0])
        conn.recv()  # until the benchmark says stop


async def sweep(*, port: int, pods: int, concurrency: int, sweeps: int, latency_s: float) -> int:
    targets = [ProbeTarget(pod_id=f"pod{i:04d}") for i in range(pods)]
    floor = math.ceil(pods / concurrency) * latency_s
    async with make_transport(concurrency=concurrency) as transport:
        prober = Prober(
            transport=transport,
            url_pattern=f"http://127.0.0.1:{port}",
            concurrency=concurrency,
            timeout_s=10.0,
        )
        for n in range(1, sweeps + 1):
            cpu_before = resource.getrusage(resource.RUSAGE_SELF).ru_utime
            started = time.perf_counter()
            results = await prober.probe(targets)
            wall = time.perf_counter() - started
            cpu = resource.getrusage(resource.RUSAGE_SELF).ru_utime - cpu_before
            passed = sum(r.passed for r in results.values())
            print(
                f"sweep {n}: {pods} pods, concurrency {concurrency}: {wall:.2f}s wall, "
                f"{wall / latency_s:.1f}x one probe ({latency_s * 1000:.0f} ms), "
                f"floor {floor:.2f}s, prober CPU {cpu:.2f}s, {passed}/{pods} passed"
            )
            if passed != pods:
                failures = {r.error for r in results.values() if not r.passed}
                print(f"  failures: {sorted(e or '?' for e in failures)[:5]}")
                return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per answer")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--sweeps", type=int, default=3, help="the first one opens connections")
    args = parser.parse_args()
    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.Process(
        target=serve, args=(args.pods, args.latency, theirs), daemon=True
    )
    server.start()
    try:
        port = ours.recv()
        return asyncio.run(
            sweep(
                port=port,
                pods=args.pods,
                concurrency=args.concurrency,
                sweeps=args.sweeps,
                latency_s=args.latency,
            )
        )
    finally:
        ours.send("stop")
        server.join(timeout=20)


if __name__ == "__main__":
    sys.exit(main())
