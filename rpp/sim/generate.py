"""Random scenarios for the soak: a pool, a cloud and hours of trouble, from a seed.

Where it sits: the simulator, under `rpp simulate --soak` (rpp/sim/soak.py). Each
scenario is a plain scenario document, the same YAML a person writes
(docs/simulator.md), checked by the same reader, so a failing one can be written out
and replayed with `rpp simulate --scenario FILE --check`. Scenario `index` of soak
`seed` is always the same document, whatever ran before it.

What a scenario holds, each drawn from its own generator:

- a pool of 3 to 8 pods (some already running, some to create), one or two GPU types,
  datacenters with stock and prices that differ, and caps that are sometimes tight:
  maxPods with no room to surge, a cost cap a few dollars over the pool, a price
  estimate below what RunPod bills, maxPerDatacenter that fills the datacenters;
  foreign pods in the same account, one of them named almost like the pool's;
- trouble during the run: pods that die, hang, turn slow, fail requests, get machine
  notes, recover, restart or are terminated from the console; stock outages; spec
  changes (size, image, pause); load swings with autoscaling;
- faults: RunPod calls failing at random (`cloud.faults`) and scripted bursts on one
  operation, status writes lost to conflicts or another writer;
- a listing lag: RunPod listing created pods 30 s to 2.5 min after their 201, for the
  whole run (`cloud.listingLag`) or for a few creates from a chosen time (`ListingLag`
  faults); drawn from a generator of its own, so the rest of a scenario is the one an
  earlier soak drew for its seed and index;
- the dead-pool shapes (rpp/sim/generate_shapes.py), each for a share of the scenarios,
  from a generator of its own too: a single-pod pool at its caps whose pod dies or
  hangs, independent failures minutes apart, every pod dying at once (sometimes with
  no stock for a while), a status-write storm of 10 to 60 minutes;
- a step of the controller host's wall clock, an hour or ten minutes either way
  (`do: clock-step`), from a generator of its own as well;
- controller crashes at every kind of point (before and after each RunPod operation,
  the status write and the slots write, between two effects, or anywhere), cycled
  over the soak so every kind is hit;
- then a quiet settle time (no events, no faults), so the end-of-run invariants
  (convergence, leaks) judge a pool that had the time to recover.
"""

from __future__ import annotations

import random
from typing import Any

from rpp.model.runpod_operations import RunPodOperation as Op
from rpp.sim.crash_points import EVERY_POINT
from rpp.sim.generate_shapes import draw_shapes

POOL = "soak"
PREFIX = f"rpp-{POOL}-"
IMAGES = ("ghcr.io/example/inference:1.4.2", "ghcr.io/example/inference:1.5.0")
GPUS = {"NVIDIA GeForce RTX 4090": 0.69, "NVIDIA RTX A6000": 0.49, "NVIDIA L40S": 0.86}
DATACENTERS = ("EU-RO-1", "EU-SE-1", "EU-CZ-1", "EU-NL-1", "US-TX-3", "US-GA-1", "CA-MTL-1")
POD_TROUBLE = ("die", "hang", "slow", "errors", "note", "recover", "restart", "terminate")
# The plain operationIds (`.value`): they are written into scenario files (YAML).
FAULT_OPERATIONS = tuple(
    op.value
    for op in (
        Op.CREATE_POD,
        Op.DELETE_POD,
        Op.UPDATE_POD,
        Op.LIST_PODS,
        Op.GET_POD,
        Op.LIST_GPU_TYPES,
    )
)
FAULT_KINDS: tuple[Any, ...] = (
    "ServerError",
    "RateLimited",
    "Timeout",
    "MalformedJson",
    "CreatedButFailed",
    {"kind": "Timeout", "applied": True},
)
CRITICAL_NOTE = "Critical error on this machine: GPU fell off the bus"
CRASH_POINTS: tuple[Any, ...] = (
    *EVERY_POINT,
    None,  # killed at the event's time, wherever the process is
)
LISTING_LAGS = (30, 65, 90, 150)
"""Seconds from a create's 201 to its pod in RunPod's list: the lags issue 25 measured."""
CLOCK_STEPS = (3600, -3600, 600, -600)
"""Seconds the controller host's clock steps by (issue 25 measured an hour either way)."""
SETTLE_S = 45 * 60.0
"""Quiet time at the end: enough for a replacement to be created, warm and drain."""


