"""Benchmark: what clients see while pods die, hang, get replaced, rolled or scaled.

Not a test (tests/serving/test_serving.py asserts the targets on short runs); run it by hand,
about 25 minutes on a 2-core machine:

    .venv/bin/python benchmarks/bench_serving.py [--scenarios dies,roll] [--writes 20]
        [--no-write]

Every scenario of tests/serving/scenarios.py, at full length (`BENCH`), each on a fresh
rig of real components on 127.0.0.1 (tests/serving/rig.py): nginx running the static
config of examples/nginx.yaml and the slots the controller renders, `rpp fake-runpod` as
RunPod's proxy and three pods, `rpp run` reconciling every second through a Kubernetes
API stand-in, `rpp nginx-reloader` reloading nginx. The traffic, for 60 s: POST
/generate with a JSON body at 30/s (0.2 s of work each), GET at 10/s, five 20 s streams
at a time and one of 35 s. It prints, per scenario and kind of request, failed/total
with the allowed failures named (in flight on the failing pod; started on it before its
failure could show), and the requests whose work started on two pods.

Then it measures a slots change reaching nginx: the ConfigMap written through the API
(as the controller writes it) until nginx names the new version and sends traffic to
the newly wired pod, WRITES times (no controller runs then). Goal: 2 s at most.

The results go to benchmarks/results/serving.json (date, machine, load; every run's
counts); docs/operating.md ("Is my traffic safe?") quotes them.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT))  # the harness lives with the tests

import recording  # noqa: E402

from rpp.decide.nginx_slots import SlotTarget, render_slots  # noqa: E402
from rpp.model.spec_load import load_spec  # noqa: E402
from tests.serving.analysis import table, way_out  # noqa: E402
from tests.serving.rig import POOL, Rig, nginx_version  # noqa: E402
from tests.serving.scenarios import BENCH, SCENARIOS, run  # noqa: E402

RELOAD_GOAL_S = 2.0


async def scenarios(names: list[str]) -> list[dict[str, Any]]:
    results = []
    for name in names:
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"rpp-serving-{name}-") as tmp:
            result = await run(SCENARIOS[name], scale=BENCH, workdir=Path(tmp))
        result["wall_s"] = round(time.monotonic() - started, 1)
        print(table([result]).splitlines()[-1], flush=True)
        results.append(result)
    return results


def reload_latency(writes: int) -> dict[str, Any]:
    """ConfigMap write -> nginx serving the new slots, `writes` times."""
    with tempfile.TemporaryDirectory(prefix="rpp-serving-reload-") as tmp:
        rig = Rig(Path(tmp), BENCH.shape)
        try:
            rig.start(controller=False)
            # Measured from here: the sidecar runs and nginx serves what the API holds.
            rig.until(
                lambda: rig.loaded_version() == rig.slots_version(),
                timeout_s=60,
                what="the reloader serving the ConfigMap",
            )
            pods = rig.pod_ids()[:2]
            spec, problems = load_spec(POOL, rig.shape.spec(rig.public + 1)["spec"])
            assert spec is not None, problems
            base = rig.public + 1
            seconds = []
            with httpx.Client(timeout=5) as client:
                for n in range(writes):
                    pod = pods[n % 2]
                    data = render_slots(
                        pool=POOL, spec=spec, slots={base: SlotTarget(pod)}, proxy_url=rig.fake
                    )
                    started = time.perf_counter()
                    version = rig.replace_slots(data)
                    # Both: nginx names the new version, and sends traffic to the new pod
                    # (not only a new worker does, while old ones still accept).
                    while rig.loaded_version() != version or _served_by(client, rig.public) != pod:
                        if time.perf_counter() - started > 30:
                            raise SystemExit(f"nginx did not serve {pod} in 30 s")
                        time.sleep(0.005)
                    seconds.append(time.perf_counter() - started)
        finally:
            rig.stop()
    p90 = statistics.quantiles(seconds, n=10, method="inclusive")[-1] if writes > 1 else seconds[0]
    return {
        "writes": writes,
        "seconds": [round(s, 4) for s in seconds],
        "spread": recording.spread(seconds),
        "p90": p90,
    }


def _served_by(client: httpx.Client, public: int) -> str | None:
    try:
        answer = client.get(f"http://127.0.0.1:{public}/generate")
    except httpx.HTTPError:
        return None
    return answer.headers.get("x-pod") if answer.status_code == 200 else None


def figures(results: list[dict[str, Any]], reload: dict[str, Any]) -> dict[str, str]:
    """The texts docs/operating.md quotes."""
    out: dict[str, str] = {}
    for result in results:
        for kind, counts in result["summary"]["kinds"].items():
            out[f"{result['scenario']} {kind}"] = f"{counts['failed']} of {counts['total']}"
        out[f"{result['scenario']} started twice"] = f"{result['summary']['duplicated']} requests"
        if result["faults"]:
            out[f"{result['scenario']} out of nginx"] = way_out(result)
    spread = reload["spread"]
    out["reload median"] = f"{spread['median'] * 1000:.0f} ms"
    out["reload max"] = f"{spread['max'] * 1000:.0f} ms"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--writes", type=int, default=20)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    names = [n for n in args.scenarios.split(",") if n]
    unknown = sorted(set(names) - set(SCENARIOS))
    if unknown:
        print(f"unknown scenarios {unknown}; known: {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    started = recording.machine()
    print(f"{nginx_version()}; {len(names)} scenarios of {BENCH.mix.duration:g} s of traffic")
    print(table([]))
    results = asyncio.run(scenarios(names))
    reload = reload_latency(args.writes)
    spread = reload["spread"]
    verdict = "met" if spread["max"] <= RELOAD_GOAL_S else "MISSED"
    print(
        f"\nslots ConfigMap write -> nginx serving them, {reload['writes']} writes: median "
        f"{spread['median'] * 1000:.0f} ms, p90 {reload['p90'] * 1000:.0f} ms, max "
        f"{spread['max'] * 1000:.0f} ms (goal <= {RELOAD_GOAL_S:g} s: {verdict})"
    )
    unexpected = sum(r["summary"]["unexpected"] for r in results)
    late = sum(r["summary"]["duplicated_late"] for r in results)
    print(f"unexpected failures: {unexpected}; work started twice past the window: {late}")
    if not args.no_write:
        path = recording.write(
            "serving",
            benchmark="benchmarks/bench_serving.py",
            what=(
                "clients of nginx (examples/nginx.yaml, rendered slots, rpp nginx-reloader) in "
                "front of 3 fake pods driven by rpp run, per failure scenario: failed/total per "
                "kind of request, work started twice; and ConfigMap write -> nginx serving it"
            ),
            started=started | {"nginx": nginx_version()},
            measured={"scenarios": results, "reload": reload},
            figures=figures(results, reload),
        )
        print(f"wrote {path.relative_to(ROOT)}")
    return 1 if unexpected or late or verdict != "met" else 0


if __name__ == "__main__":
    sys.exit(main())
