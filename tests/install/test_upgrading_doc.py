"""docs/upgrading.md and CHANGELOG.md say what the code does: the version released, the
finalizer's name, the RBAC the upgrade adds, the chart's selector and slots ConfigMap as the
real Helm library renders them, the files and links they point to."""

from __future__ import annotations

import re
from pathlib import Path

from rpp import __version__
from rpp.adapters.kube.api import REQUIRED_PERMISSIONS, KubeSettings, Permission
from tests.fixtures_install import RELEASE, find, objects, render, two_pools

ROOT = Path(__file__).parents[2]
UPGRADING = (ROOT / "docs" / "upgrading.md").read_text()
CHANGELOG = (ROOT / "CHANGELOG.md").read_text()


def test_the_changelog_opens_with_the_version_rpp_reports() -> None:
    versions = re.findall(r"^## (\d+\.\d+\.\d+)$", CHANGELOG, flags=re.M)
    assert versions[0] == __version__
    assert "0.2.1" in versions


def test_the_upgrade_names_the_finalizer_and_the_grants_the_controller_really_uses() -> None:
    assert f"`{KubeSettings(namespace='runpod').finalizer}`" in UPGRADING
    group = "runpodpool.ownego.com"
    assert Permission("patch", group, "runpodpools") in REQUIRED_PERMISSIONS
    assert "`patch` on `runpodpools`" in UPGRADING
    assert Permission("create", "", "configmaps") in REQUIRED_PERMISSIONS
    assert "`create` on `configmaps`" in UPGRADING


def test_the_upgrade_applies_the_committed_crd_server_side() -> None:
    assert "kubectl apply --server-side --force-conflicts -f deploy/crd.yaml" in UPGRADING
    assert (ROOT / "deploy" / "crd.yaml").exists()


def test_every_relative_link_of_both_documents_resolves() -> None:
    for base, text in ((ROOT / "docs", UPGRADING), (ROOT, CHANGELOG)):
        for link in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (base / link).resolve().exists(), link


def test_the_upgrade_names_the_selector_the_chart_renders_whatever_the_full_name() -> None:
    """0.2.x selected by the full name; a Deployment's selector is immutable, so the doc
    must name the selector 0.3.0 really renders and the step that gets past the refusal."""
    for values in ({}, {"fullnameOverride": "gpu-pools"}):
        deployment = find(objects(render(values)), "Deployment")
        assert deployment["spec"]["selector"]["matchLabels"] == {
            "app.kubernetes.io/name": "runpod-pool-controller",
            "app.kubernetes.io/instance": RELEASE,
        }
    assert "`app.kubernetes.io/name: runpod-pool-controller`" in UPGRADING
    assert "field is immutable" in UPGRADING
    assert "kubectl -n runpod delete deployment <your fullnameOverride>" in UPGRADING


def test_the_upgrade_says_what_becomes_of_the_slots_configmap_the_chart_stopped_rendering() -> (
    None
):
    rendered = objects(render(two_pools()))
    assert not [
        o for o in rendered if o["kind"] == "ConfigMap" and "slots" in o["metadata"]["name"]
    ]
    assert "`helm.sh/resource-policy: keep`" in UPGRADING
    assert "**With `keep`**" in UPGRADING
    assert "**Without `keep`**" in UPGRADING
