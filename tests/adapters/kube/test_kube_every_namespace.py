"""NAMESPACES=*: the real adapter lists and watches RunPodPools cluster-wide.

The adapter `rpp run` opens for every namespace (KubeSettings.namespace "*") sends the
cluster-wide collection path, so one list and one watch see the pools of every namespace,
each with its own metadata.namespace.
"""

from __future__ import annotations

import dataclasses

import pytest

from rpp.adapters.kube.api import ALL_NAMESPACES
from rpp.adapters.kube.real import RealKubeApi
from tests.fixtures_kube import NS, SETTINGS, TOKEN, pool_manifest
from tests.kmock_strict import POOLS, StrictKubernetesEmulator
from tests.stopwatch import Stopwatch

pytestmark = pytest.mark.kmock(cls=StrictKubernetesEmulator)


def every_namespace(kmock: StrictKubernetesEmulator, stopwatch: Stopwatch) -> RealKubeApi:
    settings = dataclasses.replace(SETTINGS, namespace=ALL_NAMESPACES)
    return RealKubeApi.for_host(
        host=str(kmock.url), settings=settings, token=TOKEN, patience=stopwatch.patience()
    )


async def test_one_listing_holds_the_pools_of_every_namespace(
    kmock: StrictKubernetesEmulator, stopwatch: Stopwatch
) -> None:
    kmock.seed(POOLS, NS, pool_manifest("inference"))
    kmock.seed(POOLS, "team-b", pool_manifest("inference"))

    async with every_namespace(kmock, stopwatch) as kube:
        listed = await kube.list_pools()

    assert sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in listed) == [
        (NS, "inference"),
        ("team-b", "inference"),
    ]
    assert kmock[-1].url.path == "/apis/runpodpool.ownego.com/v1alpha1/runpodpools"