def crash_point_for(seed: int, index: int, nth: int) -> Any:
    """The crash points cycle over the soak, so every kind comes up in every few runs."""
    return CRASH_POINTS[(seed + index * 3 + nth) % len(CRASH_POINTS)]


def generate(seed: int, index: int, *, duration: float | None = None) -> dict[str, Any]:
    """Scenario `index` of the soak with `seed`, as a scenario document."""
    rng = random.Random(f"soak:{seed}:{index}")
    total = duration if duration is not None else rng.choice((2, 3, 4)) * 3600.0
    active = max(total - SETTLE_S, total / 2)
    gen = _Generator(rng, seed=seed, index=index, active=active)
    pool = gen.pool()
    cloud = gen.cloud(pool)
    events = gen.events(pool)
    _listing_lag(random.Random(f"soak:{seed}:{index}:listing-lag"), cloud, events, active)
    _clock_step(random.Random(f"soak:{seed}:{index}:clock-step"), events, active)
    shapes = random.Random(f"soak:{seed}:{index}:shapes")
    drawn = draw_shapes(
        shapes, pool=pool, cloud=cloud, events=events, active=active, prefix=PREFIX
    )
    told = f" ({', '.join(drawn)})" if drawn else ""
    return {
        "description": f"soak scenario {index} of seed {seed}{told}",
        "duration": f"{total:g}s",
        "interval": "30s",
        "pool": pool,
        "cloud": cloud,
        "events": events,
    }


def _listing_lag(
    rng: random.Random, cloud: dict[str, Any], events: list[dict[str, Any]], active: float
) -> None:
    """RunPod lists created pods late: for the whole run, or for some creates from a time."""
    if rng.random() < 0.25:
        cloud["listingLag"] = f"{rng.choice(LISTING_LAGS)}s"
    if rng.random() < 0.25:
        events.append(
            {
                "at": f"{rng.uniform(300.0, active):.0f}s",
                "do": "fault",
                "operation": Op.CREATE_POD.value,
                "kind": {"kind": "ListingLag", "seconds": rng.choice(LISTING_LAGS)},
                "times": rng.randint(1, 3),
            }
        )


def _clock_step(rng: random.Random, events: list[dict[str, Any]], active: float) -> None:
    """The controller host's wall clock steps, an hour or minutes either way; sometimes
    it steps back later, as NTP corrects a clock a person set wrong."""
    if rng.random() >= 0.2:
        return
    by = rng.choice(CLOCK_STEPS)
    at = rng.uniform(300.0, active * 0.7)
    events.append({"at": f"{at:.0f}s", "do": "clock-step", "by": f"{by:+d}s"})
    if rng.random() < 0.5:
        back = rng.uniform(at + 60.0, active)
        events.append({"at": f"{back:.0f}s", "do": "clock-step", "by": f"{-by:+d}s"})


