"""How much memory one RunPod pod listing costs the controller, for a huge answer.

RunPod's `GET /v2/pods` lists every pod of the account in one answer. A hostile or
broken answer can be any size; the client must not hold it all (issue 15: a 50 MB
listing used +237 MB, which a 256Mi controller cannot survive).

A plain HTTP server on 127.0.0.1 (a child process, so its memory is not counted)
answers `GET /v2/pods` with a listing of realistic pods (each with a few env values),
with its Content-Length or (chunked) without one, so the client must stop reading by
itself. For each case a fresh interpreter builds the real RunPodClient, makes one
small listing call (so imports, the HTTP pool and the JSON machinery are warm), lists
the big answer, and reports its peak resident memory (VmHWM) before and after, and how
the call ended. The cases: 50 MB with a length, 50 MB chunked, and 15 MB (under the
default 16 MiB bound, so it is read and used). With `--before DIR` the 50 MB case also
runs on the client of another checkout (the commit before the bound), for comparison.

Results: benchmarks/results/runpod_listing_memory.json (see recording.py).

    .venv/bin/python benchmarks/bench_runpod_listing_memory.py [--runs 3] [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import recording

ROOT = Path(__file__).parents[1]

SERVER = textwrap.dedent(
    """
    import http.server, sys
    big = open(sys.argv[1], "rb").read()
    chunked = sys.argv[2] == "chunked"
    small = b'{"pods": []}'

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = big if self.path.startswith("/v2/pods") and "small" not in self.path else small
            if self.headers.get("x-small"):
                body = small
            self.send_response(200)
            self.send_header("content-type", "application/json")
            if chunked and body is big:  # no length: the body ends when the server closes
                self.send_header("connection", "close")
                self.end_headers()
                try:
                    for at in range(0, len(body), 1 << 20):
                        self.wfile.write(body[at:at + (1 << 20)])
                except OSError:
                    pass  # the client stopped reading: that is the point
                self.close_connection = True
                return
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except OSError:
                pass

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
    """
)

CLIENT = textwrap.dedent(
    """
    import sys
    if len(sys.argv) > 2:  # another checkout's client: bypass this venv's editable install
        sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
        sys.path.insert(0, sys.argv[2])
    import asyncio, json, time
    import httpx
    from prometheus_client import CollectorRegistry
    from rpp.adapters.runpod.client import RunPodClient

    def peak_mb():
        # VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so it would count
        # the parent that built the listing.
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmHWM in /proc/self/status")

    async def main(url):
        async with RunPodClient(
            api_key="bench-key", base_url=url, registry=CollectorRegistry(),
            read_timeout=120, retry_deadline=1,
        ) as client:
            client._http.headers["x-small"] = "1"
            warm = await client.list_pods()
            assert warm == [], "the warm-up call must get the small listing"
            del client._http.headers["x-small"]
            before = peak_mb()
            started = time.perf_counter()
            try:
                pods = await client.list_pods()
                outcome = f"listed {len(pods)} pods"
            except Exception as error:
                outcome = f"{type(error).__name__}: {str(error)[:300]}"
            took = time.perf_counter() - started
            after = peak_mb()
        print(json.dumps({"before_mb": before, "after_mb": after, "seconds": took,
                          "outcome": outcome}))

    asyncio.run(main(sys.argv[1]))
    """
)


def listing(megabytes: float, pods_per_mb: int) -> bytes:
    """A `ListPodsResponse` of about `megabytes` MB, shaped like RunPod's pods."""
    count = max(1, int(megabytes * pods_per_mb))
    pad = "x" * 1200  # env values make a pod about 1.7 KB, as a pod with a few secrets is
    pods = [
        {
            "id": f"pod{i:011d}",
            "name": f"rpp-bench-{i:x}",
            "status": "RUNNING",
            "image": "ghcr.io/example/inference:1.4.2",
            "env": {"HF_TOKEN": f"hf_{i}{pad[:400]}", "EXTRA": pad[:800], "PORT": "80"},
            "gpu": {"id": "NVIDIA GeForce RTX 4090", "count": 1},
            "cloud": "SECURE",
            "dataCenterId": "EU-RO-1",
            "cost": 0.69,
            "createdAt": "2025-01-01T00:00:00Z",
            "ports": ["80/http"],
        }
        for i in range(count)
    ]
    return json.dumps({"pods": pods}).encode()


def measure(body: bytes, *, chunked: bool, code: str | None) -> dict[str, Any]:
    """One fresh client process listing `body` once; its memory and how the call ended."""
    scratch = ROOT / ".bench-listing.json"
    scratch.write_bytes(body)
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(scratch), "chunked" if chunked else "length"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        command = [sys.executable, "-c", CLIENT, f"http://127.0.0.1:{port}"]
        done = subprocess.run(
            command + ([code] if code else []), capture_output=True, text=True, env=env
        )
        if done.returncode:
            raise RuntimeError(done.stderr)
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        server.terminate()
        server.wait()
        scratch.unlink(missing_ok=True)
    result["growth_mb"] = result["after_mb"] - result["before_mb"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", help="a checkout of the commit before the bound")
    parser.add_argument("--pods-per-mb", type=int, default=645)
    args = parser.parse_args()
    started = recording.machine()
    big, under = listing(50.0, args.pods_per_mb), listing(15.0, args.pods_per_mb)
    cases = {
        "big_with_length": (big, False, None),
        "big_chunked": (big, True, None),
        "under_the_bound": (under, False, None),
    }
    if args.before:
        cases["big_before_the_bound"] = (big, False, args.before)
    measured: dict[str, Any] = {
        "listing_mb": {"big": len(big) / 1e6, "under_the_bound": len(under) / 1e6},
        "pods": {"big": big.count(b'"dataCenterId"'), "under": under.count(b'"dataCenterId"')},
    }
    for name, (body, chunked, code) in cases.items():
        runs = [measure(body, chunked=chunked, code=code) for _ in range(args.runs)]
        measured[name] = {
            "runs": runs,
            "growth_mib": recording.spread([r["growth_mb"] for r in runs]),
            "outcome": runs[-1]["outcome"],
        }
        print(f"{name}: +{measured[name]['growth_mib']['median']:.0f} MiB, {runs[-1]['outcome']}")

    def mib(name: str) -> str:
        return f"{measured[name]['growth_mib']['median']:.0f} MiB"

    figures = {
        "big_listing": f"{len(big) / 1e6:.0f} MB",
        "under_listing": f"{len(under) / 1e6:.0f} MB",
        "big_with_length": mib("big_with_length"),
        "big_chunked": mib("big_chunked"),
        "under_the_bound": mib("under_the_bound"),
    }
    if args.before:
        figures["big_before_the_bound"] = mib("big_before_the_bound")
    path = recording.write(
        "runpod_listing_memory",
        benchmark="benchmarks/bench_runpod_listing_memory.py",
        what="peak resident memory one RunPod pod listing adds to a fresh client process "
        "(VmHWM after minus before), for 50 MB with and without a length and 15 MB, with "
        "the default 16 MiB bound"
        + ("; and 50 MB on the client before the bound" if args.before else ""),
        started=started,
        measured=measured,
        figures=figures,
    )
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
