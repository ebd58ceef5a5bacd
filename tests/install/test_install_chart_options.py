"""What a platform team expects of a chart, rendered by the real Helm library: the uninstall
hook, `helm test`, a PodDisruptionBudget, the ServiceAccount, security contexts, scheduling
and extra env/volumes, an image digest, a NetworkPolicy, separate probe and metrics ports,
Artifact Hub annotations, a README generated from the schema, and a values schema that
refuses what would break the controller or Prometheus (jsonschema checks the grid).

Every rendered object is also checked against the Kubernetes API's schemas
(kubernetes-validate, 1.25 and the newest it knows).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import jsonschema
import pytest
import yaml

from rpp.adapters.kube.api import DEFAULT_CRD_GROUP
from rpp.adapters.kube.pool_deletion import hook_permissions
from rpp.cli import build_parser
from tests.fixtures_install import (
    CHART,
    NAMESPACE,
    ROOT,
    example_pool_spec,
    find,
    objects,
    render,
    schema_problems,
    two_pools,
)
from tests.install.test_install_rbac import grants

HOOK = "helm.sh/hook"


def hooks(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if (o["metadata"].get("annotations") or {}).get(HOOK) == kind]


def controller_pod(values: dict[str, Any] | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = find(objects(render(values)), "Deployment")["spec"]["template"]["spec"]
    return pod


def test_uninstall_hook_deletes_the_chart_pools_and_waits_before_helm_deletes_anything() -> None:
    objs = objects(render(two_pools()))
    hook = hooks(objs, "pre-delete")
    assert sorted(o["kind"] for o in hook) == ["Job", "Role", "RoleBinding", "ServiceAccount"]
    for obj in hook:
        assert schema_problems(obj) == [], obj["kind"]
        policy = obj["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
        assert policy == "before-hook-creation,hook-succeeded"  # a failed Job stays for its logs
    weight = {o["kind"]: int(o["metadata"]["annotations"]["helm.sh/hook-weight"]) for o in hook}
    assert weight["ServiceAccount"] == weight["Role"] == weight["RoleBinding"] < weight["Job"]
    job = find(hook, "Job")
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["command"] == [
        "rpp", "delete-pools", "batch-jobs", "inference", "--wait", "--timeout", "240s"
    ]  # fmt: skip
    # The command is one rpp really has, with arguments its parser accepts.
    args = build_parser(only="delete-pools").parse_args(container["command"][1:])
    assert (args.names, args.wait, args.timeout) == (["batch-jobs", "inference"], True, "240s")
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["activeDeadlineSeconds"] == 300
    controller = controller_pod(two_pools())
    assert container["image"] == controller["containers"][0]["image"]
    assert container["securityContext"] == controller["containers"][0]["securityContext"]
    assert pod["securityContext"] == controller["securityContext"]
    # Its own Role: get and delete on the chart's pools, by name; the controller's has neither.
    role = find(hook, "Role")
    assert grants(role["rules"]) == hook_permissions(DEFAULT_CRD_GROUP)
    assert role["rules"][0]["resourceNames"] == ["batch-jobs", "inference"]
    binding = find(hook, "RoleBinding")
    assert binding["subjects"][0]["name"] == pod["serviceAccountName"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert pod["serviceAccountName"] != controller["serviceAccountName"]


def test_no_uninstall_hook_without_pools_or_when_switched_off() -> None:
    assert hooks(objects(render()), "pre-delete") == []
    off = {**two_pools(), "uninstallHook": {"enabled": False}}
    assert hooks(objects(render(off)), "pre-delete") == []


def test_helm_test_asks_healthz_through_the_service() -> None:
    objs = objects(render())
    [pod] = hooks(objs, "test")
    assert schema_problems(pod) == []
    [container] = pod["spec"]["containers"]
    service = find(objs, "Service")
    url = container["command"][-1]
    port = service["spec"]["ports"][0]["port"]
    assert url == f"http://{service['metadata']['name']}.{NAMESPACE}.svc:{port}/healthz"
    assert container["command"][:2] == ["python", "-c"]
    assert "sys.exit(answer.status_code != 200)" in container["command"][2]


def test_a_disruption_budget_keeps_a_replica_through_a_node_drain() -> None:
    objs = objects(render())
    budget = find(objs, "PodDisruptionBudget")
    assert schema_problems(budget) == []
    assert budget["spec"]["maxUnavailable"] == 1
    labels = find(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # One replica: a budget would block every drain, so there is none.
    assert "PodDisruptionBudget" not in {o["kind"] for o in objects(render({"replicaCount": 1}))}


def test_an_existing_service_account_is_used_and_not_created() -> None:
    values = {"serviceAccount": {"create": False, "name": "platform-rpp"}}
    objs = objects(render(values))
    assert "ServiceAccount" not in {o["kind"] for o in objs}
    assert controller_pod(values)["serviceAccountName"] == "platform-rpp"
    assert find(objs, "RoleBinding")["subjects"][0]["name"] == "platform-rpp"
    annotated = {"serviceAccount": {"annotations": {"iam.example.com/role": "rpp"}}}
    account = find(objects(render(annotated)), "ServiceAccount")
    assert account["metadata"]["annotations"] == {"iam.example.com/role": "rpp"}


def test_security_contexts_are_strict_with_no_fixed_uid_and_can_be_changed() -> None:
    pod = controller_pod()
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }  # no runAsUser: OpenShift's restricted SCC assigns the uid
    assert pod["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    # Helm merges a map with the defaults; null drops a default key.
    custom = controller_pod({"podSecurityContext": {"runAsUser": 20000, "seccompProfile": None}})
    assert custom["securityContext"] == {"runAsNonRoot": True, "runAsUser": 20000}


def test_scheduling_extra_env_volumes_and_a_digest_reach_the_pod() -> None:
    digest = "sha256:" + "ab" * 32
    values: dict[str, Any] = {
        "image": {"digest": digest},
        "priorityClassName": "system-cluster-critical",
        "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy.internal:3128"}],
        "envFrom": [{"configMapRef": {"name": "proxy-env"}}],
        "extraVolumes": [{"name": "ca", "configMap": {"name": "corp-ca"}}],
        "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/ssl/corp", "readOnly": True}],
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "x"}},
            }
        ],
    }
    deployment = find(objects(render(values)), "Deployment")
    assert schema_problems(deployment) == []
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == f"ownego/runpod-pool-controller@{digest}"
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert values["extraEnv"][0] in container["env"]
    assert container["envFrom"] == values["envFrom"]
    assert values["extraVolumes"][0] in pod["volumes"]
    assert values["extraVolumeMounts"][0] in container["volumeMounts"]
    assert pod["topologySpreadConstraints"] == values["topologySpreadConstraints"]


def test_probes_use_their_own_port_and_the_service_only_the_metrics_one() -> None:
    objs = objects(render())
    [container] = controller_pod()["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 8080, "health": 8081}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["LISTEN_ADDRESS"] == "0.0.0.0:8080"
    assert env["HEALTH_LISTEN_ADDRESS"] == "0.0.0.0:8081"
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert [p["targetPort"] for p in find(objs, "Service")["spec"]["ports"]] == ["http"]
    with pytest.raises(Exception, match="healthPort: 8080 is port's too"):
        render({"healthPort": 8080})


def test_the_network_policy_opens_only_the_two_ports() -> None:
    prometheus = {"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}
    values = {"networkPolicy": {"enabled": True, "metricsFrom": [prometheus]}}
    objs = objects(render(values))
    policy = find(objs, "NetworkPolicy")
    assert schema_problems(policy) == []
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    metrics, health = policy["spec"]["ingress"]
    assert metrics["ports"] == [{"port": "http", "protocol": "TCP"}]
    # The named peers, then helm test's pod (tests/install/test_chart_network_policy.py).
    assert metrics["from"][0] == prometheus
    assert len(metrics["from"]) == 2
    assert health == {"ports": [{"port": "health", "protocol": "TCP"}]}
    labels = find(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert "NetworkPolicy" not in {o["kind"] for o in objects(render())}


RELABELINGS = [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}]
METRIC_RELABELINGS = [
    {"sourceLabels": ["__name__"], "regex": "python_gc_.*", "action": "drop"},
    {"action": "labeldrop", "regex": "pod_template_hash"},
]


def test_service_monitor_relabelings_reach_the_endpoint_as_the_operator_reads_them() -> None:
    values = {
        "serviceMonitor": {
            "enabled": True,
            "relabelings": RELABELINGS,
            "metricRelabelings": METRIC_RELABELINGS,
        }
    }
    monitor = find(objects(render(values)), "ServiceMonitor")
    assert schema_problems(monitor) == []
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["relabelings"] == RELABELINGS
    assert endpoint["metricRelabelings"] == METRIC_RELABELINGS
    # None given: the endpoint has neither, rather than empty lists.
    plain_monitor = find(objects(render({"serviceMonitor": {"enabled": True}})), "ServiceMonitor")
    [plain] = plain_monitor["spec"]["endpoints"]
    assert "relabelings" not in plain
    assert "metricRelabelings" not in plain


def test_the_values_schema_knows_the_operators_relabel_fields_and_refuses_others() -> None:
    """The schema's relabeling is the operator's RelabelConfig, field for field, so what
    `helm install` accepts is what the operator accepts (and a typo fails before it)."""
    from cloudcoil.models.prometheus_operator import v1

    schema = json.loads((CHART / "values.schema.json").read_text())
    fields = set(schema["definitions"]["relabeling"]["properties"])
    assert fields == set(v1.Relabeling.model_json_schema(by_alias=True)["properties"])
    assert fields == set(v1.MetricRelabeling.model_json_schema(by_alias=True)["properties"])
    validator = values_schema()
    assert validator.is_valid({"serviceMonitor": {"metricRelabelings": METRIC_RELABELINGS}})
    for bad in (
        {"source_labels": ["__name__"]},  # the Prometheus spelling, not the operator's
        {"action": "delete"},
        {"sourceLabels": ["not a label"]},
    ):
        assert not validator.is_valid({"serviceMonitor": {"relabelings": [bad]}}), bad
    # What the schema would let through, the operator's model would refuse too.
    monitor = find(
        objects(render({"serviceMonitor": {"enabled": True, "relabelings": RELABELINGS}})),
        "ServiceMonitor",
    )
    monitor["spec"]["endpoints"][0]["relabelings"] = [{"source_labels": ["__name__"]}]
    assert schema_problems(monitor) != []


def test_artifact_hub_annotations_name_the_image_and_the_crd() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    annotations = chart["annotations"]
    [image] = yaml.safe_load(annotations["artifacthub.io/images"])
    assert image["image"] == f"ownego/runpod-pool-controller:{chart['appVersion']}"
    [crd] = yaml.safe_load(annotations["artifacthub.io/crds"])
    assert (crd["kind"], crd["version"]) == ("RunPodPool", "v1alpha1")
    assert annotations["artifacthub.io/license"] == "MIT"
    assert annotations["artifacthub.io/prerelease"] == "false"
    for link in yaml.safe_load(annotations["artifacthub.io/links"]):
        path = link["url"].split("/blob/main/", 1)[1]
        assert (ROOT / path).is_file(), link["url"]


def test_the_chart_readme_and_the_embedded_pool_schema_are_current() -> None:
    """scripts/chart_docs.py writes both; stale means someone changed the values, the
    schema or the CRD without running it."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "chart_docs.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    readme = (CHART / "README.md").read_text()
    for key in ("uninstallHook.timeoutSeconds", "serviceAccount.create", "image.digest"):
        assert f"| `{key}` |" in readme


