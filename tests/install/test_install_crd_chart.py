"""The RunPodPool CRD's own chart, and how the two charts share the CRD between them.

Helm installs a chart's crds/ folder on the first install only and never upgrades it
(helm pkg/action/install.go installCRDs; upgrade.go never reads crds/), so the CRD also
ships in a chart of its own, the way Karpenter ships its CRDs (charts/karpenter-crd, whose
templates are the CRDs): every `helm upgrade` of that release brings the release's CRD.
scripts/chart_docs.py writes its template from `rpp crd`'s own function; rendered here by
the real Helm library (helm-python-sdk), it must be exactly the generated CRD under Helm's
metadata, `helm.sh/resource-policy: keep` unless `keep` is off, for `crdGroup`.

The controller chart keeps its crds/ copy: Helm creates crds/ before it builds the
release's objects, so a first install whose values hold pools works on a fresh cluster.
A CRD the controller chart installed (0.2.x, or a chart alone) has no Helm ownership, and
Helm refuses to adopt an existing object without it (pkg/action/validate.go,
existingResourceConflict and checkOwnership); docs/upgrading.md gives the commands that add
it for the release rpp-crd, checked here against the label and annotations Helm requires
and against the install commands of docs/install.md.
"""

from __future__ import annotations

import copy
import importlib.util
import re
import shlex
from pathlib import Path
from types import ModuleType
from typing import Any

import helm_python as helm
import pytest
import yaml

from rpp.model.crd import build_crd, render_crd
from tests.fixtures_install import (
    CHART,
    CRD_CHART,
    CRD_RELEASE,
    NAMESPACE,
    RELEASE,
    ROOT,
    docs,
    objects,
    render,
    schema_problems,
    two_pools,
)

CRD = "CustomResourceDefinition"
# Helm's resource policy (pkg/kube/resource_policy.go: ResourcePolicyAnno, KeepPolicy):
# `helm uninstall` and an upgrade that drops the object leave it in place.
KEEP = {"helm.sh/resource-policy": "keep"}

# What Helm requires of an existing object before it takes it into a release
# (pkg/action/validate.go: appManagedByLabel, helmReleaseNameAnnotation,
# helmReleaseNamespaceAnnotation, checked by checkOwnership).
HELM_OWNERSHIP_LABELS = {"app.kubernetes.io/managed-by": "Helm"}


def chart_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chart_docs", ROOT / "scripts" / "chart_docs.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def crd(values: dict[str, Any] | None = None, *, is_upgrade: bool = False) -> dict[str, Any]:
    """The CRD chart's one object, rendered as release rpp-crd."""
    [only] = objects(render(values, is_upgrade=is_upgrade, crd_chart=True))
    assert only["kind"] == CRD
    return only


def without_helm_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"] = {"name": obj["metadata"]["name"]}
    return out


def test_the_crd_chart_renders_exactly_the_generated_crd_on_install_and_upgrade() -> None:
    with helm.Chart.load(CRD_CHART) as chart:
        assert chart.crds == [], "the CRD chart's CRD is a template: Helm upgrades templates"
    for is_upgrade in (False, True):
        assert without_helm_metadata(crd(is_upgrade=is_upgrade)) == build_crd()


def test_the_crd_is_kept_on_uninstall_unless_keep_is_off() -> None:
    kept = crd()
    assert kept["metadata"]["annotations"] == KEEP
    dropped = crd({"keep": False})
    assert "annotations" not in dropped["metadata"]
    assert without_helm_metadata(dropped) == without_helm_metadata(kept)


def test_the_crd_carries_the_chart_labels_and_helms_ownership_label() -> None:
    chart = yaml.safe_load((CRD_CHART / "Chart.yaml").read_text())
    labels = crd()["metadata"]["labels"]
    assert labels == {
        "app.kubernetes.io/name": "runpod-pool-controller-crd",
        "app.kubernetes.io/instance": CRD_RELEASE,
        "app.kubernetes.io/part-of": "runpod-pool-controller",
        "app.kubernetes.io/version": chart["appVersion"],
        "app.kubernetes.io/managed-by": "Helm",
        "app.kubernetes.io/component": "crd",
        "helm.sh/chart": f"runpod-pool-controller-crd-{chart['version']}",
    }
    assert labels.items() >= HELM_OWNERSHIP_LABELS.items()


