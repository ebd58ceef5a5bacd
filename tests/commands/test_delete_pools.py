"""`rpp delete-pools`, the chart's pre-delete hook, against a Kubernetes API emulator over HTTP.

The hook's adapter (rpp/adapters/kube/pool_deletion.py) goes through the official client's
real HTTP stack: a delete of a pool held by the controller's finalizer only marks it, a
pool that is not there is not an error, and the calls made are exactly the hook Role's
grants. The waiting itself, beside a running controller, is told in
tests/stories/test_uninstall_hook.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rpp.adapters.kube.api import KubeSettings, Permission
from rpp.adapters.kube.pool_deletion import RealPoolDeletion, hook_permissions
from rpp.cli import main
from tests.kmock_strict import POOLS, StrictKubernetesEmulator, forbidden, rpp_against

pytestmark = pytest.mark.kmock(cls=StrictKubernetesEmulator)

NS = "runpod"
SETTINGS = KubeSettings(namespace=NS, request_timeout=5.0)
FINALIZER = SETTINGS.finalizer


def pool(name: str, *finalizers: str) -> dict[str, object]:
    return {
        "apiVersion": SETTINGS.pool_api_version,
        "kind": "RunPodPool",
        "metadata": {"name": name, "finalizers": list(finalizers)},
        "spec": {"templateId": "tpl"},
    }


@pytest.fixture
async def pools(kmock: StrictKubernetesEmulator) -> AsyncIterator[RealPoolDeletion]:
    from kubernetes.aio import client

    configuration = client.Configuration(host=str(kmock.url).rstrip("/"))
    deletion = RealPoolDeletion(client.ApiClient(configuration), SETTINGS)
    yield deletion
    await deletion.close()


async def test_a_pool_held_by_the_finalizer_is_marked_and_read_back_until_it_goes(
    pools: RealPoolDeletion, kmock: StrictKubernetesEmulator
) -> None:
    kmock.seed(POOLS, NS, pool("inference", FINALIZER))
    kmock.seed(POOLS, NS, pool("batch"))

    assert await pools.delete("inference") is True
    assert await pools.delete("batch") is True
    assert await pools.delete("ghost") is False

    held = await pools.read("inference")
    assert held is not None
    assert held["metadata"]["deletionTimestamp"]
    assert await pools.read("batch") is None  # no finalizer: gone at once
    assert await pools.read("ghost") is None
    made = {
        Permission(request.method.name.lower(), request.resource.group, request.resource.plural)
        for request in kmock
        if request.resource is not None
    }
    assert made == hook_permissions(SETTINGS.crd_group)


async def test_a_refused_delete_names_the_verb_and_the_pool(
    pools: RealPoolDeletion, kmock: StrictKubernetesEmulator
) -> None:
    kmock.seed(POOLS, NS, pool("inference", FINALIZER))
    kmock["delete", POOLS] << forbidden("delete", "runpodpools")

    with pytest.raises(Exception, match="cannot delete runpodpools 'inference' in namespace"):
        await pools.delete("inference")


def test_a_bad_timeout_is_one_line_naming_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["delete-pools", "inference", "--wait", "--timeout", "soon"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("rpp delete-pools: --timeout:")


@pytest.mark.parametrize(
    ("variable", "value", "why"),
    [
        pytest.param(
            "CRD_GROUP", "runpodpool.ownego.com/v1alpha1", "is not an API group", id="group"
        ),
        pytest.param("NAMESPACE", "Runpod", "is not a namespace name", id="namespace"),
    ],
)
async def test_a_bad_namespace_or_group_stops_the_hook_in_one_line_before_any_call(
    kmock: StrictKubernetesEmulator, tmp_path: Path, variable: str, value: str, why: str
) -> None:
    """A pool in another group or namespace is "not found": the hook would exit 0, Helm
    would go on uninstalling the controller and the pool's pods would bill for ever."""
    kmock.seed(POOLS, NS, pool("inference", FINALIZER))
    code, err = await rpp_against(
        kmock,
        tmp_path,
        "delete-pools",
        "inference",
        "--wait",
        "--timeout",
        "5s",
        env={"NAMESPACE": NS, variable: value},
    )
    assert code == 2
    [line] = err.splitlines()
    assert line.startswith(f"rpp delete-pools: {variable}: {value!r} {why} (")
    assert list(kmock) == [], "nothing was asked of the cluster"
    assert "deletionTimestamp" not in kmock.objects[POOLS, NS, "inference"].raw["metadata"]
