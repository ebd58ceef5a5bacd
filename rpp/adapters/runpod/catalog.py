"""RunPod's catalog (stock levels per GPU type and datacenter) as plain records.

v2 create places exactly one GPU type and never searches for capacity, so the
controller reads the catalog first and orders its candidates by it. Two reads exist:
`GET /v2/catalog/gpus?include=AVAILABILITY&product=POD&cloud=...` (per GPU type, the
datacenters that offer it in that cloud, each with a level) and
`GET /v2/catalog/datacenters?include=GPU_AVAILABILITY` (per datacenter, the GPU types it
offers). Placement uses the first: one call answers every (GPU type, datacenter) pair
for the pool's cloud. Stock can vanish between the read and the create, so a level is
a reason to skip or try a candidate, never a reservation.

Entries are read defensively: one GPU type or datacenter entry that does not fit is
left out (the others still place pods), a level this controller does not know reads as
LOW (worth a try: RunPod answers a create it cannot place), and only an answer without
its array fails the call.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from rpp.adapters.runpod.reading import WireError, is_number


class Availability(StrEnum):
    """RunPod's `AvailabilityLevel`."""

    NONE = "NONE"
    LOW = "LOW"
    MEDIUM = "MEDIUM"
    HIGH = "HIGH"

    @property
    def has_stock(self) -> bool:
        return self is not Availability.NONE


def _level(value: Any) -> Availability:
    if value is None or not isinstance(value, str):
        return Availability.NONE
    try:
        return Availability(value)
    except ValueError:
        return Availability.LOW  # a level added since: worth a try, RunPod refuses if not


def _entries(items: Any) -> list[Mapping[str, Any]]:
    """The objects of a JSON list that carry a string id; anything else is left out."""
    if not isinstance(items, list):
        return []
    return [
        item
        for item in items
        if isinstance(item, Mapping) and isinstance(item.get("id"), str) and item["id"]
    ]


@dataclass(frozen=True)
class GpuTypeOffer:
    """One GPU type as the catalog lists it for one cloud."""

    gpu_type: str
    name: str
    price_per_hr: float | None
    availability: Availability
    datacenters: Mapping[str, Availability] = field(default_factory=dict)


@dataclass(frozen=True)
class GpuCatalog:
    """The GPU catalog for one cloud: what placement reads once per create."""

    cloud: str
    gpus: Mapping[str, GpuTypeOffer]

    def availability(self, gpu_type: str, datacenter: str) -> Availability:
        """NONE when the catalog does not offer that GPU type in that datacenter at all."""
        offer = self.gpus.get(gpu_type)
        if offer is None:
            return Availability.NONE
        return offer.datacenters.get(datacenter, Availability.NONE)

    def has_stock(self, gpu_type: str, datacenter: str) -> bool:
        """Whether a create there may succeed now (placement skips it otherwise)."""
        return self.availability(gpu_type, datacenter).has_stock


def gpu_catalog_from_json(obj: Any, *, cloud: str) -> GpuCatalog:
    """`ListGpuTypesResponse` (with include=AVAILABILITY) -> `GpuCatalog`."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("gpus"), list):
        raise WireError("GPU catalog has no 'gpus' array")
    gpus: dict[str, GpuTypeOffer] = {}
    for item in _entries(obj["gpus"]):
        price = item.get("price")
        price_value = price.get(cloud.lower()) if isinstance(price, Mapping) else None
        datacenters = {
            dc["id"]: _level(dc.get("availability")) for dc in _entries(item.get("dataCenters"))
        }
        name = item.get("name")
        gpus[item["id"]] = GpuTypeOffer(
            gpu_type=item["id"],
            name=name if isinstance(name, str) and name else item["id"],
            price_per_hr=float(price_value) if is_number(price_value) else None,
            availability=_level(item.get("availability")),
            datacenters=datacenters,
        )
    return GpuCatalog(cloud=cloud, gpus=gpus)


@dataclass(frozen=True)
class DataCenterInfo:
    """One datacenter and the GPU types it offers, with levels across clouds."""

    id: str
    name: str
    region: str
    gpu_availability: Mapping[str, Availability] = field(default_factory=dict)


def datacenters_from_json(obj: Any) -> list[DataCenterInfo]:
    """`ListDataCentersResponse` (with include=GPU_AVAILABILITY) -> datacenters."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("dataCenters"), list):
        raise WireError("datacenter catalog has no 'dataCenters' array")
    result: list[DataCenterInfo] = []
    for item in _entries(obj["dataCenters"]):
        levels = {
            gpu["id"]: _level(gpu.get("availability"))
            for gpu in _entries(item.get("gpuAvailability"))
        }
        name, region = item.get("name"), item.get("region")
        result.append(
            DataCenterInfo(
                id=item["id"],
                name=name if isinstance(name, str) and name else item["id"],
                region=region if isinstance(region, str) and region else "UNKNOWN",
                gpu_availability=levels,
            )
        )
    return result