def test_the_crd_takes_the_group_the_controller_chart_and_its_pools_use() -> None:
    group = "pools.example.com"
    assert without_helm_metadata(crd({"crdGroup": group})) == build_crd(group)
    objs = objects(render({**two_pools(), "crdGroup": group}))
    pools = [o for o in objs if o["kind"] == "RunPodPool"]
    assert {p["apiVersion"] for p in pools} == {f"{group}/v1alpha1"}
    [deployment] = [o for o in objs if o["kind"] == "Deployment"]
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "CRD_GROUP", "value": group} in env


def test_the_crd_is_valid_for_the_api_server() -> None:
    for values in ({}, {"keep": False}, {"crdGroup": "pools.example.com"}):
        assert schema_problems(crd(values)) == [], values


@pytest.mark.parametrize(
    "values", [{}, {"keep": False}, {"crdGroup": "pools.example.com"}], ids=str
)
def test_the_crd_chart_lints_clean(values: dict[str, Any]) -> None:
    report = helm.lint(CRD_CHART, values, strict=True, namespace=NAMESPACE, kube_version="v1.25.0")
    assert report["errors"] == []
    # Severity 1 is information ("icon is recommended"); warnings and errors fail.
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


BAD_VALUES: dict[str, tuple[dict[str, Any], str]] = {
    "keep as text": ({"keep": "yes"}, "/keep"),
    "the controller chart's key": (
        {"crds": {"keep": False}},
        "additional properties 'crds' not allowed",
    ),
    "group not a DNS name": ({"crdGroup": "RunPod_Pools"}, "/crdGroup"),
    "group removed": ({"crdGroup": None}, "missing property 'crdGroup'"),
}


@pytest.mark.parametrize("case", list(BAD_VALUES), ids=list(BAD_VALUES))
def test_bad_values_are_refused_naming_the_value(case: str) -> None:
    values, expected = BAD_VALUES[case]
    with pytest.raises(helm.HelmValuesError) as refused:
        crd(values)
    assert expected in str(refused.value), str(refused.value)


def test_template_text_renders_to_itself_even_with_template_braces(tmp_path: Path) -> None:
    """A CEL rule or a description holding `{{` must not become a Helm action."""
    text = 'description: "shown as {{ .Values.x }} and {{- y }}, never run"\nrule: a }} b\n'
    chart = tmp_path / "braces"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: braces\nversion: 0.1.0\n")
    (chart / "templates" / "t.yaml").write_text(chart_docs().literal(text))
    with helm.Chart.load(chart) as loaded:
        rendered = loaded.render({}, name=RELEASE, namespace=NAMESPACE)
    assert rendered["braces/templates/t.yaml"] == text


def test_both_charts_crds_on_disk_are_what_the_generator_writes() -> None:
    generator = chart_docs()
    regenerate = "run: .venv/bin/python scripts/chart_docs.py"
    template = CRD_CHART / "templates" / "runpodpools.yaml"
    assert template.read_text() == generator.crd_template_text(), regenerate
    assert (CHART / "crds" / "runpodpools.yaml").read_text() == render_crd(), regenerate


def test_a_first_install_with_pools_gets_the_crd_from_crds_not_from_the_release() -> None:
    """Helm builds (maps to a kind the API server serves) every object of a release before
    it creates any, so a RunPodPool beside its own CRD in one release fails on a fresh
    cluster (`no matches for kind "RunPodPool"`). crds/ is created before that: Helm's
    install lists it apart from the manifest, and the manifest holds the pools alone."""
    with (
        helm.Chart.load(CHART) as chart,
        helm.Config(namespace=NAMESPACE, storage_driver="memory") as config,
    ):
        crds = chart.crds
        release = config.install(
            chart, RELEASE, two_pools(), namespace=NAMESPACE, dry_run="client"
        )
    assert [c["data"] for c in crds] == [render_crd()]
    manifest = docs(release["manifest"])
    assert CRD not in {o["kind"] for o in manifest}
    pools = sorted(o["metadata"]["name"] for o in manifest if o["kind"] == "RunPodPool")
    assert pools == ["batch-jobs", "inference"]


