"""Benchmark: the real controller process (`rpp run`) over real HTTP at 100 and 1,000 members.

Not a test: run it by hand (about 5 minutes per size on a 2-core machine):

    .venv/bin/python benchmarks/bench_fleet.py [--sizes 5x20,50x20] [--tls] [--loops 5]
        [--profile] [--memory] [--no-write]

What runs, each in its own process, all on 127.0.0.1:

- `rpp fake-runpod`: RunPod's REST API, GraphQL and pod proxy, with POOLS x MEMBERS pods
  already running (the scenario's `existing` pods, named with each pool's namePrefix), each
  answering every request after 200 ms; `--tls` serves it over TLS with a throwaway CA.
- rpp/sim/kube_standin.py: a Kubernetes API stand-in (not kmock, whose request history
  slows it down over minutes), holding the pools, their env Secrets and slot ConfigMaps.
- `rpp run` itself, reconciling every 30 s, as deployed but for one thing: the names
  `{podId}-80.proxy.runpod.net` resolve to 127.0.0.1 (aiohttp's resolver is wrapped before
  `rpp`'s main runs), so every pod is its own origin, as behind RunPod's proxy.

It waits until every pool holds its members Ready, then measures LOOPS loops of the steady
fleet: the controller's CPU (user + sys, from /proc) per 30 s loop, from one loop start to
the next (seen as the stand-in's pool listings, so the controller is not asked), its
resident memory at the end and its peak, the RunPod API calls per loop (its own /metrics,
scraped once a loop, as a Prometheus would), and the longest pool reconcile in each loop
(from runpod_pool_reconcile_seconds: the pools reconcile at once, and a reconcile holds
the pool's probe sweep plus its Kubernetes reads and status write, so this is an upper
bound on the sweep's wall time). Without PROMETHEUS_URL.

Every figure is printed beside its goal and their ratio; the exit status is 1 when a goal
is missed by more than 2x (for people; nothing in CI runs this). The results go to
benchmarks/results/fleet.json (date, machine, load); docs/install.md's sizing table is
generated from that file (benchmarks/sizing_table.py).

Where the time and memory go, for the largest size (neither writes results: the tracing
costs CPU and memory of its own): --profile prints a cProfile of the steady loops;
--memory prints benchmarks/fleet_census.py's census of the process after them (malloc,
pymalloc's arenas, resident memory by mapping, what the steady loops allocated and still
hold, live objects by type).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import fleet_census
import httpx
import profile_text
import recording
import trustme
import yaml
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).parents[1]
BENCH = Path(__file__).parent
NS = "bench"
GROUP = "runpodpool.ownego.com"
GPU = "NVIDIA GeForce RTX 4090"
IMAGE = "ghcr.io/example/inference:1.4.2"
TEMPLATE = "tpl-bench"
DATACENTERS = ["EU-RO-1", "EU-SE-1", "EU-CZ-1", "EU-NL-1", "US-TX-3"]
TOKEN = "bench-metrics-token"
LATENCY_S = 0.2
INTERVAL_S = 30
SCRAPE_AFTER_S = 20.0
EXTRA_ENV: dict[str, str] = {}  # --env: settings tried on rpp run (results not written)
CAPACITY_CPU_S = 10.0  # a loop's CPU kept under a third of the 30 s interval, on one core

GOALS = {
    "cpu_s_per_loop": 1.0,  # at 1,000 members
    "rss_mib": 80.0,
    "reconcile_wall_s": 1.5 * LATENCY_S,
    "runpod_calls_per_loop": 2.0,
}

# Run `rpp run` with every RunPod proxy name resolving to this machine, and without the
# packages only the dev extra installs (some libraries import optional extras when they are
# present: httpx its CLI's rich, kubernetes.aio kubernetes_validate), as in the image.
CONTROLLER = """
import os, sys
for name in os.environ.pop("RPP_BENCH_NOT_INSTALLED", "").split(","):
    if name and name not in sys.modules:
        sys.modules[name] = None
