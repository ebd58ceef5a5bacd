"""The pool's env Secret: read each loop, judged for the pool, remembered as secrets.

Where it sits: observe, for one pool (rpp/observe/pool.py calls it). The Secret
named by spec.envFromSecret is read every loop: its values go to the executor (merged
into a pod's env at act time, never into an effect), its metrics token to the prober,
and what decide may know of it is only a `SecretState` (configured, and the problem
that keeps the pool from acting: missing, forbidden, no metrics token). Every value is
also handed to the process's redactor (rpp/adapters/redaction.py), with the values the
pool's pods still carry for those keys (a rotated secret's old value stays secret), so
no text the controller writes can repeat one.

A Secret or slots ConfigMap the controller may not read (403) is said in the pool's status,
not in a log line only (`unreadable`): which permission, on which object, and how to grant
it, with the chart (the value that names it, or the RBAC mode that covers the namespace)
or with the plain manifests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rpp.adapters.kube.api import Forbidden, KubeApi, KubeError
from rpp.adapters.redaction import Redactor
from rpp.model.observations import RunPodPod, SecretState
from rpp.model.spec import RunPodPoolSpec


@dataclass(frozen=True)
class PoolSecret:
    """What one loop read of the pool's env Secret."""

    state: SecretState
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    token: str | None = field(default=None, repr=False)


async def read_pool_secret(kube: KubeApi, spec: RunPodPoolSpec) -> PoolSecret:
    """The Secret's values and the metrics token, or why the pool cannot act."""
    if not spec.env_from_secret:
        return PoolSecret(SecretState(configured=False))
    name = spec.env_from_secret
    try:
        data = await kube.read_secret(name)
    except KubeError as err:
        problem = unreadable(err, chart_value="rbac.extraEnvSecrets")
        return PoolSecret(SecretState(configured=True, problem=problem))
    if data is None:
        problem = f"the env Secret {name} (envFromSecret) does not exist: create it"
        return PoolSecret(SecretState(configured=True, problem=problem))
    token = None
    if spec.metrics_token_key:
        token = data.get(spec.metrics_token_key)
        if not token:
            problem = (
                f"the env Secret {name} has no key {spec.metrics_token_key} "
                "(metricsTokenKey): add the metrics token to it"
            )
            return PoolSecret(SecretState(configured=True, problem=problem), dict(data))
    return PoolSecret(SecretState(configured=True), dict(data), token)


def unreadable(err: KubeError, *, chart_value: str) -> str:
    """Why an object the pool names cannot be read; for a 403, the permission it lacks and
    how to grant it (`chart_value`: the chart's list of such objects, rbac.mode: named)."""
    if not isinstance(err, Forbidden):
        return str(err)
    return (
        f"forbidden: the controller may not {err.verb} {err.resource} {err.name!r} in "
        f"namespace {err.namespace} (RBAC verb {err.verb}, resource {err.resource}); grant it: "
        f"with the Helm chart, add {err.name} to {chart_value} (rbac.mode: named), or set "
        "rbac.mode: namespace (a Role for every ConfigMap and Secret of each watched "
        "namespace) or cluster; without Helm, add the name to the resourceNames of that "
        "rule of the Role in deploy/rbac.yaml"
    )


def remember_secrets(
    redactor: Redactor | None,
    *,
    pool: str,
    spec: RunPodPoolSpec,
    env: Mapping[str, str],
    owned: Sequence[RunPodPod],
) -> None:
    """Tell the redactor this pool's secrets: every env Secret value, and the values its
    pods still carry for those keys. What the pool's own name or spec shows is public."""
    if redactor is None or not env:
        return
    carried = [pod.env[key] for pod in owned for key in env if key in pod.env]
    public = (pool, spec.model_dump_json(by_alias=True))
    redactor.remember(pool, [*env.values(), *carried], public=public)
