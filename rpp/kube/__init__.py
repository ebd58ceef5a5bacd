"""The Kubernetes adapter: the only code that talks to the cluster (see `rpp.kube.api`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rpp.kube.api import KubeApi
    from rpp.kube.memory import MemoryKubeApi
    from rpp.kube.real import RealKubeApi

    def _both_are_kube_apis(memory: MemoryKubeApi, real: RealKubeApi) -> list[KubeApi]:
        """Never called: mypy checks here that both implementations satisfy the protocol."""
        return [memory, real]