# aiohttp's resolver, not socket.getaddrinfo, which an event loop may bypass (uvloop does).
import aiohttp.resolver
_resolve = aiohttp.resolver.ThreadedResolver.resolve
async def _loopback(self, host, *args, **kwargs):
    if host.endswith(".proxy.runpod.net"):
        host = "127.0.0.1"
    return await _resolve(self, host, *args, **kwargs)
aiohttp.resolver.ThreadedResolver.resolve = _loopback
profile, census = sys.argv[1], sys.argv[2]
from rpp.cli import main
sys.argv = ["rpp", "run"]
if profile or census:  # SIGUSR1: the steady loops start; SIGUSR2: they end
    import cProfile, gc, json, signal, time
    import fleet_census
    # CPU time, not wall time: on a shared machine a wall clock charges whatever ran
    # when the process was descheduled.
    profiler = cProfile.Profile(time.thread_time)
    collected = {"0": [0, 0.0], "1": [0, 0.0], "2": [0, 0.0]}
    began = [0.0]
    def tally(phase, info):
        if phase == "start":
            began[0] = time.thread_time()
        else:
            row = collected[str(info["generation"])]
            row[0] += 1
            row[1] += time.thread_time() - began[0]
    def start(*_):
        if profile:
            gc.callbacks.append(tally)
            profiler.enable()
        if census:
            fleet_census.start_tracing()
    def stop(*_):
        if profile:
            profiler.disable()
            gc.callbacks.remove(tally)
            profiler.dump_stats(profile + ".part")
            with open(profile + ".gc.json", "w") as out:
                json.dump(collected, out)
            os.replace(profile + ".part", profile)
        if census:
            fleet_census.write_census(census)
    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
sys.exit(main())
"""


def not_installed_in_production() -> list[str]:
    """Top-level modules of this venv outside the runtime dependencies of the package."""
    from importlib import metadata

    from packaging.markers import Marker
    from packaging.requirements import Requirement

    def key(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    keep: set[str] = set()
    todo = ["runpod-pool-controller"]
    while todo:
        name = todo.pop()
        if key(name) in keep:
            continue
        keep.add(key(name))
        try:
            requirements = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in requirements:
            req = Requirement(text)
            if req.marker is None or Marker(str(req.marker)).evaluate({"extra": ""}):
                todo.append(req.name)
    return sorted(
        module
        for module, dists in metadata.packages_distributions().items()
        if not any(key(d) in keep for d in dists) and not module.startswith("_")
    )


def pool(index: int, members: int) -> dict[str, Any]:
    obj = yaml.safe_load((ROOT / "examples" / "pool.yaml").read_text())
    name = f"pool{index:02d}"
    obj["metadata"] = {"name": name, "namespace": NS}
    spec = obj["spec"]
    spec.update(
        dryRun=False,
        templateId=TEMPLATE,
        image=IMAGE,
        gpuTypes=[GPU],
        namePrefix=f"rpp-{name}-",
        replicas={"min": members, "max": members},
        maxPerDatacenter=members,
        datacenters={"allow": DATACENTERS, "deny": []},
        limits={
            "maxPods": 2 * members,
            "maxHourlyCostUsd": 100.0,
            "maxCreatesPerHour": 2 * members,
            "estimatedPodCostUsd": 0.7,
        },
        envFromSecret=f"{name}-env",
    )
    spec["nginx"].update(
        configMap=f"{name}-nginx-config",
        slotsConfigMap=f"{name}-nginx-slots",
        service=name,
        slotPorts=members + 1,
    )
    spec["prometheus"]["job"] = name
    return obj


def scenario(pools: int, members: int) -> dict[str, Any]:
    existing = [
        {
            "name": f"rpp-pool{p:02d}-m{m:03d}",
            "gpuType": GPU,
            "datacenter": DATACENTERS[m % len(DATACENTERS)],
            "image": IMAGE,
            "env": {"METRICS_TOKEN": TOKEN},
        }
        for p in range(pools)
        for m in range(members)
    ]
    stock = [
        {"datacenter": dc, "gpuType": GPU, "count": pools * members, "costPerHr": 0.69}
        for dc in DATACENTERS
    ]
    return {
        "cloud": {
            "seed": 7,
            "bootTime": "1s",
            "templates": [{"id": TEMPLATE, "image": IMAGE}],
            "stock": stock,
            "existing": existing,
        }
    }


class Process:
    """A child process whose first stdout line names its port; its log goes to a file.

    (A pipe nobody reads would stop the process once its buffer is full of log lines.)
    """

    def __init__(
        self, args: list[str], *, log: Path, env: dict[str, str] | None = None, port: bool = True
    ) -> None:
        self.log = log
        out = log.open("w")
        self.popen = subprocess.Popen(
            args,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE if port else out,
            stderr=out,
            text=True,
        )

    def port(self) -> int:
        assert self.popen.stdout is not None
        line = self.popen.stdout.readline()
        if not line:
            raise SystemExit(f"{self.popen.args[:3]} stopped: {self.stderr()}")
        return int(line.rstrip().rsplit(":", 1)[-1].split()[-1])

    def stderr(self) -> str:
        return self.log.read_text()[-2000:]

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def memory_mib(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


def scrape(client: httpx.Client, url: str) -> dict[str, Any]:
    """Reconcile sums and counts per pool, and RunPod calls, from the controller's /metrics."""
    text = client.get(url).text
    counts: dict[str, float] = {}
    sums: dict[str, float] = {}
    calls = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "runpod_pool_reconcile_seconds_count":
                counts[s.labels["pool"]] = s.value
            elif s.name == "runpod_pool_reconcile_seconds_sum":
                sums[s.labels["pool"]] = s.value
            elif s.name == "runpod_pool_runpod_api_calls_total":
                calls += s.value
    return {"counts": counts, "sums": sums, "calls": calls}


