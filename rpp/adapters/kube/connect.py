"""How `rpp run` finds its cluster: the pod's ServiceAccount, or else a kubeconfig.

Inside a pod the API server's address comes from KUBERNETES_SERVICE_HOST/PORT and the
credentials from the mounted ServiceAccount (token, CA and the pod's own namespace, which is
NAMESPACE's default). Outside, a kubeconfig (KUBECONFIG, or ~/.kube/config) gives the server,
the credentials and the current context's namespace. The official client's loaders do the
reading; this module only chooses between them and turns their failures into one message that
says what to set. The tests build `RealKubeApi.for_host` directly instead.

Either way the client reaches the API server directly, or through the kubeconfig's own
`proxy-url`, never through HTTP(S)_PROXY from the environment (`direct`): the official
client's aiohttp session trusts the environment, which makes aiohttp look for proxies and
a ~/.netrc in a worker thread, and read that file, on every request, a tenth of the
controller's CPU at 50 pools (benchmarks/results/profiles/). HTTP(S)_PROXY still apply to
RunPod, whose client is httpx.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes.aio import config
from kubernetes.aio.client.configuration import Configuration
from kubernetes.aio.config.incluster_config import InClusterConfigLoader

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ClusterConfigError(Exception):
    """No usable cluster credentials were found; the message says where it looked."""


@dataclass(frozen=True)
class ClusterAccess:
    """A client configuration and the namespace the credentials point at (None: unknown)."""

    # repr=False: the configuration holds the bearer token.
    configuration: Configuration = field(repr=False)
    namespace: str | None
    source: str
    """"in-cluster" or the kubeconfig path, for the startup log line."""


def direct(configuration: Configuration) -> Configuration:
    """`configuration`, with the client's session told not to read proxies or ~/.netrc
    from the environment (it gets its proxy, if any, from the kubeconfig)."""
    configuration.client_session_kwargs = {"trust_env": False}
    return configuration


async def load_cluster_access(
    *,
    kubeconfig: str | None = None,
    environ: Mapping[str, str] | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
) -> ClusterAccess:
    """In-cluster credentials when running in a pod, else the kubeconfig.

    An explicit `kubeconfig` wins over both; KUBECONFIG is honoured as kubectl does.
    """
    env = os.environ if environ is None else environ
    if kubeconfig is None and env.get("KUBERNETES_SERVICE_HOST"):
        return _in_cluster(env, service_account_dir)
    path = (
        kubeconfig
        or env.get("KUBECONFIG")
        or os.path.expanduser(config.KUBE_CONFIG_DEFAULT_LOCATION)
    )
    configuration = Configuration()
    try:
        await config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=path, client_configuration=configuration, persist_config=False
        )
        _, current = config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
    except (config.ConfigException, OSError) as error:
        raise ClusterConfigError(
            f"cannot load Kubernetes credentials: not running in a pod (KUBERNETES_SERVICE_HOST "
            f"is unset) and the kubeconfig {path} is unusable ({_first_line(error)}); "
            "run inside the cluster or set KUBECONFIG"
        ) from None
    namespace = (current or {}).get("context", {}).get("namespace")
    return ClusterAccess(
        configuration=direct(configuration), namespace=namespace, source=str(path)
    )


def _in_cluster(env: Mapping[str, str], service_account_dir: Path) -> ClusterAccess:
    configuration = Configuration()
    loader = InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=str(service_account_dir / "token"),
        cert_filename=str(service_account_dir / "ca.crt"),
        environ=env,
    )
    try:
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    except config.ConfigException as error:
        raise ClusterConfigError(
            f"cannot load in-cluster Kubernetes credentials from {service_account_dir} "
            f"({_first_line(error)}); mount the controller's ServiceAccount token"
        ) from None
    namespace_file = service_account_dir / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.is_file() else None
    return ClusterAccess(
        configuration=direct(configuration), namespace=namespace, source="in-cluster"
    )


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
