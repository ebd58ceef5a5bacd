"""Benchmark: probe sweeps over 1,000 fake pods, each its own origin, each answering in 200 ms.

Not a test: it asserts nothing; it prints each figure beside its goal. Run it by hand:

    .venv/bin/python benchmarks/bench_probe_sweep.py [--pods 1000] [--latency 0.2]
        [--tls] [--parse] [--concurrency N] [--sweeps 4] [--write]

What it measures: the prober as `rpp run` builds it (`make_client`, `Prober`), in
this process, against pods served by another process (so the pods' CPU is not counted).
As behind RunPod's proxy, every pod is its own host name (`pod0001-80.proxy.test`), all
resolved to 127.0.0.1 by an aiohttp resolver given to the client; `--tls` serves them
over TLS with a throwaway CA (trustme), verification on, as production does. The first
sweep opens every connection (and handshakes); the later ones reuse them, as the loops of
a running controller do. CPU is user + sys of this process. `--parse` reads every metrics
page (a pool with requireMetric, as examples/pool.yaml sets). `--write` records the runs
in benchmarks/results/probe_sweep.json.

Goals, for a steady sweep of 1,000 pods: wall time at most 1.5 x one probe's latency,
CPU at most 0.5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import resource
import ssl
import statistics
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

import recording
import trustme

from rpp.adapters.clock import SystemClock
from rpp.adapters.pod_http import PodHttpClient
from rpp.adapters.process_memory import trim_tls_buffers
from rpp.observe.prober import DEFAULT_CONCURRENCY, Prober, ProbeSettings, ProbeTarget, make_client
from rpp.sim.hostile_pods import HostilePods
from rpp.sim.localhttp import POD_DOMAIN, Loopback, pod_pattern

WALL_GOAL = 1.5  # x one probe's latency
CPU_GOAL_S = 0.5


def serve(
    latency_s: float, cert_pem: bytes | None, key_pem: bytes | None, conn: Connection
) -> None:
    tls = None
    if cert_pem is not None and key_pem is not None:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        cert = trustme.Blob(cert_pem)
        key = trustme.Blob(key_pem)
        with cert.tempfile() as cert_file, key.tempfile() as key_file:
            tls.load_cert_chain(cert_file, key_file)

    async def main() -> None:
        pods = HostilePods(clock=SystemClock(), hostile={}, latency_s=latency_s)
        async with pods.serve(tls=tls) as port:
            conn.send(port)
            await asyncio.get_running_loop().run_in_executor(None, conn.recv)

    asyncio.run(main())


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def sweeps(
    args: argparse.Namespace, port: int, client_tls: ssl.SSLContext | None
) -> list[dict[str, Any]]:
    scheme = "https" if args.tls else "http"
    pattern = pod_pattern(scheme, port)
    # As `rpp run` builds it, but for the test names (-> 127.0.0.1) and the test CA.
    client = PodHttpClient(
        per_host=make_client(url_pattern=pattern).per_host,
        ssl_context=client_tls,
        resolver=Loopback(),
    )
    prober = Prober(client=client, url_pattern=pattern, concurrency=args.concurrency)
    settings = ProbeSettings(require_metric="app_queue_length" if args.parse else None)
    targets = [
        ProbeTarget(pod_id=f"pod{i:04d}", settings=settings, read_process_start=args.parse)
        for i in range(args.pods)
    ]
    runs = []
    for n in range(1, args.sweeps + 1):
        cpu0, wall0 = cpu_s(), time.perf_counter()
        results = await prober.probe(targets)
        wall, cpu = time.perf_counter() - wall0, cpu_s() - cpu0
        passed = sum(r.passed for r in results.values())
        runs.append({"sweep": n, "wall_s": wall, "cpu_s": cpu, "passed": passed})
        ratio = wall / args.latency
        print(
            f"sweep {n}{' (opens connections)' if n == 1 else ''}: {args.pods} pods, "
            f"{scheme}: wall {wall:.2f}s = {ratio:.1f}x one probe (goal {WALL_GOAL}x), "
            f"CPU {cpu:.2f}s (goal {CPU_GOAL_S}s, {cpu / CPU_GOAL_S:.1f}x), "
            f"{passed}/{args.pods} passed",
            flush=True,
        )
        if passed != args.pods:
            errors = sorted({r.error or "?" for r in results.values() if not r.passed})
            print(f"  failures: {errors[:5]}")
    await client.aclose()
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per answer")
    parser.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY)
    parser.add_argument("--sweeps", type=int, default=4, help="the first opens connections")
    parser.add_argument("--tls", action="store_true", help="every pod over TLS")
    parser.add_argument("--parse", action="store_true", help="parse every metrics page")
    parser.add_argument("--write", action="store_true", help="write results/probe_sweep.json")
    args = parser.parse_args()
    started = recording.machine()
    cert_pem = key_pem = None
    client_tls = None
    if args.tls:
        trim_tls_buffers()  # as `rpp run` does
        ca = trustme.CA()
        leaf = ca.issue_cert(f"*.{POD_DOMAIN}")
        cert_pem = b"".join(blob.bytes() for blob in leaf.cert_chain_pems)
        key_pem = leaf.private_key_pem.bytes()
        client_tls = ssl.create_default_context()
        ca.configure_trust(client_tls)
    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.Process(
        target=serve, args=(args.latency, cert_pem, key_pem, theirs), daemon=True
    )
    server.start()
    try:
        port = ours.recv()
        runs = asyncio.run(sweeps(args, port, client_tls))
    finally:
        ours.send("stop")
        server.join(timeout=20)
    steady = runs[1:]
    wall = statistics.median(r["wall_s"] for r in steady)
    cpu = statistics.median(r["cpu_s"] for r in steady)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"steady (median of {len(steady)}): wall {wall:.2f}s ({wall / args.latency:.1f}x one "
        f"probe, goal {WALL_GOAL}x), CPU {cpu:.2f}s (goal {CPU_GOAL_S}s); peak RSS {peak:.0f} MiB"
    )
    if args.write:
        scheme = "https" if args.tls else "http"
        path = recording.write(
            "probe_sweep",
            benchmark="benchmarks/bench_probe_sweep.py",
            what=(
                f"the prober as rpp run builds it, {args.pods} pods each its own origin over "
                f"{scheme}, answering after {args.latency:g} s, concurrency {args.concurrency}, "
                f"{'every metrics page parsed' if args.parse else 'no page parsed'}; "
                "steady = sweeps after the first"
            ),
            started=started,
            measured={
                "pods": args.pods,
                "scheme": scheme,
                "parse": args.parse,
                "runs": runs,
                "steady_wall_s": recording.spread([r["wall_s"] for r in steady]),
                "steady_cpu_s": recording.spread([r["cpu_s"] for r in steady]),
                "peak_rss_mib": peak,
            },
            figures={
                "steady_sweep_cpu": f"{cpu * 1000:.0f} ms",
                "steady_sweep_wall": f"{wall * 1000:.0f} ms",
            },
        )
        print(f"written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