@contextmanager
def fleet(
    pools: int, members: int, *, tls: bool, profile: str, census: str
) -> Iterator[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="rpp-fleet-") as tmp:
        work = Path(tmp)
        (work / "cloud.yaml").write_text(yaml.safe_dump(scenario(pools, members)))
        fake_args = [
            sys.executable, "-m", "rpp", "fake-runpod", "--port", "0",
            "--scenario", str(work / "cloud.yaml"), "--pod-latency", str(LATENCY_S),
        ]  # fmt: skip
        env = {"PATH": os.environ.get("PATH", "")}
        if tls:
            ca = trustme.CA()
            leaf = ca.issue_cert("*.proxy.runpod.net", "127.0.0.1")
            leaf.cert_chain_pems[0].write_to_path(str(work / "cert.pem"))
            leaf.private_key_pem.write_to_path(str(work / "key.pem"))
            ca.cert_pem.write_to_path(str(work / "ca.pem"))
            fake_args += ["--certfile", str(work / "cert.pem"), "--keyfile", str(work / "key.pem")]
            env["SSL_CERT_FILE"] = str(work / "ca.pem")
        scheme = "https" if tls else "http"
        fake = Process(fake_args, log=work / "fake-runpod.log")
        kube = Process(
            [sys.executable, "-m", "rpp.sim.kube_standin", "--port", "0"], log=work / "kube.log"
        )
        controller: Process | None = None
        try:
            fake_port, kube_port = fake.port(), kube.port()
            api = f"http://127.0.0.1:{kube_port}"
            with httpx.Client(timeout=30) as client:
                seed(client, api, pools=pools, members=members)
            (work / "kubeconfig").write_text(
                yaml.safe_dump(
                    {
                        "apiVersion": "v1",
                        "kind": "Config",
                        "clusters": [{"name": "c", "cluster": {"server": api}}],
                        "users": [{"name": "u", "user": {"token": "bench"}}],
                        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                        "current-context": "x",
                    }
                )
            )
            listen = free_port()
            env.update(
                KUBECONFIG=str(work / "kubeconfig"),
                RUNPOD_API_KEY="bench-key",
                NAMESPACE=NS,
                RECONCILE_INTERVAL=str(INTERVAL_S),
                LISTEN_ADDRESS=f"127.0.0.1:{listen}",
                RUNPOD_API_URL=f"{scheme}://127.0.0.1:{fake_port}",
                RUNPOD_PROXY_URL=f"{scheme}://{{pod_id}}-{{port}}.proxy.runpod.net:{fake_port}",
                POD_NAME="rpp-bench",
                PYTHONPATH=os.pathsep.join([str(ROOT), str(BENCH)]),
                RPP_BENCH_FRAMES=os.environ.get("RPP_BENCH_FRAMES", "1"),
                RPP_BENCH_NOT_INSTALLED=",".join(not_installed_in_production()),
            )
            env.update(EXTRA_ENV)
            controller = Process(
                [sys.executable, "-c", CONTROLLER, profile, census],
                log=work / "rpp-run.log",
                env=env,
                port=False,
            )
            yield {
                "pid": controller.popen.pid,
                "api": api,
                "metrics": f"http://127.0.0.1:{listen}/metrics",
                "process": controller,
                "fake_pid": fake.popen.pid,
                "kube_pid": kube.popen.pid,
            }
        finally:
            if controller is not None:
                controller.stop()
            fake.stop()
            kube.stop()


