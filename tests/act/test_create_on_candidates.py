"""Candidate creation: catalog once, then create per candidate in order until a 201.

Covered: the pure order (rpp/decide/capacity/placement.py: gpuTypes first, then the datacenters
in placement's order, minus the catalog's no-stock combinations); the loop (rpp/act/
create.py) against the
fake cloud: a stock race, 400 rule errors, 403 skips, 402/Unknown/422 stops, the
attempt cap, a failed catalog read, and what the pool reports (CapacityUnavailable
with the GPU types, cloud and datacenters tried and RunPod's own detail).
"""

from __future__ import annotations

import pytest

from rpp.act.create import CreateReport, create_first_available
from rpp.adapters.runpod import answers
from rpp.adapters.runpod.catalog import Availability, GpuCatalog, GpuTypeOffer
from rpp.adapters.runpod.wire import PodRequest
from rpp.decide.capacity.placement import Candidate, order_candidates
from rpp.sim import faults
from rpp.sim.cloud import FakeCloud
from tests.fixtures_runpod import A6000, L40S, RTX4090, client_for, stocked_cloud

REQUEST = PodRequest(name="rpp-pool-b7", image="img:1")


def make_catalog(levels: dict[str, dict[str, str]]) -> GpuCatalog:
    return GpuCatalog(
        cloud="SECURE",
        gpus={
            gpu: GpuTypeOffer(
                gpu_type=gpu,
                name=gpu,
                price_per_hr=1.0,
                availability=Availability.HIGH,
                datacenters={dc: Availability(level) for dc, level in dcs.items()},
            )
            for gpu, dcs in levels.items()
        },
    )


def test_candidates_go_gpu_type_first_then_datacenter_order_skipping_no_stock() -> None:
    stock = make_catalog(
        {
            RTX4090: {"EU-RO-1": "LOW", "EU-SE-1": "HIGH", "US-TX-3": "HIGH"},
            L40S: {"EU-RO-1": "MEDIUM", "EU-SE-1": "NONE"},
        }
    )
    to_try, no_stock = order_candidates(
        gpu_types=[RTX4090, L40S, RTX4090],
        datacenters=["EU-SE-1", "EU-RO-1"],
        cloud="SECURE",
        stock=stock,
    )
    assert [(c.gpu_type, c.datacenter) for c in to_try] == [
        (RTX4090, "EU-SE-1"),
        (RTX4090, "EU-RO-1"),
        (L40S, "EU-RO-1"),
    ]
    assert no_stock == [Candidate(L40S, "EU-SE-1", "SECURE")]


def test_without_a_catalog_every_combination_is_a_candidate() -> None:
    to_try, no_stock = order_candidates(
        gpu_types=[RTX4090, L40S], datacenters=["A", "B"], cloud="COMMUNITY", stock=None
    )
    assert len(to_try) == 4
    assert no_stock == []
    assert {c.cloud for c in to_try} == {"COMMUNITY"}


def creates(cloud: FakeCloud) -> list[str]:
    return [c.path for c in cloud.calls if c.operation == "createPod"]


async def place(
    cloud: FakeCloud,
    *,
    gpu_types: tuple[str, ...] = (RTX4090, L40S),
    max_attempts: int = 4,
    datacenters: tuple[str, ...] = ("EU-RO-1", "EU-SE-1"),
    retry_deadline: float = 1.5,
) -> CreateReport:
    async with client_for(cloud, retry_deadline=retry_deadline) as client:
        return await create_first_available(
            client,
            REQUEST,
            gpu_types=gpu_types,
            datacenters=datacenters,
            cloud="SECURE",
            max_attempts=max_attempts,
        )


async def test_catalog_is_read_once_and_no_stock_combinations_are_never_called() -> None:
    cloud = stocked_cloud()
    cloud.set_stock("EU-RO-1", RTX4090, "SECURE", 0)
    result = await place(cloud)
    assert result.created
    assert result.winner == Candidate(RTX4090, "EU-SE-1", "SECURE")
    assert [c.operation for c in cloud.calls] == ["listGpuTypes", "createPod"]
    assert Candidate(RTX4090, "EU-RO-1", "SECURE") in result.no_stock
    assert Candidate(L40S, "EU-RO-1", "SECURE") in result.no_stock  # not offered there
    assert result.pod is not None
    assert result.pod.name == REQUEST.name


async def test_stock_gone_between_catalog_and_create_moves_to_the_next_candidate() -> None:
    cloud = stocked_cloud()
    cloud.faults.next("createPod", faults.NoCapacity())
    result = await place(cloud)
    assert result.winner == Candidate(RTX4090, "EU-SE-1", "SECURE")
    (failure,) = result.failures
    assert failure.outcome is answers.CallOutcome.NO_CAPACITY
    assert failure.detail == faults.NO_CAPACITY_DETAIL  # verbatim


async def test_every_candidate_without_capacity_raises_capacity_unavailable_naming_them() -> None:
    cloud = stocked_cloud()
    cloud.faults.always("createPod", faults.NoCapacity())
    result = await place(cloud)
    assert not result.created
    assert result.capacity_unavailable
    assert len(creates(cloud)) == 3  # the three in-stock candidates, in order
    text = result.describe()
    for word in (RTX4090, L40S, "SECURE", "EU-RO-1", "EU-SE-1", faults.NO_CAPACITY_DETAIL):
        assert word in text


