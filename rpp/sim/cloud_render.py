"""The fake cloud's answers in RunPod's shapes: Pod, catalog and GraphQL notice JSON.

Every shape here is checked against RunPod's published OpenAPI document by the
contract tests, so the fake cannot drift from the API the real client must speak.
Catalog levels are derived from stock counts: none free is NONE, 1-2 LOW, 3-7
MEDIUM, 8 or more HIGH (RunPod does not publish its thresholds; only the order
matters to the controller).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from rpp.adapters.clock import to_rfc3339
from rpp.model.observations import PodStatus
from rpp.sim.cloud import FakeCloud, FakePod, MachineNotice, actions_for
from rpp.sim.cloud_model import PodBill

_GPU_INFO = {  # id -> (display name, VRAM GB)
    "NVIDIA GeForce RTX 4090": ("RTX 4090", 24),
    "NVIDIA RTX A6000": ("RTX A6000", 48),
    "NVIDIA L40S": ("L40S", 48),
    "NVIDIA A100 80GB PCIe": ("A100 PCIe", 80),
    "NVIDIA H100 80GB HBM3": ("H100 SXM", 80),
    "NVIDIA H200": ("H200 SXM", 141),
}
_REGIONS = {
    "EU": "EUROPE",
    "EUR": "EUROPE",
    "US": "NORTH_AMERICA",
    "CA": "NORTH_AMERICA",
    "OC": "OCEANIA",
    "AP": "ASIA",
    "SA": "SOUTH_AMERICA",
}
LEVELS = ("NONE", "LOW", "MEDIUM", "HIGH")


def level(free_units: int) -> str:
    if free_units <= 0:
        return "NONE"
    if free_units <= 2:
        return "LOW"
    return "MEDIUM" if free_units < 8 else "HIGH"


def pod_json(cloud: FakeCloud, pod: FakePod) -> dict[str, Any]:
    """A v2 `Pod`: every required field, `runtime` null unless RUNNING."""
    info = pod.info
    status = cloud.status(pod)
    now = cloud.clock.now()
    running = status is PodStatus.RUNNING
    runtime: dict[str, Any] | None = None
    if running:
        uptime = int((now - info.started_at).total_seconds())
        runtime = {
            "uptime": max(uptime, 0),
            "ports": [
                {"private": port, "public": None, "type": "http", "ip": None}
                for port in info.http_ports
            ],
        }
    started = running or status is PodStatus.STARTING
    return {
        "id": info.pod_id,
        "name": info.name,
        "status": status.value,
        "actions": list(actions_for(status)),
        "image": info.image,
        "args": pod.args,
        "disk": pod.disk,
        "mounts": {},
        "ports": list(info.ports),
        "env": dict(info.env),
        "registry": None,
        "gpu": {"id": info.gpu_type, "count": info.gpu_count},
        "cloud": info.cloud,
        "dataCenterId": info.datacenter,
        "cudaVersion": "12.8",
        "ssh": {
            "proxy": {
                "host": "ssh.runpod.io",
                "port": 22,
                "username": f"{info.pod_id}-64411eb2",
                "command": f"ssh {info.pod_id}-64411eb2@ssh.runpod.io",
            },
            "direct": None,
        },
        "template": None,  # RunPod keeps no link to the template a pod came from
        "cost": pod.cost_per_hr if status not in (PodStatus.EXITED, PodStatus.ERROR) else 0.0,
        "locked": pod.locked,
        "globalNetworking": {"enabled": False},
        "runtime": runtime,
        "createdAt": to_rfc3339(info.created_at),
        "startedAt": to_rfc3339(info.started_at) if started else None,
    }


def _gpu_types(cloud: FakeCloud) -> list[str]:
    return list(dict.fromkeys(key[1] for key in cloud.stock))


def gpu_catalog_json(
    cloud: FakeCloud, *, availability: bool, cloud_type: str = "SECURE", count: int = 1
) -> dict[str, Any]:
    """`ListGpuTypesResponse`; with availability, levels for one cloud and GPU count."""
    cloud.tick()
    gpus = []
    for gpu_type in _gpu_types(cloud):
        entries = {key: e for key, e in cloud.stock.items() if key[1] == gpu_type}
        name, memory = _GPU_INFO.get(gpu_type, (gpu_type.removeprefix("NVIDIA "), 24))

        def price(kind: str, entries: dict[tuple[str, str, str], Any] = entries) -> float:
            # RunPod lists one price per GPU type; the fake's datacenters may bill
            # differently, so its list price is the highest: no pod bills above it.
            prices = [e.cost_per_hr for key, e in entries.items() if key[2] == kind]
            return max(prices) if prices else 0.0

        item: dict[str, Any] = {
            "id": gpu_type,
            "name": name,
            "pool": None,
            "manufacturer": "AMD" if gpu_type.startswith("AMD") else "NVIDIA",
            "memory": memory,
            "secure": any(key[2] == "SECURE" for key in entries),
            "community": any(key[2] == "COMMUNITY" for key in entries),
            "price": {"secure": price("SECURE"), "community": price("COMMUNITY")},
            "maxCount": {"secure": 8, "community": 8},
        }
        if availability:
            per_dc = {
                key[0]: level(e.count // count)
                for key, e in entries.items()
                if key[2] == cloud_type
            }
            best = max(per_dc.values(), key=LEVELS.index, default="NONE")
            item["availability"] = best
            if best != "NONE":  # RunPod omits dataCenters when unavailable everywhere
                item["dataCenters"] = [
                    {"id": dc, "name": datacenter_name(dc), "availability": lv}
                    for dc, lv in per_dc.items()
                ]
        gpus.append(item)
    return {"gpus": gpus}


def datacenter_name(dc: str) -> str:
    return dc.replace("-", " ")


def datacenters_json(cloud: FakeCloud, *, gpu_availability: bool) -> dict[str, Any]:
    """`ListDataCentersResponse`; with availability, GPU levels summed over clouds."""
    cloud.tick()
    free: dict[str, dict[str, int]] = {}
    for (dc, gpu_type, _), entry in cloud.stock.items():
        free.setdefault(dc, {}).setdefault(gpu_type, 0)
        free[dc][gpu_type] += entry.count
    result = []
    for dc, gpus in free.items():
        item: dict[str, Any] = {
            "id": dc,
            "name": datacenter_name(dc),
            "region": _REGIONS.get(dc.split("-")[0], "UNKNOWN"),
            "networkVolumeTypes": [],
            "compliance": [],
            "globalNetwork": False,
        }
        if gpu_availability:
            item["gpuAvailability"] = [
                {
                    "id": gpu_type,
                    "name": _GPU_INFO.get(gpu_type, (gpu_type, 0))[0],
                    "availability": level(n),
                }
                for gpu_type, n in gpus.items()
            ]
        result.append(item)
    return {"dataCenters": result}


def _notice_time(value: dt.datetime | float | str | None) -> Any:
    return to_rfc3339(value) if isinstance(value, dt.datetime) else value


def notices_json(pods: Iterable[FakePod]) -> dict[str, Any]:
    """The answer to `myself { pods { id machine { note maintenance... } } }`."""

    def machine(notice: MachineNotice) -> dict[str, Any]:
        return {
            "note": notice.note,
            "maintenanceStart": _notice_time(notice.maintenance_start),
            "maintenanceEnd": _notice_time(notice.maintenance_end),
            "maintenanceNote": notice.maintenance_note,
        }

    return {
        "data": {
            "myself": {"pods": [{"id": p.info.pod_id, "machine": machine(p.notice)} for p in pods]}
        }
    }


def pod_billing_json(
    bills: list[PodBill],
    *,
    start: dt.datetime,
    end: dt.datetime,
    size: str,
    pod_id: str | None,
) -> dict[str, Any]:
    """A listPodBilling answer (ListPodBillingResponse): the records, the resolved query
    echoed, and the totals. The fake bills GPU time only: cpu and disk are 0."""

    def amounts(total: float) -> dict[str, float]:
        return {"totalAmount": total, "gpuAmount": total, "cpuAmount": 0.0, "diskAmount": 0.0}

    total = round(sum(bill.amount for bill in bills), 6)
    return {
        "records": [
            {
                "startTime": to_rfc3339(bill.start),
                "endTime": to_rfc3339(bill.end),
                "podId": bill.pod_id,
                **amounts(bill.amount),
            }
            for bill in bills
        ],
        "metadata": {
            "query": {
                "startTime": to_rfc3339(start),
                "endTime": to_rfc3339(end),
                "bucketSize": size,
                "podId": pod_id,
            },
            "recordCount": len(bills),
            "uniquePodCount": len({bill.pod_id for bill in bills}),
            "totals": amounts(total),
        },
    }
