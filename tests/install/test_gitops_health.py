"""What kstatus (Flux `wait: true`, cli-utils), Argo CD and Flux's `healthCheckExprs` report
for pools the controller really produces (docs/operating.md#gitops-health).

Each verdict comes from a model of the tool that follows its source (tests/kstatus_model.py,
tests/argo_lua.py, tests/flux_cel.py), run on the pool object as the API server serves it:
the stored object with the CRD's defaults filled in, as it fills them on every read. The
two models written here are first held to the real components' own test cases.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from rpp.decide.state.conditions import ALL_CONDITIONS, RECONCILING, STALLED
from rpp.model.crd import build_crd
from rpp.model.status import PoolStatus
from rpp.sim.faults import NoCapacity, ServerError
from rpp.sim.virtual_time import VirtualClock, run_virtual
from tests.argo_lua import argo_health
from tests.controller_kit import manifest, world
from tests.crd_admission import apply_defaults
from tests.flux_cel import evaluate_boolean, flux_status
from tests.kstatus_model import compute
from tests.stories.test_replacement import healthy_pool, ready_pods
from tests.stories.world_kit import Story, pool_manifest, story

ROOT = Path(__file__).parents[2]
FLUX = yaml.safe_load((ROOT / "deploy" / "gitops" / "flux-kustomization-health.yaml").read_text())
(EXPRS,) = FLUX["spec"]["healthCheckExprs"]

WAITING = ("InProgress", "Progressing", "InProgress")
FAILED = ("Failed", "Degraded", "Failed")
DONE = ("Current", "Healthy", "Current")


def served(obj: dict[str, Any]) -> dict[str, Any]:
    """The pool as the API server serves it: the CRD's defaults filled into the stored
    object (apiextensions-apiserver applies them on every read from etcd)."""
    (version,) = build_crd()["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    out: dict[str, Any] = apply_defaults(schema, copy.deepcopy(obj))
    return out


def verdicts(obj: dict[str, Any]) -> tuple[str, str, str]:
    """(kstatus, Argo CD, Flux healthCheckExprs) for the pool object as served."""
    shown = served(obj)
    return compute(shown).status, argo_health(shown)[0], flux_status(EXPRS, shown)


def stored(s: Story) -> dict[str, Any]:
    return s.world.kube.pool(s.name)


def summary(status: PoolStatus) -> dict[str, tuple[str, str]]:
    """Ready, Reconciling and Stalled as (status, reason), checked for what kstatus needs:
    each carries the status's observedGeneration, never both of the last two True, and
    one of them True whenever Ready is False."""
    out: dict[str, tuple[str, str]] = {}
    for kind in ("Ready", RECONCILING, STALLED):
        cond = status.condition(kind)
        assert cond is not None, f"every status the controller writes has {kind}"
        assert cond.observed_generation == status.observed_generation
        out[kind] = (cond.status, cond.reason)
    pending = (out[RECONCILING][0], out[STALLED][0])
    assert pending != ("True", "True")
    if out["Ready"][0] == "False":  # so kstatus never falls back on Ready alone
        assert "True" in pending
    return out


# --- the models, held to the real components' own test cases --------------------------

CRD = {"apiVersion": "something/v1", "kind": "MyCR"}


@pytest.mark.parametrize(
    ("status", "generation", "expected"),
    [
        (None, 1, "Current"),  # crdNoStatus
        ({"conditions": [{"type": "Ready", "status": "True"}]}, 1, "Current"),  # crdReady
        (
            {"observedGeneration": 1, "conditions": [{"type": "Ready", "status": "False"}]},
            1,
            "InProgress",
        ),  # crdNotReady
        ({"conditions": [{"type": "SomeCondition", "status": "False"}]}, 1, "Current"),
        ({"observedGeneration": 1}, 2, "InProgress"),  # crdMismatchStatusGeneration
    ],
)
def test_the_kstatus_model_agrees_with_cli_utils_own_cases(
    status: dict[str, Any] | None, generation: int, expected: str
) -> None:
    """cli-utils pkg/kstatus/status/status_compute_test.go, TestCRDGenericStatus."""
    obj: dict[str, Any] = {**CRD, "metadata": {"name": "test", "generation": generation}}
    if status is not None:
        obj["status"] = status
    assert compute(obj).status == expected


IN_PROGRESS = "has(status.observedGeneration) && metadata.generation != status.observedGeneration"
READY_FALSE = "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'False')"
READY_TRUE = "status.conditions.filter(e, e.type == 'Ready').all(e, e.status == 'True')"
DATA = {"current": "data.current", "inProgress": "data.inProgress", "failed": "data.failed"}


@pytest.mark.parametrize(
    ("exprs", "obj", "expected"),
    [
        (
            {"current": "true"},
            {"metadata": {"generation": 2}, "status": {"observedGeneration": 1}},
            "InProgress",
        ),
        (
            {**DATA, "current": "data.currentt"},
            {"data": {"current": True, "inProgress": False, "failed": False}},
            "Unknown",
        ),
        (
            {**DATA, "failed": "data.failedd"},
            {"data": {"current": True, "inProgress": False, "failed": False}},
            "Unknown",
        ),
        (DATA, {"data": {"current": False, "inProgress": False, "failed": False}}, "InProgress"),
        (DATA, {"data": {"current": True, "inProgress": True, "failed": True}}, "InProgress"),
        (DATA, {"data": {"current": True, "inProgress": False, "failed": True}}, "Failed"),
        (DATA, {"data": {"current": True, "inProgress": False, "failed": False}}, "Current"),
        ({"inProgress": IN_PROGRESS, "failed": READY_FALSE, "current": READY_TRUE}, {}, "Unknown"),
        ({"failed": READY_FALSE, "current": READY_TRUE}, {"status": {}}, "Unknown"),
        ({"failed": READY_FALSE, "current": READY_TRUE}, {"status": {"conditions": []}}, "Failed"),
        (
            {"current": "status.observedGeneration == '2'"},
            {"metadata": {"generation": 2}, "status": {"observedGeneration": "2"}},
            "Current",
        ),
    ],
)
def test_the_flux_model_agrees_with_fluxcd_pkg_own_cases(
    exprs: dict[str, str], obj: dict[str, Any], expected: str
) -> None:
    """fluxcd/pkg runtime/cel/status_evaluator_test.go, TestStatusEvaluator_Evaluate (an
    error there is Unknown to Flux's wait)."""
    assert flux_status(exprs, obj) == expected


def test_has_on_an_object_without_status_errors_as_in_cel_go() -> None:
    """fluxcd/pkg's case "object without status with inProgress expression": the error
    comes from the `has()` of inProgress itself (cel-python alone would say false)."""
    with pytest.raises(Exception, match="status"):
        evaluate_boolean(IN_PROGRESS, {})


# --- pools the controller produces --------------------------------------------------------


def test_a_pool_just_applied_waits_in_every_tool_before_the_controller_writes() -> None:
    async def body(s: Story) -> None:
        assert "status" not in stored(s)
        assert verdicts(stored(s)) == WAITING
        assert compute(served(stored(s))).message.endswith("latest observed generation is 0")

    story(body)


def test_a_pool_whose_pods_come_up_waits_then_is_current_once_they_serve() -> None:
    async def body(s: Story) -> None:
        await s.loops(1)
        assert summary(s.status())[RECONCILING] == ("True", "PodsNotReady")
        assert verdicts(stored(s)) == WAITING
        await healthy_pool(s)
        done = await s.until(lambda st: summary(st)[RECONCILING][0] == "False", limit=10)
        assert summary(done) == {
            "Ready": ("True", "PodsReady"),
            RECONCILING: ("False", "Reconciled"),
            STALLED: ("False", "NotStalled"),
        }
        assert verdicts(stored(s)) == DONE

    story(body)


def test_an_invalid_spec_fails_in_every_tool_at_once() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        s.apply(replicas={"min": 3, "max": 2})
        await s.loops(1)
        assert summary(s.status())[STALLED] == ("True", "InvalidSpec")
        assert s.status().observed_generation == stored(s)["metadata"]["generation"]
        assert verdicts(stored(s)) == FAILED

    story(body)


def test_a_spec_change_waits_until_the_controller_has_seen_it() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        await s.until(lambda st: summary(st)[RECONCILING][0] == "False", limit=10)
        s.apply(image="ghcr.io/example/inference:1.5.0")
        assert verdicts(stored(s)) == WAITING
        await s.loops(1)
        assert summary(s.status())[RECONCILING] == ("True", "RollingOut")
        assert verdicts(stored(s)) == WAITING

    story(body)


def test_no_stock_waits_then_fails_once_it_has_lasted_ten_minutes() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        s.world.cloud.faults.always("createPod", NoCapacity())
        s.world.pods[sorted(ready_pods(before))[0]].die()
        short = await s.until(
            lambda st: getattr(st.condition("CapacityUnavailable"), "status", "") == "True",
            limit=20,
        )
        assert summary(short)[RECONCILING] == ("True", "CapacityUnavailable")
        assert verdicts(stored(s)) == WAITING
        await s.loops(20)  # 10 minutes of 30-second loops
        assert summary(s.status())[STALLED] == ("True", "CapacityUnavailable")
        assert verdicts(stored(s)) == FAILED
        s.world.cloud.faults.clear()
        await s.until(lambda st: summary(st)[RECONCILING] == ("False", "Reconciled"), limit=40)
        assert verdicts(stored(s)) == DONE

    story(body)


def test_runpod_unreachable_waits_then_fails_once_it_has_lasted_ten_minutes() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        s.world.cloud.faults.always("listPods", ServerError(status=503))
        await s.loops(1)
        assert summary(s.status())[RECONCILING] == ("True", "NotActing")
        assert verdicts(stored(s)) == WAITING
        await s.loops(20)
        assert summary(s.status())[STALLED] == ("True", "NotActing")
        assert verdicts(stored(s)) == FAILED
        s.world.cloud.faults.clear()
        await s.until(lambda st: summary(st)[STALLED] == ("False", "NotStalled"), limit=2)

    story(body)


def test_a_cost_cap_that_blocks_the_pools_first_pods_fails_at_once() -> None:
    capped = pool_manifest()
    capped["spec"]["limits"]["maxHourlyCostUsd"] = 0

    async def body(s: Story) -> None:
        await s.loops(1)
        assert summary(s.status())[STALLED] == ("True", "CreateBlocked")
        assert s.status().condition("CreateBlocked").reason == "CostCapReached"  # type: ignore[union-attr]
        assert verdicts(stored(s)) == FAILED

    story(body, manifest=capped)


def test_a_dry_run_pool_is_current_once_observed_though_its_plan_is_blocked() -> None:
    """DryRun carries nothing out: a cap its plan runs into is news, not a wait."""
    dry = pool_manifest(dryRun=True)
    dry["spec"]["limits"]["maxHourlyCostUsd"] = 0

    async def body(s: Story) -> None:
        await s.loops(1)
        assert s.status().condition("CreateBlocked").status == "True"  # type: ignore[union-attr]
        assert summary(s.status())[RECONCILING] == ("False", "DryRun")
        assert verdicts(stored(s)) == DONE

    story(body, manifest=dry)


def test_a_pool_being_deleted_is_terminating_to_kstatus_and_pending_to_argo_cd() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        s.world.kube.delete_pool(s.name)
        await s.loops(1)
        assert summary(s.status())[RECONCILING] == ("True", "Deleting")
        assert verdicts(stored(s)) == ("Terminating", "Progressing", "InProgress")

    story(body)


def test_a_reconcile_that_raises_fails_in_every_tool_and_recovers_on_its_merits() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"))
        await w.loop()
        original = w.kube.read_config_map
        broken = {"on": True}

        async def read(name: str) -> Any:
            if broken["on"]:
                raise RuntimeError("boom: a bug in this pool's path")
            return await original(name)

        w.kube.read_config_map = read  # type: ignore[method-assign]
        w.patch_pool("inference", {"replicas": {"min": 2, "max": 3}})
        await asyncio.sleep(30)
        await w.loop()
        obj = w.kube.pool("inference")
        status = PoolStatus.from_stored(obj["status"])
        assert status.observed_generation == obj["metadata"]["generation"] == 2
        assert summary(status)[STALLED] == ("True", "ReconcileFailed")
        assert verdicts(obj) == FAILED

        broken["on"] = False
        await asyncio.sleep(30)
        await w.loop()
        back = PoolStatus.from_stored(w.kube.pool("inference")["status"])
        assert summary(back)[STALLED] == ("False", "NotStalled")
        assert summary(back)[RECONCILING][0] == "True"
        await w.close()

    run_virtual(body)


def test_reconciling_and_stalled_make_no_events_and_no_condition_metric() -> None:
    assert RECONCILING not in ALL_CONDITIONS
    assert STALLED not in ALL_CONDITIONS

    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        s.world.pods[sorted(ready_pods(before))[0]].die()
        await s.until(lambda st: summary(st)[RECONCILING] == ("False", "Reconciled"), limit=60)
        reasons = {e["reason"] for e in s.world.kube.events}
        assert not {r for r in reasons if "Reconcil" in r or "Stall" in r}
        registry = s.world.controller.registry
        types = {
            sample.labels["type"]
            for family in registry.collect()
            if family.name == "runpod_pool_condition"
            for sample in family.samples
        }
        assert "CapacityUnavailable" in types  # the pool's conditions are exported ...
        assert RECONCILING not in types  # ... and Reconciling is not one of them

    story(body)
