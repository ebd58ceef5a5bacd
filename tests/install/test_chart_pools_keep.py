"""Pools in Helm values are not one rename away from deletion: every pool the chart renders
carries `helm.sh/resource-policy: keep` unless the user turns it off (`keepPools`, or a
pool's own `keep`).

What Helm does with the annotation, from its source (helm/helm, pkg/kube/resource_policy.go,
pkg/kube/client.go `Update`, pkg/action/resource_policy.go `filterManifestsToKeep`,
pkg/action/uninstall.go): on `helm upgrade`, an object the new release no longer renders is
fetched from the cluster and left alone when its annotation equals "keep" exactly; on
`helm uninstall`, a document of the stored release manifest whose annotation is "keep"
(trimmed, any case) is left out of the deletion. The tests below render the release the
real Helm library would store and apply those two rules to it.
"""

from __future__ import annotations

from typing import Any

import helm_python as helm

from tests.fixtures_install import CHART, NAMESPACE, RELEASE, ROOT, docs, two_pools

POLICY = "helm.sh/resource-policy"


def release_pools(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The RunPodPools of the manifest Helm stores for a release installed with `values`."""
    with (
        helm.Chart.load(CHART) as chart,
        helm.Config(namespace=NAMESPACE, storage_driver="memory") as config,
    ):
        release = config.install(chart, RELEASE, values, namespace=NAMESPACE, dry_run="client")
    return {
        o["metadata"]["name"]: o for o in docs(release["manifest"]) if o["kind"] == "RunPodPool"
    }


def upgrade_keeps(live: dict[str, Any]) -> bool:
    """pkg/kube/client.go Update: the object as the cluster holds it, compared exactly."""
    return (live["metadata"].get("annotations") or {}).get(POLICY) == "keep"


def uninstall_keeps(manifest_doc: dict[str, Any]) -> bool:
    """pkg/action/resource_policy.go filterManifestsToKeep: the stored manifest's head."""
    policy = (manifest_doc["metadata"].get("annotations") or {}).get(POLICY)
    return policy is not None and policy.strip().lower() == "keep"


def renamed_on_upgrade(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
) -> dict[str, bool]:
    """Each pool the upgrade no longer renders, and whether Helm deletes it (True)."""
    return {name: not upgrade_keeps(pool) for name, pool in before.items() if name not in after}


def test_a_renamed_pool_is_kept_by_default_and_its_successor_created() -> None:
    values = two_pools()
    before = release_pools(values)
    renamed = two_pools()
    renamed["pools"]["inference-v2"] = renamed["pools"].pop("inference")
    after = release_pools(renamed)
    assert sorted(after) == ["batch-jobs", "inference-v2"]
    assert renamed_on_upgrade(before, after) == {"inference": False}
    # The annotation is Helm's exact spelling, or Helm's upgrade would delete the pool.
    assert before["inference"]["metadata"]["annotations"] == {POLICY: "keep"}


def test_every_chart_pool_survives_helm_uninstall_itself_by_default() -> None:
    """Helm's own deletion skips them; the pre-delete hook deletes them by name first."""
    pools = release_pools(two_pools())
    assert sorted(pools) == ["batch-jobs", "inference"]
    assert all(uninstall_keeps(pool) for pool in pools.values())


def test_turned_off_helm_deletes_a_renamed_pool_as_before() -> None:
    values = {**two_pools(), "keepPools": False}
    before = release_pools(values)
    renamed = {**two_pools(), "keepPools": False}
    del renamed["pools"]["batch-jobs"]
    after = release_pools(renamed)
    assert renamed_on_upgrade(before, after) == {"batch-jobs": True}
    assert not any(uninstall_keeps(pool) for pool in before.values())
    assert all("annotations" not in pool["metadata"] for pool in before.values())


def test_a_pools_own_keep_wins_over_keep_pools_either_way() -> None:
    values = two_pools()
    values["pools"]["batch-jobs"]["keep"] = False
    pools = release_pools(values)
    assert (uninstall_keeps(pools["inference"]), uninstall_keeps(pools["batch-jobs"])) == (
        True,
        False,
    )
    values = {**two_pools(), "keepPools": False}
    values["pools"]["inference"]["keep"] = True
    pools = release_pools(values)
    assert (uninstall_keeps(pools["inference"]), uninstall_keeps(pools["batch-jobs"])) == (
        True,
        False,
    )
    # `keep` is the chart's, not the pool's: the spec sent to the API server is unchanged.
    assert pools["inference"]["spec"] == values["pools"]["inference"]["spec"]


def test_install_and_upgrading_docs_say_what_a_rename_does_and_how_to_delete_a_pool() -> None:
    for name in ("install.md", "upgrading.md"):
        text = " ".join((ROOT / "docs" / name).read_text().split())
        assert "`keepPools`" in text, name
        assert "kubectl -n runpod delete rpp" in text, name
        assert "`keepPools: false`" in text, name
