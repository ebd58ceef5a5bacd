"""Finding the cluster for `rpp run`: the pod's ServiceAccount, else a kubeconfig."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rpp.adapters.kube.connect import ClusterConfigError, load_cluster_access

TOKEN = "sa-token-do-not-log"


def service_account(tmp_path: Path) -> Path:
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    (directory / "token").write_text(TOKEN)
    (directory / "ca.crt").write_text(
        "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"
    )
    (directory / "namespace").write_text("runpod\n")
    return directory


async def test_in_cluster_uses_the_service_account_and_its_namespace(tmp_path: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}

    access = await load_cluster_access(environ=env, service_account_dir=service_account(tmp_path))

    assert access.configuration.host == "https://10.0.0.1:443"
    assert access.configuration.api_key["BearerToken"].endswith(TOKEN)
    assert access.namespace == "runpod"
    assert access.source == "in-cluster"
    assert TOKEN not in repr(access)
    # No proxies or ~/.netrc from the environment (tests/adapters/kube/test_kube_real.py shows
    # why).
    assert access.configuration.client_session_kwargs == {"trust_env": False}


async def test_outside_a_pod_the_kubeconfig_context_gives_server_token_and_namespace(
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:6443"}}],
                "users": [{"name": "u", "user": {"token": TOKEN}}],
                "contexts": [
                    {"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "gpu"}}
                ],
                "current-context": "x",
            }
        )
    )

    access = await load_cluster_access(environ={"KUBECONFIG": str(kubeconfig)})

    assert access.configuration.host == "http://127.0.0.1:6443"
    assert access.namespace == "gpu"
    assert access.configuration.client_session_kwargs == {"trust_env": False}
    assert access.source == str(kubeconfig)


async def test_no_pod_and_no_kubeconfig_says_what_to_set(tmp_path: Path) -> None:
    missing = tmp_path / "nope"

    with pytest.raises(ClusterConfigError) as caught:
        await load_cluster_access(environ={"KUBECONFIG": str(missing)})

    assert str(missing) in str(caught.value)
    assert "set KUBECONFIG" in str(caught.value)


async def test_in_cluster_without_a_token_says_to_mount_it(tmp_path: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}

    with pytest.raises(ClusterConfigError, match="ServiceAccount token"):
        await load_cluster_access(environ=env, service_account_dir=tmp_path)