class _Generator:
    def __init__(self, rng: random.Random, *, seed: int, index: int, active: float) -> None:
        self.rng = rng
        self.seed = seed
        self.index = index
        self.active = active
        self.size = rng.randint(3, 8)
        self.gpus = rng.sample(sorted(GPUS), k=rng.choice((1, 1, 2)))
        self.dcs = rng.sample(DATACENTERS, k=rng.randint(3, len(DATACENTERS)))
        self.prices = {
            (dc, gpu): round(GPUS[gpu] * rng.choice((0.9, 1.0, 1.0, 1.1, 1.3, 2.1)), 2)
            for dc in self.dcs
            for gpu in self.gpus
        }

    def at(self, low: float = 300.0) -> str:
        return f"{self.rng.uniform(low, self.active):.0f}s"

    def pool(self) -> dict[str, Any]:
        rng, size = self.rng, self.size
        per_dc = rng.choice((1, 1, 2, 3))
        top = max(self.prices.values())
        autoscale = rng.random() < 0.25
        maximum = size + (rng.randint(1, 2) if autoscale else 0)
        spec: dict[str, Any] = {
            "dryRun": False,
            "templateId": "tpl-inference",
            "image": IMAGES[0],
            "gpuTypes": self.gpus,
            "replicas": {"min": size, "max": maximum},
            "datacenters": {"allow": self.dcs},
            "maxPerDatacenter": per_dc,
            "limits": {
                "maxPods": maximum + rng.choice((0, 1, 1, 2, 3)),
                "maxHourlyCostUsd": round(top * (maximum + rng.choice((0.2, 1, 1.5, 3))), 2),
                "maxCreatesPerHour": rng.randint(3, 12),
                "estimatedPodCostUsd": round(rng.choice((0.3, 0.7, 1.0, top)), 2),
            },
            "envFromSecret": "inference-env",
            "metricsTokenKey": "METRICS_TOKEN",
            "nginx": {"slotPorts": maximum + 2},
            "drain": {"period": f"{rng.choice((30, 60, 150))}s"},
            "health": {
                "warmupTimeout": f"{rng.choice((5, 10, 15))}m",
                "replaceWhen": {
                    "unreachable": {"duration": f"{rng.choice((60, 120))}s"},
                    "errorRate": {"duration": "5m"},
                    "hostNotice": rng.random() < 0.5,
                },
            },
            "prometheus": {
                "job": "inference-pods",
                "latencyQuery": (
                    'sum by (runpod_pod) (rate(app_request_duration_seconds_sum{job="$job"}[5m]))'
                    " / sum by (runpod_pod) "
                    '(rate(app_request_duration_seconds_count{job="$job"}[5m]))'
                ),
                "errorRatioQuery": (
                    'sum by (runpod_pod) (rate(app_requests_failed_total{job="$job"}[5m]))'
                    ' / sum by (runpod_pod) (rate(app_requests_total{job="$job"}[5m]))'
                ),
            },
        }
        if autoscale:
            spec["autoscaling"] = {
                "enabled": True,
                "query": 'avg(app_queue_length{job="$job"})',
                "target": 4,
            }
        return {
            "apiVersion": "runpodpool.ownego.com/v1alpha1",
            "kind": "RunPodPool",
            "metadata": {"name": POOL, "namespace": "runpod"},
            "spec": spec,
        }

    def cloud(self, pool: dict[str, Any]) -> dict[str, Any]:
        rng = self.rng
        per_dc = pool["spec"]["maxPerDatacenter"]
        stock = [
            {
                "datacenter": dc,
                "gpuType": gpu,
                "count": rng.choice((0, 1, 2, 4, 6)),
                "costPerHr": price,
            }
            for (dc, gpu), price in sorted(self.prices.items())
        ]
        running = rng.randint(max(1, self.size - 3), self.size)
        existing = []
        slots = [dc for dc in self.dcs for _ in range(per_dc)]
        for n, dc in enumerate(slots[:running]):
            existing.append(
                {
                    "name": f"{PREFIX}e{n}",
                    "gpuType": self.gpus[0],
                    "datacenter": dc,
                    "image": IMAGES[0],
                }
            )
        for name in ("other-team-a1", f"{PREFIX}x-1"):  # not the pool's: never touched
            if rng.random() < 0.6:
                existing.append(
                    {
                        "name": name,
                        "gpuType": self.gpus[0],
                        "datacenter": self.dcs[0],
                        "image": IMAGES[0],
                    }
                )
        cloud: dict[str, Any] = {
            "seed": self.seed * 100003 + self.index,
            "bootTime": f"{rng.choice((60, 90, 120, 180))}s",
            "stock": stock,
            "existing": existing,
        }
        if rng.random() < 0.7:
            cloud["faults"] = {
                "rate": rng.choice((0.05, 0.1, 0.2, 0.3)),
                "kinds": list(FAULT_KINDS),
                "until": f"{self.active:.0f}s",  # the settle time is quiet
            }
        return cloud

    def events(self, pool: dict[str, Any]) -> list[dict[str, Any]]:
        rng = self.rng
        events: list[dict[str, Any]] = []
        pods = self.size + 6
        for _ in range(rng.randint(3, 8)):
            do = rng.choice(POD_TROUBLE)
            event: dict[str, Any] = {"at": self.at(), "do": do, "pod": rng.randint(1, pods)}
            if do == "slow":
                event["latency"] = f"{rng.choice((3, 8, 30))}s"
            elif do == "errors":
                event["ratio"] = rng.choice((0.2, 0.5, 1.0))
            elif do == "note":
                event["text"] = CRITICAL_NOTE
            events.append(event)
        for _ in range(rng.randint(0, 2)):
            dc, gpu = rng.choice(sorted(self.prices))
            start = rng.uniform(300.0, self.active * 0.7)
            end = rng.uniform(start + 300.0, self.active)
            outage = {"datacenter": dc, "gpuType": gpu}
            events.append({"at": f"{start:.0f}s", "do": "stock", **outage, "count": 0})
            back = rng.choice((2, 4))
            events.append({"at": f"{end:.0f}s", "do": "stock", **outage, "count": back})
        events += self._spec_changes(pool)
        for _ in range(rng.randint(0, 3)):
            operation = rng.choice(FAULT_OPERATIONS)
            kind = rng.choice(FAULT_KINDS)
            times = rng.randint(1, 3)
            events.append(
                {
                    "at": self.at(),
                    "do": "fault",
                    "operation": operation,
                    "kind": kind,
                    "times": times,
                }
            )
        if rng.random() < 0.4:
            kind = rng.choice(("Conflict", "OtherWriter"))
            times = 3 if kind == "Conflict" else 1
            events.append(
                {
                    "at": self.at(),
                    "do": "fault",
                    "operation": "status-write",
                    "kind": kind,
                    "times": times,
                }
            )
        for nth in range(rng.randint(2, 6)):
            restart: dict[str, Any] = {"at": self.at(60.0), "do": "controller-restart"}
            point = crash_point_for(self.seed, self.index, nth)
            if point is not None:
                restart["point"] = point
            events.append(restart)
        return events

    def _spec_changes(self, pool: dict[str, Any]) -> list[dict[str, Any]]:
        rng = self.rng
        spec = pool["spec"]
        changes: list[dict[str, Any]] = []
        if rng.random() < 0.4:
            size = rng.randint(max(1, self.size - 2), spec["replicas"]["max"])
            changes.append(
                {"at": self.at(), "do": "apply", "patch": {"spec": {"replicas": {"min": size}}}}
            )
        if rng.random() < 0.3:
            changes.append(
                {"at": self.at(), "do": "apply", "patch": {"spec": {"image": IMAGES[1]}}}
            )
        if rng.random() < 0.15:
            start = rng.uniform(300.0, self.active * 0.6)
            end = rng.uniform(start + 120.0, self.active)
            changes.append(
                {"at": f"{start:.0f}s", "do": "apply", "patch": {"spec": {"paused": True}}}
            )
            changes.append(
                {"at": f"{end:.0f}s", "do": "apply", "patch": {"spec": {"paused": False}}}
            )
        if spec.get("autoscaling"):
            for _ in range(rng.randint(1, 3)):
                changes.append(
                    {"at": self.at(), "do": "load", "value": rng.choice((0, 4, 10, 20))}
                )
        return changes