def seed(client: httpx.Client, api: str, *, pools: int, members: int) -> None:
    core = f"{api}/api/v1/namespaces/{NS}"
    token = base64.b64encode(TOKEN.encode()).decode()
    for i in range(pools):
        obj = pool(i, members)
        name = obj["metadata"]["name"]
        client.post(
            f"{core}/secrets",
            json={"metadata": {"name": f"{name}-env"}, "data": {"METRICS_TOKEN": token}},
        ).raise_for_status()
        client.post(
            f"{core}/configmaps", json={"metadata": {"name": f"{name}-nginx-slots"}, "data": {}}
        ).raise_for_status()
        client.post(
            f"{api}/apis/{GROUP}/v1alpha1/namespaces/{NS}/runpodpools", json=obj
        ).raise_for_status()


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ready_pools(client: httpx.Client, api: str, members: int) -> int:
    listed = client.get(f"{api}/apis/{GROUP}/v1alpha1/namespaces/{NS}/runpodpools").json()
    return sum(1 for p in listed["items"] if (p.get("status") or {}).get("ready") == members)


def measure(
    pools: int, members: int, *, tls: bool, loops: int, profile: str = "", census: str = ""
) -> dict[str, Any]:
    print(f"== {pools} pools x {members} members, {'https' if tls else 'http'}", flush=True)
    with (
        fleet(pools, members, tls=tls, profile=profile, census=census) as f,
        httpx.Client(timeout=30) as client,
    ):
        pid = f["pid"]
        started = time.monotonic()
        while ready_pools(client, f["api"], members) < pools:
            if f["process"].popen.poll() is not None:
                raise SystemExit(f"rpp run stopped: {f['process'].stderr()}")
            if time.monotonic() - started > 20 * INTERVAL_S:
                listed = client.get(
                    f"{f['api']}/apis/{GROUP}/v1alpha1/namespaces/{NS}/runpodpools"
                )
                status = listed.json()["items"][0].get("status") or {}
                print(json.dumps(status, indent=1)[:6000])
                raise SystemExit("the pools did not fill in 20 loops")
            time.sleep(1)
        fill_s = time.monotonic() - started
        cpu_fill = cpu_s(pid)
        print(f"  every pool Ready after {fill_s:.0f}s, {cpu_fill:.1f}s CPU", flush=True)
        # A loop starts when the controller lists its pools. CPU is read at each start, so a
        # row is one whole 30 s period; /metrics is scraped once per loop, 20 s into it (as a
        # Prometheus would, every 30 s), for the reconcile times and RunPod calls.
        rows = []
        start = next_loop(client, f["api"], lists_so_far(client, f["api"]))
        if profile or census:
            os.kill(pid, signal.SIGUSR1)  # the steady loops only, not the start and fill
        cpu0 = cpu_s(pid)
        time.sleep(SCRAPE_AFTER_S)
        scraped = scrape(client, f["metrics"])
        while len(rows) < loops:
            start = next_loop(client, f["api"], start)
            cpu1 = cpu_s(pid)
            time.sleep(SCRAPE_AFTER_S)
            now = scrape(client, f["metrics"])
            sums = now["sums"]
            walls = [sums[p] - scraped["sums"].get(p, 0.0) for p in sums]
            row = {
                "cpu_s": cpu1 - cpu0,
                "runpod_calls": now["calls"] - scraped["calls"],
                "reconcile_wall_max_s": max(walls),
                "reconcile_wall_median_s": statistics.median(walls),
            }
            rows.append(row)
            print(
                f"  loop {len(rows)}: CPU {row['cpu_s']:.2f}s, longest reconcile "
                f"{row['reconcile_wall_max_s']:.2f}s, RunPod calls {row['runpod_calls']:.0f}",
                flush=True,
            )
            cpu0, scraped = cpu1, now
        if profile or census:
            os.kill(pid, signal.SIGUSR2)
            for _ in range(600):  # a census of a big heap takes a while on a busy machine
                if all(Path(p).exists() for p in (profile, census) if p):
                    break
                time.sleep(0.5)
        mem = memory_mib(pid)
        others = {"fake_runpod_cpu_s": cpu_s(f["fake_pid"]), "kube_cpu_s": cpu_s(f["kube_pid"])}
    return {
        "pools": pools,
        "members": pools * members,
        "scheme": "https" if tls else "http",
        "fill_s": fill_s,
        "cpu_s_until_filled": cpu_fill,
        "loops": rows,
        "cpu_s_per_loop": recording.spread([r["cpu_s"] for r in rows]),
        "reconcile_wall_max_s": recording.spread([r["reconcile_wall_max_s"] for r in rows]),
        "runpod_calls_per_loop": recording.spread([r["runpod_calls"] for r in rows]),
        "rss_mib": mem["VmRSS"],
        "peak_rss_mib": mem["VmHWM"],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        **others,
    }