def test_the_crd_release_holds_the_crd_and_nothing_else() -> None:
    """So `--take-ownership` on it takes over the CRD alone."""
    with (
        helm.Chart.load(CRD_CHART) as chart,
        helm.Config(namespace=NAMESPACE, storage_driver="memory") as config,
    ):
        release = config.install(chart, CRD_RELEASE, namespace=NAMESPACE, dry_run="client")
    [only] = docs(release["manifest"])
    assert without_helm_metadata(only) == build_crd()
    assert only["metadata"]["annotations"] == KEEP


def _commands(text: str, prefix: str) -> list[list[str]]:
    """Every shell command in `text` starting with `prefix`, `\\` continuations joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [
        shlex.split(line.strip().split("#", 1)[0])
        for line in joined.splitlines()
        if line.strip().startswith(prefix)
    ]


def _flag(command: list[str], *names: str) -> str:
    [value] = [command[i + 1] for i, arg in enumerate(command) if arg in names]
    return value


def test_upgrading_gives_the_commands_that_let_the_crd_release_adopt_an_existing_crd() -> None:
    """The exact label and annotations Helm checks, on the CRD's real name, for the release
    and namespace that docs/install.md and docs/upgrading.md install the CRD's chart as."""
    upgrading = (ROOT / "docs" / "upgrading.md").read_text()
    name = build_crd()["metadata"]["name"]
    [label] = _commands(upgrading, "kubectl label crd")
    [annotate] = _commands(upgrading, "kubectl annotate crd")
    assert label[:4] == ["kubectl", "label", "crd", name]
    assert annotate[:4] == ["kubectl", "annotate", "crd", name]
    assert dict(arg.split("=", 1) for arg in label[4:]) == HELM_OWNERSHIP_LABELS
    marks = dict(arg.split("=", 1) for arg in annotate[4:])
    assert set(marks) == {"meta.helm.sh/release-name", "meta.helm.sh/release-namespace"}
    # Every install or upgrade of the CRD's chart, in either document, is that release.
    install = (ROOT / "docs" / "install.md").read_text()
    crd_chart = "oci://ghcr.io/ownego/charts/runpod-pool-controller-crd"
    helm_commands = _commands(install, "helm ") + _commands(upgrading, "helm ")
    on_crd_chart = [c for c in helm_commands if crd_chart in c]
    assert len(on_crd_chart) >= 3
    for command in on_crd_chart:
        release = command[command.index(crd_chart) - 1]
        assert (release, _flag(command, "-n", "--namespace")) == (
            marks["meta.helm.sh/release-name"],
            marks["meta.helm.sh/release-namespace"],
        ), command
    # What Helm answers without them, so a reader who met it finds this section.
    assert "exists and cannot be imported into the current release" in " ".join(upgrading.split())
    assert "--take-ownership" in upgrading


def test_install_puts_the_crd_release_first_and_the_controller_beside_it() -> None:
    """The CRD's chart first (the pools need the CRD), then the controller chart with
    --skip-crds: Helm 4 server-side applies crds/ on install even over an existing CRD."""
    install = (ROOT / "docs" / "install.md").read_text()
    section = install.split("## Install with Helm\n", 1)[1].split("\n## ", 1)[0]
    helm_commands = _commands(section.split("```sh\n", 1)[1].split("```", 1)[0], "helm ")
    crd_chart, controller_chart = helm_commands[:2]
    assert crd_chart[:5] == [
        "helm", "upgrade", "--install", CRD_RELEASE,
        "oci://ghcr.io/ownego/charts/runpod-pool-controller-crd",
    ]  # fmt: skip
    assert controller_chart[:3] == ["helm", "install", RELEASE]
    assert "oci://ghcr.io/ownego/charts/runpod-pool-controller" in controller_chart
    assert "--skip-crds" in controller_chart
    for command in (crd_chart, controller_chart):
        assert _flag(command, "-n", "--namespace") == NAMESPACE
