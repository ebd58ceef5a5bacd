"""The plain-manifest install path: every file the seed's install section applies exists, is
valid for the API server (offline schemas), and agrees with the others on names.

The seed's steps: deploy/crd.yaml, deploy/rbac.yaml, deploy/controller.yaml, then
examples/nginx.yaml, examples/pool.yaml, and optionally
examples/scrapeconfig.yaml and deploy/servicemonitor.yaml, all in namespace runpod with a
pool named inference.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import pytest

from tests.fixtures_install import (
    NAMESPACE,
    ROOT,
    example,
    find,
    kinds,
    objects,
    render,
    schema_problems,
    two_pools,
)

SEED_INSTALL_FILES = [
    "deploy/crd.yaml",
    "deploy/rbac.yaml",
    "deploy/controller.yaml",
    "examples/nginx.yaml",
    "examples/pool.yaml",
    "examples/scrapeconfig.yaml",
    "deploy/servicemonitor.yaml",
]
MANIFESTS = sorted(
    str(p.relative_to(ROOT))
    for folder in ("deploy", "examples")
    for p in (ROOT / folder).glob("*.yaml")
)


def plain() -> list[dict[str, Any]]:
    return [obj for name in MANIFESTS for obj in example(name)]


def test_every_file_the_seed_install_applies_exists_and_is_covered() -> None:
    assert set(SEED_INSTALL_FILES) <= set(MANIFESTS)
    assert "examples/prometheus-rules.yaml" in MANIFESTS
    assert (ROOT / "deploy" / "grafana-dashboard.json").is_file()


@pytest.mark.parametrize("name", MANIFESTS)
def test_plain_manifest_is_valid_for_the_api_server(name: str) -> None:
    for obj in example(name):
        assert obj["metadata"].get("namespace", NAMESPACE) == NAMESPACE
        assert schema_problems(obj) == [], f"{name}: {obj['kind']} {obj['metadata']['name']}"


def test_every_chart_object_is_valid_for_the_api_server() -> None:
    values = {
        **two_pools(),
        "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
        "prometheusRule": {"enabled": True},
        "grafanaDashboard": {"enabled": True},
        "prometheusUrl": "http://prometheus-operated.monitoring.svc:9090",
    }
    objs = objects(render(values))
    assert kinds(objs) == [
        "ConfigMap",  # the dashboard; the slots ConfigMaps are the controller's
        "Deployment",
        "Job",  # the uninstall hook: Job, Role, RoleBinding, ServiceAccount
        "Pod",  # helm test
        "PodDisruptionBudget",
        "PrometheusRule",
        "Role",
        "Role",
        "RoleBinding",
        "RoleBinding",
        "RunPodPool",
        "RunPodPool",
        "Service",
        "ServiceAccount",
        "ServiceAccount",
        "ServiceMonitor",
    ]
    for obj in objs:
        assert schema_problems(obj) == [], f"{obj['kind']} {obj['metadata']['name']}"


def test_validators_refuse_unknown_fields_and_wrong_types() -> None:
    """Guards the guards: a typo in any kind of object is caught, not skipped."""
    deployment = find(example("deploy/controller.yaml"), "Deployment")
    deployment["spec"]["replica"] = 2
    assert any("replica" in p for p in schema_problems(deployment))
    monitor = find(example("deploy/servicemonitor.yaml"), "ServiceMonitor")
    monitor["spec"]["endpoints"][0]["intervall"] = "30s"
    assert any("intervall" in p for p in schema_problems(monitor))
    scrape = find(example("examples/scrapeconfig.yaml"), "ScrapeConfig")
    scrape["spec"]["httpSDConfigs"] = "not a list"
    assert schema_problems(scrape) != []
    pool = find(example("examples/pool.yaml"), "RunPodPool")
    pool["spec"]["replicas"]["min"] = "two"
    assert schema_problems(pool) != []


def controller_sources() -> dict[str, list[dict[str, Any]]]:
    return {"plain": plain(), "chart": objects(render())}


@pytest.mark.parametrize("source", ["plain", "chart"])
def test_controller_runs_two_locked_down_replicas(source: str) -> None:
    deployment = find(controller_sources()[source], "Deployment", "runpod-pool-controller")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    [container] = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    resources = container["resources"]
    # Memory is never overcommitted; CPU bursts above its request (test_chart_resources.py).
    assert resources["requests"]["memory"] == resources["limits"]["memory"]
    assert set(resources["limits"]) == set(resources["requests"]) == {"cpu", "memory"}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    env = {e["name"]: e for e in container["env"]}
    # The key is the Secret's, mounted as a file the controller reads again every loop
    # (a rotated key needs no restart), never a literal and never an env var frozen at start.
    assert "RUNPOD_API_KEY" not in env
    key_file = PurePosixPath(env["RUNPOD_API_KEY_FILE"]["value"])
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    (mount,) = [m for m in mounts.values() if key_file.parent == PurePosixPath(m["mountPath"])]
    assert "subPath" not in mount, "a subPath mount never sees the Secret's updates"
    assert mount.get("readOnly") is True
    secret = volumes[mount["name"]]["secret"]
    assert secret["secretName"] == "runpod-pool-controller"
    assert secret["items"] == [{"key": "RUNPOD_API_KEY", "path": key_file.name}]
    assert env["NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["LISTEN_ADDRESS"]["value"] == "0.0.0.0:8080"


def test_chart_and_plain_controller_pods_are_the_same() -> None:
    """The two install paths run the same pod, up to Helm's labels."""

    def pod(objs: list[dict[str, Any]]) -> dict[str, Any]:
        spec = dict(find(objs, "Deployment", "runpod-pool-controller")["spec"]["template"]["spec"])
        spec.pop("topologySpreadConstraints")
        [container] = spec.pop("containers")
        return {**spec, "container": container}

    sources = controller_sources()
    assert pod(sources["chart"]) == pod(sources["plain"])