def lists_so_far(client: httpx.Client, api: str) -> int:
    """How many times the controller has listed its pools: once per loop."""
    return int(client.get(f"{api}/_standin/lists").json().get("runpodpools", 0))


def next_loop(client: httpx.Client, api: str, seen: int) -> int:
    """Wait for the controller's next list of the pools (a loop start); the new count."""
    while (lists := lists_so_far(client, api)) <= seen:
        time.sleep(0.1)
    return lists


def verdicts(size: dict[str, Any]) -> list[tuple[str, float, float]]:
    """(what, measured, goal) for one size."""
    return [
        ("CPU per 30 s loop (s)", size["cpu_s_per_loop"]["median"], GOALS["cpu_s_per_loop"]),
        ("resident memory, steady (MiB)", size["rss_mib"], GOALS["rss_mib"]),
        (
            "longest pool reconcile, incl. its probe sweep (s)",
            size["reconcile_wall_max_s"]["median"],
            GOALS["reconcile_wall_s"],
        ),
        (
            "RunPod calls per loop",
            size["runpod_calls_per_loop"]["median"],
            GOALS["runpod_calls_per_loop"],
        ),
    ]


def main() -> int:
    global INTERVAL_S
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5x20,50x20", help="POOLSxMEMBERS, comma-separated")
    parser.add_argument("--tls", action="store_true", help="pods and RunPod over TLS")
    parser.add_argument("--loops", type=int, default=5, help="steady loops measured per size")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="cProfile the largest size's steady loops (its CPU figures then include the "
        "profiler's cost: not written)",
    )
    parser.add_argument(
        "--memory",
        action="store_true",
        help="after the largest size's steady loops, print malloc's heap and the live objects "
        "by type (a census taken inside rpp run on a signal; not written)",
    )
    parser.add_argument(
        "--write-profile",
        action="store_true",
        help="with --profile or --memory: write the profile or census to "
        "benchmarks/results/profiles/ and the profile's shares to "
        "benchmarks/results/fleet_profile*.json",
    )
    parser.add_argument("--no-write", action="store_true", help="do not write fleet.json")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for rpp run, e.g. PROBE_CONCURRENCY=250 (to compare; not written)",
    )
    parser.add_argument(
        "--refigure", action="store_true", help="recompute the results' figures, run nothing"
    )
    parser.add_argument(
        "--interval", type=int, default=INTERVAL_S, help="RECONCILE_INTERVAL (for a quick try)"
    )
    args = parser.parse_args()
    if args.refigure:
        refigure()
        return 0
    INTERVAL_S = args.interval
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            parser.error(f"--env {item!r}: give NAME=VALUE")
        EXTRA_ENV[name] = value
        args.no_write = True
    if args.profile or args.memory:
        args.no_write = True
    if args.interval != 30:
        args.no_write = True  # the goals and the docs are per 30 s loop
        global SCRAPE_AFTER_S
        SCRAPE_AFTER_S = args.interval * 2 / 3
    started = recording.machine()
    sizes = [tuple(int(n) for n in s.split("x")) for s in args.sizes.split(",")]
    measured = []
    out = Path(tempfile.mkdtemp(prefix="rpp-fleet-profile-"))
    for i, (pools, members) in enumerate(sizes):
        last = i == len(sizes) - 1
        profile = str(out / "fleet.prof") if args.profile and last else ""
        census = str(out / "census.json") if args.memory and last else ""
        measured.append(
            measure(pools, members, tls=args.tls, loops=args.loops, profile=profile, census=census)
        )
        if profile:
            report_profile(profile, measured[-1], started=started, write=args.write_profile)
        if census:
            report_census(census, measured[-1], started=started, write=args.write_profile)
    worst = 0.0
    for size in measured:
        print(f"{size['members']} members ({size['scheme']}):")
        for what, value, goal in verdicts(size):
            ratio = value / goal if goal else 0.0
            worst = max(worst, ratio) if size["members"] >= 1000 else worst
            print(f"  {what}: {value:.2f} (goal {goal:g}, {ratio:.2f}x)")
    if len(measured) > 1:
        small, large = measured[0], measured[-1]
        growth = large["cpu_s_per_loop"]["median"] / small["cpu_s_per_loop"]["median"]
        print(f"CPU growth {small['members']} -> {large['members']} members: {growth:.1f}x")
    if not args.no_write:
        write(started, measured, tls=args.tls)
    return 1 if worst > 2.0 else 0


