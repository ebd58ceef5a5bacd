"""Stories of missing information: without it the pool does not act, and says why."""

from __future__ import annotations

from rpp.sim.faults import ServerError
from tests.stories.test_replacement import healthy_pool
from tests.stories.world_kit import Story, pool_manifest, story


def not_acting(s: Story) -> tuple[str, str] | None:
    cond = s.status().condition("NotActing")
    return None if cond is None or cond.status != "True" else (cond.reason, cond.message)


def test_runpod_api_down_changes_nothing_and_says_so() -> None:
    async def body(s: Story) -> None:
        before = await healthy_pool(s)
        s.world.cloud.faults.always("listPods", ServerError(status=503))
        writes = len(s.world.cloud.write_calls)
        for pod in s.world.pods.values():
            pod.die()  # even dead pods are not judged without the listing
        await s.loops(10)
        reason, message = not_acting(s) or ("", "")
        assert reason == "RunPodUnavailable"
        assert "could not be read" in message
        assert len(s.world.cloud.write_calls) == writes
        assert [m.phase for m in s.status().members] == [m.phase for m in before.members]
        s.world.cloud.faults.clear()
        await s.loops(1)
        assert not_acting(s) is None

    story(body)


def test_the_controller_creates_the_missing_slots_configmap_in_manage_as_its_own() -> None:
    async def body(s: Story) -> None:
        assert s.world.kube.config_map("inference-nginx-slots") is None  # nobody applied one
        await s.loops(1)
        created = s.world.kube.config_map("inference-nginx-slots")
        assert created is not None
        assert created.labels["app.kubernetes.io/managed-by"] == "runpod-pool-controller"
        assert created.labels["runpodpool.ownego.com/pool"] == "inference"
        assert created.annotations["argocd.argoproj.io/sync-options"] == "Prune=false"
        assert not_acting(s) is None  # not a reason to wait: the pool acts in the same loop
        assert len(s.effects("create")) == 1
        await s.until(lambda st: st.ready == 2, limit=20)

    story(body)


def test_a_slots_configmap_from_an_older_install_is_marked_as_the_controllers_on_its_write() -> (
    None
):
    async def body(s: Story) -> None:
        helm = {"app.kubernetes.io/managed-by": "Helm"}
        s.world.kube.put_config_map("inference-nginx-slots", {}, labels=helm)
        await s.loops(1)
        written = s.world.kube.config_map("inference-nginx-slots")
        assert written is not None
        assert written.labels["app.kubernetes.io/managed-by"] == "Helm"  # Helm can adopt it back
        assert written.labels["runpodpool.ownego.com/pool"] == "inference"
        assert "runpodpool.ownego.com/written-by" in written.annotations

    story(body)


def test_dry_run_plans_the_missing_slots_configmap_and_everything_else() -> None:
    async def body(s: Story) -> None:
        await s.loops(3)
        assert s.world.kube.config_map("inference-nginx-slots") is None  # DryRun writes nothing
        planned = [a.action for a in s.status().planned_actions]
        assert "write-slots" in planned
        assert "create" in planned
        assert not_acting(s) is None

    story(body, manifest=pool_manifest(dryRun=True))


def test_observe_neither_creates_nor_plans_the_slots_configmap() -> None:
    async def body(s: Story) -> None:
        await s.loops(3)
        assert s.world.kube.config_map("inference-nginx-slots") is None
        assert s.status().planned == 0
        assert not_acting(s) is None

    story(body, manifest=pool_manifest(paused=True))


def test_missing_env_secret_or_metrics_token_stops_the_pool() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        s.world.kube.put_secret("inference-env", {"HF_TOKEN": "hf"})
        await s.loops(2)
        reason, message = not_acting(s) or ("", "")
        assert reason == "EnvSecretUnavailable"
        assert "no key METRICS_TOKEN" in message
        assert "hf" not in message
        s.world.kube.delete_secret("inference-env")
        await s.loops(1)
        _, message = not_acting(s) or ("", "")
        assert "inference-env (envFromSecret) does not exist" in message
        assert all(m.phase == "Ready" for m in s.status().members)
        assert len(s.effects("create")) == 2

    story(body)


def test_invalid_spec_is_reported_with_every_problem_and_nothing_is_done() -> None:
    async def body(s: Story) -> None:
        await healthy_pool(s)
        writes = len(s.world.cloud.write_calls)
        s.apply(cloud="CHEAP", replicas={"min": 5, "max": 3})
        await s.loops(3)
        cond = s.status().condition("InvalidSpec")
        assert cond is not None
        assert cond.status == "True"
        assert "spec.cloud" in cond.message
        assert "spec.replicas" in cond.message
        assert len(s.world.cloud.write_calls) == writes
        events = [e for e in s.world.kube.events if e.get("reason") == "InvalidSpec"]
        assert len(events) == 1
        s.apply(cloud="SECURE", replicas={"min": 2, "max": 3})
        await s.loops(1)
        assert s.status().condition("InvalidSpec").status == "False"  # type: ignore[union-attr]

    story(body)
