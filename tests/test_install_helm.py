"""The Helm install path, rendered and linted by the real Helm library (Helm's Go SDK).

Covers the chart under default values, with two pools, with every optional object on, and
with bad values (the schema must refuse them, naming the value); that the slots ConfigMaps
survive upgrades (keep policy, and a lookup against a live API server so an upgrade renders
the controller's content instead of the empty one); and that the chart ships the same CRD,
alert rules and dashboard as deploy/ and examples/.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import helm_python as helm
import kmock
import pytest
import yaml

from rpp.model.crd import render_crd
from tests.crd_admission import admit
from tests.fixtures_install import (
    CHART,
    NAMESPACE,
    RELEASE,
    ROOT,
    example,
    example_pool_spec,
    find,
    kinds,
    objects,
    render,
    two_pools,
)
from tests.nginx_runner import free_port, nginx_test, write_config

CONFIG_MAPS = kmock.resource("", "v1", "configmaps")


def test_default_values_install_the_controller_and_nothing_optional() -> None:
    objs = objects(render())
    assert kinds(objs) == ["Deployment", "Role", "RoleBinding", "Service", "ServiceAccount"]
    for obj in objs:
        assert obj["metadata"]["name"] == "runpod-pool-controller"
        assert obj["metadata"]["namespace"] == NAMESPACE
    deployment = find(objs, "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "ownego/runpod-pool-controller:0.2.1"
    # No Prometheus by default: the variable is left out, not set empty.
    assert "PROMETHEUS_URL" not in {e["name"] for e in container["env"]}


def test_seed_install_command_sets_the_prometheus_url() -> None:
    url = "http://prometheus-operated.monitoring.svc:9090"
    deployment = find(objects(render({"prometheusUrl": url})), "Deployment")
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "PROMETHEUS_URL", "value": url} in env


def test_chart_installs_the_generated_crd_from_crds_only() -> None:
    with helm.Chart.load(CHART) as chart:
        crds = chart.crds
    assert [c["filename"] for c in crds] == ["runpod-pool-controller/crds/runpodpools.yaml"]
    assert crds[0]["data"] == render_crd()
    # Templates never carry the CRD: Helm would then delete it (and every pool) on uninstall.
    assert "CustomResourceDefinition" not in kinds(objects(render(two_pools())))


def test_two_pools_get_their_pool_slots_configmap_and_rbac() -> None:
    values = two_pools()
    objs = objects(render(values))
    for name, pool in values["pools"].items():
        rendered = find(objs, "RunPodPool", name)
        assert rendered["apiVersion"] == "runpodpool.ownego.com/v1alpha1"
        assert rendered["spec"] == pool["spec"]
    inference, batch = (
        find(objs, "ConfigMap", n) for n in ("inference-nginx-slots", "batch-slots")
    )
    assert "upstream rpp_batch_jobs_slots {" in batch["data"]["upstream.conf"]
    assert "server 127.0.0.1:9001 max_fails=0;" in batch["data"]["upstream.conf"]
    assert "listen 9001;" in batch["data"]["servers.conf"]
    rules = find(objs, "Role")["rules"]
    named = {
        (rule["resources"][0], name) for rule in rules for name in rule.get("resourceNames", [])
    }
    assert {
        ("configmaps", "inference-nginx-slots"),
        ("configmaps", "batch-slots"),
        ("secrets", "inference-env"),
        ("secrets", "batch-env"),
    } <= named
    assert inference["metadata"]["namespace"] == NAMESPACE


def test_chart_pools_are_admitted_by_the_crd_schema() -> None:
    for pool in (o for o in objects(render(two_pools())) if o["kind"] == "RunPodPool"):
        assert admit(pool["spec"]) == [], pool["metadata"]["name"]


def test_chart_pool_with_a_bad_spec_is_refused_by_the_crd_schema() -> None:
    """The values schema leaves a pool's spec to the CRD; the API server refuses it."""
    values = {"pools": {"inference": {"spec": {"replicas": {"min": 3, "max": 2}}}}}
    pool = find(objects(render(values)), "RunPodPool")
    assert admit(pool["spec"]) == ["replicas.min must not be greater than replicas.max"]


def test_inference_slots_the_chart_renders_are_accepted_by_real_nginx(
    tmp_path: Path,
) -> None:
    objs = objects(render(two_pools()))
    data = find(objs, "ConfigMap", "inference-nginx-slots")["data"]
    result = nginx_test(write_config(tmp_path, data, public_port=free_port()))
    assert result.returncode == 0, result.stderr


