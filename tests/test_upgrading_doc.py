"""docs/upgrading.md and CHANGELOG.md say what the code does: the version released, the
finalizer's name, the RBAC the upgrade adds, the files and links they point to."""

from __future__ import annotations

import re
from pathlib import Path

from rpp import __version__
from rpp.adapters.kube.api import REQUIRED_PERMISSIONS, KubeSettings, Permission

ROOT = Path(__file__).parents[1]
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