def profile_header(kind: str, size: dict[str, Any], started: dict[str, Any]) -> list[str]:
    cpu = size["cpu_s_per_loop"]
    return [
        f"# benchmarks/bench_fleet.py {kind}: rpp run's steady loops",
        f"command: {profile_text.command_line()}",
        f"date: {started['date']}; machine: {started['cpu']}, {started['cpus']} CPUs, "
        f"Python {started['python']}",
        f"load average at start: {started['load_average_at_start']}, "
        f"at end: {size['load_average_at_end']}",
        f"fleet: {size['pools']} pools, {size['members']:,} members over {size['scheme']}, "
        f"{len(size['loops'])} loops of {INTERVAL_S} s; the process's CPU per loop while "
        f"traced: median {cpu['median']:.2f} s (min {cpu['min']:.2f}, max {cpu['max']:.2f}; "
        "the tracing's own cost included)",
    ]


def report_profile(
    path: str, size: dict[str, Any], *, started: dict[str, Any], write: bool
) -> None:
    import pstats

    stats = pstats.Stats(path)
    collected = json.loads(Path(path + ".gc.json").read_text())
    total = profile_text.total_s(stats)
    gc_s = sum(seconds for _, seconds in collected.values())
    extra = [
        "",
        f"garbage collection (inside the areas above): {gc_s:.2f} s, "
        f"{100 * gc_s / total:.1f}% of the profiled CPU; collections by generation: "
        + ", ".join(f"gen{g} {n} ({s:.2f} s)" for g, (n, s) in collected.items()),
    ]
    header = profile_header("--profile", size, started)
    text = profile_text.render(stats, header=header, extra=extra)
    print(text)
    if not write:
        return
    suffix = f"{size['pools']}x{size['members'] // size['pools']}"
    tls = "_tls" if size["scheme"] == "https" else ""
    written = profile_text.write(f"fleet_cpu_{suffix}{tls}.txt", text)
    figures = profile_text.shares(stats)
    figures["gc_share"] = f"{100 * gc_s / total:.0f}%"
    results = recording.write(
        f"fleet_profile{tls}",
        benchmark="benchmarks/bench_fleet.py",
        what=(
            f"cProfile (main thread's CPU) of rpp run's steady loops at {size['members']:,} "
            f"members over {size['scheme']}, as bench_fleet.py --profile --write-profile runs "
            f"them; shares of the profiled CPU by area; the text is {written.relative_to(ROOT)}"
        ),
        started=started,
        measured={
            "profiled_cpu_s": total,
            "areas": profile_text.areas(stats)[:20],
            "gc": collected,
            "size": {k: size[k] for k in ("pools", "members", "scheme", "cpu_s_per_loop")},
        },
        figures=figures,
    )
    print(f"written to {written.relative_to(ROOT)} and {results.relative_to(ROOT)}")