def test_slots_configmaps_are_kept_by_upgrades_and_uninstalls() -> None:
    objs = objects(render(two_pools()))
    slots = [o for o in objs if o["kind"] == "ConfigMap"]
    assert len(slots) == 2
    for config_map in slots:
        assert config_map["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


async def test_upgrade_renders_the_controllers_slots_not_the_empty_ones(
    kmock: kmock.KubernetesEmulator,
) -> None:
    """Helm's lookup reads the live ConfigMap from a real (emulated) API server over HTTP:
    the controller's content comes back as it is, so the upgrade's patch changes nothing.
    A pool whose ConfigMap does not exist yet still gets the empty one."""
    kmock.resources["v1/configmaps"] = {"kind": "ConfigMap", "namespaced": True, "verbs": ["get"]}
    written = {
        "proxy.conf": "# Written by runpod-pool-controller for pool inference.\n",
        "upstream.conf": "upstream rpp_inference_slots {\n    server 127.0.0.1:8082;\n}\n",
        "servers.conf": "server {\n    listen 8082;\n}\n",
        "slots.json": '{"8082": "abcdefgh123456"}\n',
    }
    kmock.objects[CONFIG_MAPS, NAMESPACE, "inference-nginx-slots"] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "inference-nginx-slots", "namespace": NAMESPACE},
        "data": written,
    }

    def upgrade_render() -> dict[str, str]:
        with (
            helm.Chart.load(CHART) as chart,
            helm.Config(kube_apiserver=str(kmock.url), kube_token="t", namespace=NAMESPACE) as cfg,
        ):
            rendered: dict[str, str] = cfg.render(
                chart, two_pools(), name=RELEASE, namespace=NAMESPACE, is_upgrade=True
            )
            return rendered

    objs = objects(await asyncio.to_thread(upgrade_render))
    assert find(objs, "ConfigMap", "inference-nginx-slots")["data"] == written
    batch = find(objs, "ConfigMap", "batch-slots")["data"]
    assert "listen 9001;" in batch["servers.conf"]
    looked_up = {r.name for r in kmock if r.resource and r.resource.plural == "configmaps"}
    assert looked_up == {"inference-nginx-slots", "batch-slots"}
    # Offline (no cluster), the same upgrade would have rendered the empty slots.
    offline = find(
        objects(render(two_pools(), is_upgrade=True)), "ConfigMap", "inference-nginx-slots"
    )
    assert offline["data"] != written


BAD_VALUES: dict[str, tuple[dict[str, Any], str]] = {
    "misspelled key": ({"replicas": 2}, "additional properties 'replicas' not allowed"),
    "zero replicas": ({"replicaCount": 0}, "/replicaCount"),
    "pull policy": ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
    "interval as number": ({"reconcileInterval": "30s"}, "/reconcileInterval"),
    "url without scheme": ({"prometheusUrl": "prometheus:9090"}, "/prometheusUrl"),
    "log level": ({"logLevel": "verbose"}, "/logLevel"),
    "cpu quantity": (
        {"resources": {"requests": {"cpu": "a lot", "memory": "1Gi"}}},
        "/resources/requests/cpu",
    ),
    "pool name": ({"pools": {"Inference_1": {"spec": {}}}}, "Inference_1"),
    "pool without spec key": (
        {"pools": {"inference": {"replicas": {"min": 1}}}},
        "/pools/inference",
    ),
    "pool spec not a map": ({"pools": {"inference": {"spec": "min 2"}}}, "/pools/inference/spec"),
    "rbac name": ({"rbac": {"extraEnvSecrets": ["Not A Name"]}}, "/rbac/extraEnvSecrets/0"),
    "monitor flag": ({"serviceMonitor": {"enabled": "yes"}}, "/serviceMonitor/enabled"),
}


@pytest.mark.parametrize("case", list(BAD_VALUES), ids=list(BAD_VALUES))
def test_bad_values_are_refused_naming_the_value(case: str) -> None:
    values, expected = BAD_VALUES[case]
    with pytest.raises(helm.HelmValuesError) as refused:
        render(values)
    message = str(refused.value)
    assert "values don't meet the specifications of the schema" in message
    assert expected in message, message


