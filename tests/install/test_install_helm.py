"""The Helm install path, rendered and linted by the real Helm library (Helm's Go SDK).

Covers the chart under default values, with two pools, with every optional object on, and
with bad values (the schema must refuse them, naming the value); that nothing the chart
renders depends on the cluster (no `lookup`: Argo CD, `helm template` and `helm diff` render
what an install does, and the slots ConfigMaps are the controller's alone); that renaming
the objects keeps the Deployment's selector; and that the chart ships the same CRD, alert
rules and dashboard as deploy/ and examples/. The CRD's own chart:
tests/install/test_install_crd_chart.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from rpp import __version__
from rpp.model.crd import render_crd
from tests.crd_admission import admit
from tests.fixtures_install import (
    CHART,
    CRD_CHART,
    NAMESPACE,
    RELEASE,
    ROOT,
    example,
    example_pool_spec,
    find,
    installed,
    kinds,
    objects,
    render,
    two_pools,
)


def test_default_values_install_the_controller_and_nothing_optional() -> None:
    objs = objects(render())
    # helm test's pod is a hook: Helm creates it on `helm test` only.
    assert kinds(installed(objs)) == [
        "Deployment",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]
    for obj in installed(objs):
        assert obj["metadata"]["name"] == "runpod-pool-controller"
        assert obj["metadata"]["namespace"] == NAMESPACE
    deployment = find(objs, "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"ownego/runpod-pool-controller:{__version__}"
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
    # Templates never carry the CRD: Helm would then delete it (and every pool) on uninstall,
    # and a first install with pools would fail (tests/install/test_install_crd_chart.py).
    assert "CustomResourceDefinition" not in kinds(objects(render(two_pools())))


def test_two_pools_get_their_pool_and_rbac_for_their_slots_and_secret() -> None:
    values = two_pools()
    objs = objects(render(values))
    for name, pool in values["pools"].items():
        rendered = find(objs, "RunPodPool", name)
        assert rendered["apiVersion"] == "runpodpool.ownego.com/v1alpha1"
        assert rendered["spec"] == pool["spec"]
        assert rendered["metadata"]["namespace"] == NAMESPACE
    rules = find(objs, "Role", "runpod-pool-controller")["rules"]
    named = {
        (rule["resources"][0], name) for rule in rules for name in rule.get("resourceNames", [])
    }
    assert {
        ("configmaps", "inference-nginx-slots"),
        ("configmaps", "batch-slots"),
        ("secrets", "inference-env"),
        ("secrets", "batch-env"),
    } <= named
    # The controller creates the slots ConfigMaps when they are missing.
    assert {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]} in rules


def test_chart_pools_are_admitted_by_the_crd_schema() -> None:
    for pool in (o for o in objects(render(two_pools())) if o["kind"] == "RunPodPool"):
        assert admit(pool["spec"]) == [], pool["metadata"]["name"]


def test_chart_pool_with_a_bad_spec_is_refused_by_the_crd_schema() -> None:
    """The values schema leaves a pool's spec to the CRD; the API server refuses it."""
    values = {"pools": {"inference": {"spec": {"replicas": {"min": 3, "max": 2}}}}}
    pool = find(objects(render(values)), "RunPodPool")
    assert admit(pool["spec"]) == ["replicas.min must not be greater than replicas.max"]


def test_the_chart_never_renders_a_slots_configmap_nor_asks_the_cluster() -> None:
    """GitOps: what a pool serves is the controller's to write. A template that used
    `lookup` would render empty slots wherever there is no cluster to ask (helm template,
    Argo CD, helm diff), and a sync would then overwrite the controller's: nginx answers
    503. Rendered offline, as those tools do, no ConfigMap but the optional dashboard comes
    out, and no template calls lookup at all."""
    values = {**two_pools(), "grafanaDashboard": {"enabled": True}}
    for is_upgrade in (False, True):
        objs = objects(render(values, is_upgrade=is_upgrade))
        config_maps = [o["metadata"]["name"] for o in objs if o["kind"] == "ConfigMap"]
        assert config_maps == ["runpod-pool-controller-dashboard"]
        for pool in (o for o in objs if o["kind"] == "RunPodPool"):
            assert set(pool) == {"apiVersion", "kind", "metadata", "spec"}
    for template in sorted(p for p in (CHART / "templates").rglob("*") if p.is_file()):
        assert not re.search(r"\blookup\b", template.read_text()), template.name


def test_renaming_the_objects_keeps_the_selector_so_upgrades_work() -> None:
    """A Deployment's selector is immutable: fullnameOverride renames every object, never
    the standard name and instance labels the selector uses."""
    default = objects(render())
    renamed = objects(render({"fullnameOverride": "gpu-pools"}))
    before, after = find(default, "Deployment"), find(renamed, "Deployment")
    assert after["metadata"]["name"] == "gpu-pools"
    assert (
        after["spec"]["selector"]
        == before["spec"]["selector"]
        == {
            "matchLabels": {
                "app.kubernetes.io/name": "runpod-pool-controller",
                "app.kubernetes.io/instance": RELEASE,
            }
        }
    )
    service = find(renamed, "Service")
    assert service["metadata"]["name"] == "gpu-pools"
    pod_labels = after["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert find(renamed, "RoleBinding")["subjects"][0]["name"] == "gpu-pools"


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
    # What used to crash-loop the pod or break Prometheus, refused before anything is applied.
    "log format yaml": ({"logFormat": "yaml"}, "at '/logFormat': value must be one of"),
    "memory in millibytes": (
        {"resources": {"limits": {"cpu": "500m", "memory": "256m"}}},
        "/resources/limits/memory",
    ),
    "scrape timeout over the interval": (
        {"serviceMonitor": {"interval": "15s", "scrapeTimeout": "20s"}},
        "/serviceMonitor/scrapeTimeout",
    ),
    "pool spec field type": (
        {"pools": {"inference": {"spec": {"replicas": {"min": "two"}}}}},
        "/pools/inference/spec/replicas/min",
    ),
    "pool spec typo": (
        {"pools": {"inference": {"spec": {"templateID": "abc"}}}},
        "/pools/inference/spec",
    ),
    "digest": ({"image": {"digest": "latest"}}, "/image/digest"),
    "existing account without a name": (
        {"serviceAccount": {"create": False}},
        "/serviceAccount",
    ),
}


@pytest.mark.parametrize("case", list(BAD_VALUES), ids=list(BAD_VALUES))
def test_bad_values_are_refused_naming_the_value(case: str) -> None:
    values, expected = BAD_VALUES[case]
    with pytest.raises(helm.HelmValuesError) as refused:
        render(values)
    message = str(refused.value)
    assert "values don't meet the specifications of the schema" in message
    assert expected in message, message


@pytest.mark.parametrize("chart", [CHART, CRD_CHART], ids=lambda chart: chart.name)
def test_every_value_is_commented_and_in_the_schema(chart: Path) -> None:
    lines = (chart / "values.yaml").read_text().splitlines()
    schema = json.loads((chart / "values.schema.json").read_text())
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
    # The leader's logs, found through the Lease: `logs deploy/...` picks any replica, and
    # the standby logs no loop.
    assert "kubectl -n runpod get lease runpod-pool-controller" in notes
    assert "jsonpath='{.spec.holderIdentity}' | cut -d_ -f1)" in notes
    assert "kubectl -n runpod logs \"$LEADER\" | grep 'would:'" in notes
    assert "logs deploy/" not in notes
    assert (
        "the chart never renders it"
        in render(two_pools())["runpod-pool-controller/templates/NOTES.txt"]
    )
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