def report_census(
    path: str, size: dict[str, Any], *, started: dict[str, Any], write: bool
) -> None:
    from contextlib import redirect_stdout
    from io import StringIO

    buffer = StringIO()
    with redirect_stdout(buffer):
        fleet_census.print_census(path)
    rss = f"{size['rss_mib']:.0f} MiB, peak {size['peak_rss_mib']:.0f} MiB"
    header = [
        *profile_header("--memory", size, started),
        f"resident memory at the end: {rss} (tracemalloc's own tables included)",
        "",
    ]
    text = "\n".join(header) + buffer.getvalue()
    print(text)
    if not write:
        return
    suffix = f"{size['pools']}x{size['members'] // size['pools']}"
    tls = "_tls" if size["scheme"] == "https" else ""
    written = profile_text.write(f"fleet_memory_{suffix}{tls}.txt", text)
    body = json.loads(Path(path).read_text())
    pymalloc, malloc = body["pymalloc"], body["malloc"]
    arenas = pymalloc.get("arenas allocated current", 0) * 2**20  # 1 MiB arenas
    figures = {
        "rss": f"{size['rss_mib']:.0f} MiB",
        "pymalloc_arenas": f"{arenas / 2**20:.0f} MiB",
        "pymalloc_in_use": f"{pymalloc.get('bytes in allocated blocks', 0) / 2**20:.0f} MiB",
        "malloc_heap": f"{malloc['arena'] / 2**20:.0f} MiB",
        "malloc_in_use": f"{malloc['uordblks'] / 2**20:.0f} MiB",
        "malloc_free": f"{malloc['fordblks'] / 2**20:.0f} MiB",
        "tracked_objects": f"{body['gc_objects']:,} objects",
    }
    results = recording.write(
        f"fleet_memory{tls}",
        benchmark="benchmarks/bench_fleet.py",
        what=(
            f"bench_fleet.py --memory --write-profile: the census of rpp run after its steady "
            f"loops at {size['members']:,} members over {size['scheme']} (tracemalloc on during "
            f"them); the text is {written.relative_to(ROOT)}"
        ),
        started=started,
        measured={
            "pymalloc": pymalloc,
            "malloc": malloc,
            "rss_by_mapping": body["rss_by_mapping"],
            "gc_objects": body["gc_objects"],
            "size": {k: size[k] for k in ("pools", "members", "scheme", "rss_mib")},
        },
        figures=figures,
    )
    print(f"written to {written.relative_to(ROOT)} and {results.relative_to(ROOT)}")