async def test_a_refusal_names_the_datacenters_the_pool_rules_kept_out_and_why() -> None:
    cloud = stocked_cloud()
    cloud.faults.always("createPod", faults.NoCapacity())
    skipped = (
        ("EU-CZ-1", "maxPerDatacenter 1 reached"),
        ("EU-NL-1", "denied by datacenters.deny"),
        ("US-TX-3", "maxPerDatacenter 1 reached"),
    )
    async with client_for(cloud, retry_deadline=1.5) as client:
        result = await create_first_available(
            client,
            REQUEST,
            gpu_types=(RTX4090,),
            datacenters=["EU-RO-1", "EU-SE-1"],
            cloud="SECURE",
            max_attempts=4,
            skipped=skipped,
        )
    assert result.capacity_unavailable
    assert result.datacenters == ("EU-RO-1", "EU-SE-1")  # what was tried
    assert (
        "not tried: EU-CZ-1, US-TX-3 (maxPerDatacenter 1 reached); "
        "EU-NL-1 (denied by datacenters.deny)"
    ) in result.describe()


async def test_empty_catalog_for_the_pool_is_capacity_unavailable_without_a_create() -> None:
    cloud = stocked_cloud()
    result = await place(cloud, gpu_types=(A6000,))
    assert creates(cloud) == []
    assert result.capacity_unavailable
    assert "no GPU available" in result.describe()


async def test_insufficient_balance_stops_every_further_create() -> None:
    cloud = stocked_cloud()
    cloud.balance = 0
    result = await place(cloud)
    assert result.stopped_by is answers.CallOutcome.INSUFFICIENT_BALANCE
    assert len(creates(cloud)) == 1
    assert not result.capacity_unavailable


async def test_forbidden_candidate_is_skipped_but_all_forbidden_is_no_capacity_problem() -> None:
    cloud = stocked_cloud()
    cloud.faults.next("createPod", faults.Refuse(status=403, detail="no access to this pool"))
    result = await place(cloud)
    assert result.created
    assert result.failures[0].outcome is answers.CallOutcome.FORBIDDEN

    read_only = stocked_cloud()
    async with client_for(read_only, api_key="ro-key") as client:
        refused = await create_first_available(
            client,
            REQUEST,
            gpu_types=[RTX4090],
            datacenters=["EU-RO-1", "EU-SE-1"],
            cloud="SECURE",
            max_attempts=5,
        )
    assert {f.outcome for f in refused.failures} == {answers.CallOutcome.FORBIDDEN}
    assert not refused.capacity_unavailable


async def test_5xx_on_create_stops_the_loop_because_a_pod_may_exist() -> None:
    cloud = stocked_cloud()
    cloud.faults.next("createPod", faults.CreatedButFailed())
    result = await place(cloud)
    assert result.outcome_unknown
    assert len(creates(cloud)) == 1
    assert len(cloud.pods) == 1  # exactly one pod, never two


async def test_contract_violation_422_stops_but_a_400_rule_error_tries_the_next() -> None:
    cloud = stocked_cloud()
    cloud.faults.next("createPod", faults.Refuse(status=422, detail="body.name: bad"))
    result = await place(cloud)
    assert result.stopped_by is answers.CallOutcome.REJECTED
    assert len(creates(cloud)) == 1

    cloud = stocked_cloud()
    cloud.faults.next("createPod", faults.Refuse(status=400, detail="Ports are malformed."))
    result = await place(cloud)
    assert result.created
    assert len(creates(cloud)) == 2
    assert result.failures[0].outcome is answers.CallOutcome.REJECTED


async def test_rule_errors_on_every_candidate_are_not_reported_as_no_gpu() -> None:
    cloud = stocked_cloud()
    cloud.faults.always("createPod", faults.Refuse(status=400, detail="Disk is too small."))
    result = await place(cloud)
    assert not result.created
    assert not result.capacity_unavailable
    assert result.last_detail == "Disk is too small."
    assert "no candidate accepted" in result.describe()


async def test_attempt_cap_bounds_the_creates() -> None:
    cloud = stocked_cloud()
    cloud.faults.always("createPod", faults.NoCapacity())
    await place(cloud, max_attempts=2)
    assert len(creates(cloud)) == 2
    with pytest.raises(ValueError, match="max_attempts"):
        await place(cloud, max_attempts=0)


async def test_unreadable_catalog_still_tries_candidates_in_order() -> None:
    cloud = stocked_cloud()
    cloud.set_stock("EU-RO-1", RTX4090, "SECURE", 0)
    cloud.faults.always("listGpuTypes", faults.ServerError(503))
    result = await place(cloud, retry_deadline=0.3)
    assert result.catalog_error is not None
    assert "503" in result.catalog_error
    assert result.winner == Candidate(RTX4090, "EU-SE-1", "SECURE")
    assert result.failures[0].candidate == Candidate(RTX4090, "EU-RO-1", "SECURE")


async def test_only_the_datacenters_placement_allowed_are_tried_and_reported() -> None:
    cloud = stocked_cloud()
    result = await place(cloud, datacenters=("EU-SE-1",))
    assert result.winner == Candidate(RTX4090, "EU-SE-1", "SECURE")
    assert result.datacenters == ("EU-SE-1",)