def values_schema() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads((CHART / "values.schema.json").read_text()))


def test_the_scrape_timeout_may_never_exceed_the_interval() -> None:
    """Prometheus refuses a whole configuration with one such ServiceMonitor in it."""
    schema = values_schema()
    seconds = {"10s": 10, "15s": 15, "20s": 20, "30s": 30, "60s": 60, "1m": 60, "2m": 120}
    seconds["5m"] = 300
    for interval, limit in seconds.items():
        for timeout in range(1, 400):
            values = {"serviceMonitor": {"interval": interval, "scrapeTimeout": f"{timeout}s"}}
            accepted = schema.is_valid(values)
            assert accepted == (timeout <= limit), (interval, timeout)


def test_each_pool_spec_is_checked_with_the_crds_schema() -> None:
    schema = values_schema()
    assert schema.is_valid({"pools": {"inference": {"spec": example_pool_spec()}}})
    bad = {"pools": {"inference": {"spec": {**example_pool_spec(), "replicas": {"min": "2"}}}}}
    [error] = schema.iter_errors(bad)
    assert list(error.absolute_path) == ["pools", "inference", "spec", "replicas", "min"]
    typo = {"pools": {"inference": {"spec": {**example_pool_spec(), "replica": {"min": 2}}}}}
    assert not schema.is_valid(typo)
