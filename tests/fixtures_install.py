"""Shared helpers of the install-path tests (tests/test_install_*.py).

The chart is rendered by the real Helm library (helm-python-sdk binds Helm's Go SDK), core
Kubernetes objects are checked against the API's published schemas offline
(kubernetes-validate, strict: unknown fields fail), Prometheus Operator objects against the
operator's CRD models, and RunPodPools against the generated CRD schema (tests/crd_admission.py).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import yaml

from tests.crd_admission import admit

ROOT = Path(__file__).parents[1]
CHART = ROOT / "helm" / "runpod-pool-controller"
# The CRD's own chart, installed first as release rpp-crd (docs/install.md).
CRD_CHART = ROOT / "helm" / "runpod-pool-controller-crd"
NAMESPACE = "runpod"
RELEASE = "rpp"
CRD_RELEASE = "rpp-crd"

# The oldest Kubernetes the seed supports, and the newest the validator knows.
KUBE_VERSIONS = ("1.25.0", kubernetes_validate.utils.latest_version() + ".0")

PROMETHEUS_OPERATOR_GROUP = "monitoring.coreos.com"


def example(name: str) -> list[dict[str, Any]]:
    """The objects of a YAML file under the repository, comments and all ignored."""
    return docs((ROOT / name).read_text())


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def example_pool_spec() -> dict[str, Any]:
    spec: dict[str, Any] = example("examples/pool.yaml")[0]["spec"]
    return spec


def two_pools() -> dict[str, Any]:
    """Values with two pools: the example's, and a small one with its own names and ports."""
    return {
        "pools": {
            "inference": {"spec": example_pool_spec()},
            "batch-jobs": {
                "spec": {
                    "templateId": "batch1234",
                    "replicas": {"min": 1},
                    "nginx": {"slotsConfigMap": "batch-slots", "basePort": 9001},
                    "envFromSecret": "batch-env",
                    "metricsTokenKey": "METRICS_TOKEN",
                }
            },
        }
    }


def render(
    values: Mapping[str, Any] | None = None, *, is_upgrade: bool = False, crd_chart: bool = False
) -> dict[str, str]:
    """The chart (or with `crd_chart` the CRD's chart, as its release) rendered offline, as
    `helm template` would: template path -> text."""
    with helm.Chart.load(CRD_CHART if crd_chart else CHART) as chart:
        rendered: dict[str, str] = chart.render(
            copy.deepcopy(dict(values or {})),
            name=CRD_RELEASE if crd_chart else RELEASE,
            namespace=NAMESPACE,
            is_install=not is_upgrade,
            is_upgrade=is_upgrade,
        )
    return rendered


def objects(rendered: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every object of a rendering (NOTES.txt is text, not an object)."""
    return [
        obj
        for path, text in sorted(rendered.items())
        if path.endswith((".yaml", ".yml"))
        for obj in docs(text)
    ]


def installed(objs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects `helm install` creates: hooks (the uninstall Job, helm test) left out."""
    return [o for o in objs if "helm.sh/hook" not in (o["metadata"].get("annotations") or {})]


def find(objs: Iterable[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    matches = [o for o in objs if o["kind"] == kind and name in (None, o["metadata"].get("name"))]
    assert len(matches) == 1, f"expected one {kind} {name or ''}, found {len(matches)}"
    return matches[0]


def kinds(objs: Iterable[dict[str, Any]]) -> list[str]:
    return sorted(o["kind"] for o in objs)


def schema_problems(obj: dict[str, Any]) -> list[str]:
    """What the API server would refuse in this object, per its kind's schema."""
    group = obj["apiVersion"].rpartition("/")[0]
    if obj["kind"] == "RunPodPool":
        return admit(obj["spec"])
    if group == PROMETHEUS_OPERATOR_GROUP:
        return prometheus_operator_problems(obj)
    problems = []
    for version in KUBE_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            path = ".".join(str(p) for p in err.path)
            problems.append(f"Kubernetes {version}: {path}: {err.message}")
    return problems


def prometheus_operator_problems(obj: dict[str, Any]) -> list[str]:
    """The operator's CRD models: wrong types raise, and an unknown field is dropped, so an
    object that does not survive a round trip unchanged has a field the CRD lacks."""
    import pydantic
    from cloudcoil.models.prometheus_operator import v1, v1alpha1

    version = obj["apiVersion"].rpartition("/")[2]
    model = getattr({"v1": v1, "v1alpha1": v1alpha1}[version], obj["kind"])
    try:
        parsed = model.model_validate(obj)
    except pydantic.ValidationError as err:
        return [str(err)]
    again = parsed.model_dump(by_alias=True, exclude_unset=True, mode="json")
    return [] if again == obj else [f"fields unknown to the CRD: {dropped(obj, again)}"]


def dropped(before: Any, after: Any, path: str = "") -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        return [
            p
            for key, value in before.items()
            for p in (
                [f"{path}.{key}"]
                if key not in after
                else dropped(value, after[key], f"{path}.{key}")
            )
        ]
    if isinstance(before, list) and isinstance(after, list):
        pairs = enumerate(zip(before, after, strict=False))
        return [p for i, (b, a) in pairs for p in dropped(b, a, f"{path}[{i}]")]
    return [] if before == after else [path]
