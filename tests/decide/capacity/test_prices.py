"""The cost cap's prices (rpp/decide/capacity/prices.py) and act's check against the catalog
(rpp/act/create.py): what a pod costs, what one more would, and which candidates act
tries under the cap. NaN, infinite or negative prices are no price, never zero."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from rpp.act.create import Budget, CreateReport, create_first_available
from rpp.adapters.runpod.wire import PodRequest
from rpp.decide.capacity import prices
from rpp.model.observations import PodStatus, RunPodPod
from rpp.model.spec import RunPodPoolSpec
from rpp.model.spec_load import load_pool
from rpp.sim import faults
from rpp.sim.cloud import FakeCloud
from tests.fixtures_runpod import L40S, RTX4090, client_for, stocked_cloud
from tests.stories.world_kit import pool_manifest

REQUEST = PodRequest(name="rpp-pool-b7", image="img:1")
POD = RunPodPod(
    id="p1",
    name="rpp-inference-p1",
    status=PodStatus.RUNNING,
    image="img:1",
    gpu_type=RTX4090,
    gpu_count=1,
    cloud="SECURE",
    datacenter="EU-RO-1",
    cost_per_hr=0.69,
    created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
)


def spec(**limits: float) -> RunPodPoolSpec:
    manifest = pool_manifest(
        limits={
            "maxPods": 4,
            "maxHourlyCostUsd": limits.get("cap", 2.5),
            "maxCreatesPerHour": 3,
            "estimatedPodCostUsd": limits.get("estimate", 0.5),
        },
        gpuTypes=[RTX4090, L40S],
    )
    pool, problems = load_pool(manifest)
    assert pool is not None, problems
    return pool.spec


@pytest.mark.parametrize("odd", [float("nan"), float("inf"), -1.0, None])
def test_an_odd_price_is_no_price(odd: float | None) -> None:
    assert prices.known(odd) is None
    assert prices.known(0.0) == 0.0
    assert prices.known(1.49) == 1.49


def test_a_pod_runpod_has_not_priced_counts_at_the_estimate_never_zero() -> None:
    unpriced = dataclasses.replace(POD, id="p2", cost_per_hr=float("nan"))
    cost = prices.pool_cost(spec(estimate=0.5), [POD, unpriced])
    assert cost.current == pytest.approx(1.19)
    assert cost.unpriced == 1
    assert "1 pod(s) RunPod lists without a price" in cost.describe()
    assert prices.billed([POD, unpriced]) == 0.69  # costPerHour shows only RunPod's prices


def test_one_more_pod_costs_its_catalog_price_and_only_types_that_fit_stay() -> None:
    fit = prices.candidates(spec(), catalog={RTX4090: 0.69, L40S: 1.99}, room=1.0)
    assert fit.fitting == (RTX4090,)
    assert fit.priced_out == ((L40S, 1.99),)
    unknown = prices.candidates(spec(estimate=0.5), catalog={}, room=1.0)
    assert unknown.fitting == (RTX4090, L40S), "types never priced count at the estimate"
    assert unknown.estimated == {RTX4090, L40S}


async def place(cloud: FakeCloud, budget: Budget) -> CreateReport:
    async with client_for(cloud, retry_deadline=1.5) as client:
        return await create_first_available(
            client,
            REQUEST,
            gpu_types=(RTX4090, L40S),
            datacenters=("EU-RO-1", "EU-SE-1"),
            cloud="SECURE",
            max_attempts=4,
            budget=budget,
        )


async def test_act_tries_no_candidate_above_what_is_left_under_the_cap() -> None:
    cloud = stocked_cloud()  # list prices: RTX 4090 $0.74 (its dearest datacenter), L40S $0.86
    cloud.set_stock("EU-RO-1", RTX4090, "SECURE", 0)
    cloud.set_stock("EU-SE-1", RTX4090, "SECURE", 0)
    report = await place(cloud, Budget(0.80, {}))
    assert not report.created
    assert [c.operation for c in cloud.calls] == ["listGpuTypes"], "L40S was never tried"
    assert "over the cost cap: NVIDIA L40S at $0.86/h" in report.describe()
    assert dict(report.prices)[L40S] == 0.86


async def test_without_a_catalog_act_prices_with_the_last_prices_read_or_tries_nothing() -> None:
    cloud = stocked_cloud()
    cloud.faults.always("listGpuTypes", faults.ServerError(503))
    remembered = await place(cloud, Budget(2.0, {RTX4090: 0.69}))
    assert remembered.created
    cloud = stocked_cloud()
    cloud.faults.always("listGpuTypes", faults.ServerError(503))
    blind = await place(cloud, Budget(2.0, {}))
    assert not blind.created
    assert "RunPod gives no price" in blind.describe()
    assert not [c for c in cloud.calls if c.operation == "createPod"]