def figures_of(measured: list[dict[str, Any]]) -> dict[str, str]:
    """The texts the docs may quote, each derived from the measured sizes only."""
    figures = {}
    for size in measured:
        n = size["members"]
        cpu = size["cpu_s_per_loop"]["median"]
        figures[f"cpu_per_loop_{n}"] = f"{cpu * 1000:.0f} ms"
        figures[f"millicores_{n}"] = f"{cpu / 30 * 1000:.0f} millicores"
        figures[f"rss_{n}"] = f"{size['rss_mib']:.0f} MiB"
        figures[f"peak_rss_{n}"] = f"{size['peak_rss_mib']:.0f} MiB"
        figures[f"reconcile_wall_{n}"] = f"{size['reconcile_wall_max_s']['median'] * 1000:.0f} ms"
        figures[f"cpu_per_member_{n}"] = f"{cpu / n * 1e6:.0f} µs"
    if len(measured) >= 2:
        # A straight line through the smallest and the largest size: the fixed cost of a
        # loop (or of the process) and the cost of each member, then how many members one
        # core holds with a loop's CPU at a third of the interval.
        small, large = measured[0], measured[-1]
        members = large["members"] - small["members"]
        cpu_slope = (
            large["cpu_s_per_loop"]["median"] - small["cpu_s_per_loop"]["median"]
        ) / members
        cpu_fixed = small["cpu_s_per_loop"]["median"] - cpu_slope * small["members"]
        mem_slope = (large["rss_mib"] - small["rss_mib"]) / members
        mem_fixed = small["rss_mib"] - mem_slope * small["members"]
        per_core = (CAPACITY_CPU_S - cpu_fixed) / cpu_slope
        figures["loop_fixed_cpu"] = f"{cpu_fixed * 1000:.0f} ms"
        figures["loop_cpu_per_member"] = f"{cpu_slope * 1000:.1f} ms"
        figures["memory_fixed"] = f"{mem_fixed:.0f} MiB"
        figures["memory_per_member"] = f"{mem_slope:.1f} MiB"
        figures["members_per_core"] = f"{round(per_core, -2):,.0f} members"
        figures["memory_at_members_per_core"] = (
            f"{(mem_fixed + mem_slope * round(per_core, -2)) / 1024:.1f} GiB"
        )
    return figures


def write(started: dict[str, Any], measured: list[dict[str, Any]], *, tls: bool) -> None:
    figures = figures_of(measured)
    name = "fleet_tls" if tls else "fleet"
    path = recording.write(
        name,
        benchmark="benchmarks/bench_fleet.py",
        what=(
            "rpp run as a process over real HTTP"
            + (" and TLS" if tls else "")
            + " against rpp fake-runpod (pods answering after 200 ms, each its own host name) "
            "and a Kubernetes API stand-in, reconciling every 30 s; steady loops after every "
            "pool is Ready; CPU is user + sys of the rpp run process"
        ),
        started=started,
        measured={"goals": GOALS, "sizes": measured},
        figures=figures,
    )
    print(f"written to {path.relative_to(ROOT)}")
    print(json.dumps(figures, indent=2))


def refigure() -> None:
    """Recompute the figures of the checked-in results after a change to `figures_of`."""
    for name in ("fleet.json", "fleet_tls.json"):
        path = BENCH / "results" / name
        if path.is_file():
            body = json.loads(path.read_text())
            body["figures"] = figures_of(body["measured"]["sizes"])
            path.write_text(json.dumps(body, indent=2) + "\n")
            print(f"{name}: {body['figures']}")


if __name__ == "__main__":
    sys.exit(main())