def test_plain_manifests_agree_on_names() -> None:
    objs = plain()
    pool = find(objs, "RunPodPool", "inference")["spec"]
    rbac = find(objs, "Role", "runpod-pool-controller")["rules"]
    named = {
        (rule["resources"][0], name) for rule in rbac for name in rule.get("resourceNames", [])
    }
    # The slots ConfigMap the controller creates is the one the Role names.
    assert ("configmaps", pool["nginx"]["slotsConfigMap"]) in named
    assert ("secrets", pool["envFromSecret"]) in named
    # nginx mounts the pool's static config; its reloader sidecar reads the pool's slots
    # ConfigMap, which the sidecar's Role names; its Service is the pool's.
    nginx = find(objs, "Deployment", "inference-nginx")["spec"]["template"]["spec"]
    mounted = {v["configMap"]["name"] for v in nginx["volumes"] if "configMap" in v}
    assert mounted == {pool["nginx"]["configMap"]}
    [reloader] = [c for c in nginx["containers"] if c["name"] == "slots-reloader"]
    assert f"--config-map={pool['nginx']['slotsConfigMap']}" in reloader["args"]
    sidecar_rules = find(objs, "Role", "inference-nginx-reloader")["rules"]
    assert [pool["nginx"]["slotsConfigMap"]] in [r.get("resourceNames") for r in sidecar_rules]
    assert find(objs, "Service", pool["nginx"]["service"])
    # The controller runs as the ServiceAccount the RoleBinding binds.
    sa = find(objs, "ServiceAccount", "runpod-pool-controller")["metadata"]["name"]
    binding = find(objs, "RoleBinding", "runpod-pool-controller")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}]
    assert binding["roleRef"]["name"] == "runpod-pool-controller"
    deployment = find(objs, "Deployment", "runpod-pool-controller")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == sa


def test_scrape_config_reads_the_pools_sd_feed_from_the_controller_service() -> None:
    objs = plain()
    pool = find(objs, "RunPodPool", "inference")
    service = find(objs, "Service", "runpod-pool-controller")
    [port] = service["spec"]["ports"]
    scrape = find(objs, "ScrapeConfig")["spec"]
    [sd] = scrape["httpSDConfigs"]
    name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
    assert sd["url"] == f"http://{name}.{namespace}.svc:{port['port']}/sd/inference"
    # The pool's latency and error queries select job="$job": the scrape job must match.
    assert scrape["jobName"] == pool["spec"]["prometheus"]["job"]
    assert list(scrape["params"]) == [pool["spec"]["probe"]["tokenParam"]]
    # A placeholder, never a real token, in a file meant for git.
    assert scrape["params"]["token"] == ["<metrics-token>"]


def test_service_monitor_selects_the_controller_service() -> None:
    objs = plain()
    service = find(objs, "Service", "runpod-pool-controller")
    monitor = find(objs, "ServiceMonitor")["spec"]
    labels = service["metadata"]["labels"]
    assert monitor["selector"]["matchLabels"].items() <= labels.items()
    assert monitor["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert monitor["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    deployment = find(objs, "Deployment", "runpod-pool-controller")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
