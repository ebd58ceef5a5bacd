"""Which Kubernetes adapters `rpp run` opens for the namespaces it serves (ServedAdapters)."""

from __future__ import annotations

import datetime as dt

from rpp.adapters.clock import ManualClock
from rpp.adapters.kube.api import ALL_NAMESPACES, KubeApi, KubeSettings
from rpp.controller.namespaces import WatchedNamespaces
from rpp.controller.pool_namespaces import ServedAdapters
from rpp.sim.kube_memory import MemoryKubeApi

CLOCK = ManualClock(dt.datetime(2026, 3, 1, tzinfo=dt.UTC))


def memory(namespace: str) -> MemoryKubeApi:
    return MemoryKubeApi(KubeSettings(namespace=namespace), clock=CLOCK)


def served(watched: WatchedNamespaces) -> tuple[ServedAdapters, list[str]]:
    made: list[str] = []

    def make(namespace: str) -> KubeApi:
        made.append(namespace)
        return memory(namespace)

    return ServedAdapters(home=memory("runpod"), make=make, watched=watched), made


def test_the_own_namespace_alone_opens_nothing_beyond_the_process_adapter() -> None:
    for watched in (WatchedNamespaces(), WatchedNamespaces(names=("runpod",))):
        adapters, made = served(watched)

        assert adapters.single
        assert adapters.listers == (adapters.home,)
        assert made == []


def test_named_namespaces_each_get_one_adapter_and_the_home_one_is_reused() -> None:
    adapters, made = served(WatchedNamespaces(names=("runpod", "team-b")))

    assert not adapters.single
    assert [k.settings.namespace for k in adapters.listers] == ["runpod", "team-b"]
    assert adapters.listers[0] is adapters.home
    assert adapters.kube_for("team-b") is adapters.listers[1]
    assert made == ["team-b"]


def test_every_namespace_lists_cluster_wide_and_opens_a_namespace_on_first_use() -> None:
    adapters, made = served(WatchedNamespaces(every=True))

    assert [k.settings.namespace for k in adapters.listers] == [ALL_NAMESPACES]
    assert adapters.kube_for("team-c").settings.namespace == "team-c"
    assert adapters.kube_for("team-c") is adapters.kube_for("team-c")
    assert made == [ALL_NAMESPACES, "team-c"]