def test_every_value_is_commented_and_in_the_schema() -> None:
    lines = (CHART / "values.yaml").read_text().splitlines()
    schema = json.loads((CHART / "values.schema.json").read_text())
    uncommented = []
    for i, line in enumerate(lines):
        match = re.match(r"^(\s*)([A-Za-z][\w-]*):", line)
        if not match:
            continue
        before = lines[i - 1].strip() if i else ""
        if not before.startswith("#") and "#" not in line:
            uncommented.append(line.strip())
    assert uncommented == []

    def walk(values: Any, node: dict[str, Any], path: str) -> None:
        if not isinstance(values, dict) or "properties" not in node:
            return
        for key, value in values.items():
            assert key in node["properties"], f"{path}{key} is not in values.schema.json"
            assert node["properties"][key].get("description"), f"{path}{key}"
            walk(value, node["properties"][key], f"{path}{key}.")

    walk(yaml.safe_load("\n".join(lines)), schema, "")


@pytest.mark.parametrize("values", [{}, two_pools()], ids=["default", "two pools"])
def test_chart_lints_clean(values: dict[str, Any]) -> None:
    report = helm.lint(CHART, values, strict=True, namespace=NAMESPACE, kube_version="v1.25.0")
    assert report["errors"] == []
    # Severity 1 is information ("icon is recommended"); warnings and errors fail.
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_lint_catches_a_broken_template(tmp_path: Path) -> None:
    """Guards the guard: the linter really renders the templates."""
    broken = tmp_path / "runpod-pool-controller"
    with helm.Chart.load(CHART) as chart:
        chart.save_dir(tmp_path)
    (broken / "templates" / "broken.yaml").write_text("{{ .Values.nope.nope }}\n")
    report = helm.lint(broken, strict=True)
    assert report["errors"] or any(m["severity"] == 3 for m in report["messages"])


def test_notes_say_what_to_run_next() -> None:
    notes = render()["runpod-pool-controller/templates/NOTES.txt"]
    assert "kubectl -n runpod get rpp -o wide" in notes
    assert "kubectl -n runpod logs deploy/runpod-pool-controller | grep 'would:'" in notes
    assert "dryRun: false" in notes
    assert "prometheusUrl is not set" in notes
    with_pools = render(two_pools())["runpod-pool-controller/templates/NOTES.txt"]
    assert "Pools installed: batch-jobs, inference." in with_pools


def test_optional_monitoring_objects_ship_the_examples_rules_and_the_dashboard() -> None:
    values = {
        "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
        "prometheusRule": {"enabled": True, "labels": {"role": "alert-rules"}},
        "grafanaDashboard": {"enabled": True, "namespace": "monitoring"},
    }
    objs = objects(render(values))
    monitor = find(objs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    service = find(objs, "Service")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    rule = find(objs, "PrometheusRule")
    assert rule["metadata"]["labels"]["role"] == "alert-rules"
    assert (
        rule["spec"] == find(example("examples/prometheus-rules.yaml"), "PrometheusRule")["spec"]
    )
    dashboard = find(objs, "ConfigMap", "runpod-pool-controller-dashboard")
    assert dashboard["metadata"]["namespace"] == "monitoring"
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads(dashboard["data"]["runpod-pool-controller.json"])
    assert shipped == json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())


def test_chart_dashboard_file_is_the_deploy_one() -> None:
    chart_copy = CHART / "dashboards" / "runpod-pool-controller.json"
    assert chart_copy.read_text() == (ROOT / "deploy" / "grafana-dashboard.json").read_text()


def test_extra_rbac_names_cover_pools_applied_with_kubectl() -> None:
    values = {"rbac": {"extraSlotsConfigMaps": ["x-slots"], "extraEnvSecrets": ["x-env"]}}
    rules = find(objects(render(values)), "Role")["rules"]
    assert {
        "apiGroups": [""],
        "resources": ["secrets"],
        "resourceNames": ["x-env"],
        "verbs": ["get"],
    } in rules
    assert any(r.get("resourceNames") == ["x-slots"] for r in rules)


def test_example_pool_spec_round_trips_through_values() -> None:
    """Every field of examples/pool.yaml survives Helm's values handling unchanged."""
    values = {"pools": {"inference": {"spec": example_pool_spec()}}}
    assert find(objects(render(values)), "RunPodPool")["spec"] == example_pool_spec()
