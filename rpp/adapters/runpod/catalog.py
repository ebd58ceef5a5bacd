"""RunPod's catalog (stock levels per GPU type and datacenter) as plain records.

v2 create places exactly one GPU type and never searches for capacity, so the
controller reads the catalog first and orders its candidates by it. Two reads exist:
`GET /v2/catalog/gpus?include=AVAILABILITY&product=POD&cloud=...` (per GPU type, the
datacenters that offer it in that cloud, each with a level) and
`GET /v2/catalog/datacenters?include=GPU_AVAILABILITY` (per datacenter, the GPU types it
offers). Placement uses the first: one call answers every (GPU type, datacenter) pair
for the pool's cloud. Stock can vanish between the read and the create, so a level is
a reason to skip or try a candidate, never a reservation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from rpp.adapters.runpod.wire import WireError


class Availability(StrEnum):
    """RunPod's `AvailabilityLevel`."""

    NONE = "NONE"
    LOW = "LOW"
    MEDIUM = "MEDIUM"
    HIGH = "HIGH"

    @property
    def has_stock(self) -> bool:
        return self is not Availability.NONE


def _level(value: Any, where: str) -> Availability:
    try:
        return Availability(value)
    except ValueError:
        raise WireError(f"{where} {value!r} is not an availability level") from None


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
    for i, item in enumerate(obj["gpus"]):
        where = f"gpus[{i}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
            raise WireError(f"{where} has no id")
        price = item.get("price")
        price_value = price.get(cloud.lower()) if isinstance(price, Mapping) else None
        datacenters: dict[str, Availability] = {}
        for j, dc in enumerate(item.get("dataCenters") or []):
            if not isinstance(dc, Mapping) or not isinstance(dc.get("id"), str):
                raise WireError(f"{where}.dataCenters[{j}] has no id")
            datacenters[dc["id"]] = _level(
                dc.get("availability"), f"{where}.dataCenters[{j}].availability"
            )
        overall = item.get("availability")
        gpus[item["id"]] = GpuTypeOffer(
            gpu_type=item["id"],
            name=str(item.get("name") or item["id"]),
            price_per_hr=float(price_value) if isinstance(price_value, int | float) else None,
            availability=(
                _level(overall, f"{where}.availability")
                if overall is not None
                else Availability.NONE
            ),
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
    for i, item in enumerate(obj["dataCenters"]):
        where = f"dataCenters[{i}]"
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
            raise WireError(f"{where} has no id")
        levels: dict[str, Availability] = {}
        for j, gpu in enumerate(item.get("gpuAvailability") or []):
            if not isinstance(gpu, Mapping) or not isinstance(gpu.get("id"), str):
                raise WireError(f"{where}.gpuAvailability[{j}] has no id")
            levels[gpu["id"]] = _level(
                gpu.get("availability"), f"{where}.gpuAvailability[{j}].availability"
            )
        result.append(
            DataCenterInfo(
                id=item["id"],
                name=str(item.get("name") or item["id"]),
                region=str(item.get("region") or "UNKNOWN"),
                gpu_availability=levels,
            )
        )
    return result
