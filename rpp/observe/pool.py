"""Observe one pool: what decide is given about it in one loop, and the env act needs.

Where it sits: observe, between the loop's shared read (rpp/observe/shared.py) and
decide. The reconciler (rpp/controller/reconcile.py) asks `PoolObserver.observe` for
each pool it decides on, in a loop and in a re-decide after a 409 alike: one that
missed a read would decide differently the second time. Per pool it reads the slots
ConfigMap, the env Secret (rpp/observe/pool_secret.py, whose values are handed to the
redactor here and go to act as the env, never into the observation), probes every
member and every owned pod concurrently (rpp/observe/prober.py) and runs the pool's
Prometheus queries (rpp/observe/prometheus.py). A read that fails is data, never an
exception: decide says what it means for the pool.

What only the controller knows of itself (its identity, how its status writes went,
another writer's marks in the status it read) is not read here: the reconciler adds it
to the observation (rpp/controller/writers.py, rpp/controller/status_carry.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rpp.adapters.kube.api import KubeApi, KubeError
from rpp.adapters.logs import layer_logger
from rpp.adapters.redaction import Redactor
from rpp.decide.ownership import owned_pods
from rpp.model.observations import PoolObject, PoolObservation, PrometheusReading
from rpp.model.spec_load import Pool
from rpp.model.status import PoolStatus
from rpp.observe.pool_secret import read_pool_secret, remember_secrets, unreadable
from rpp.observe.prober import Prober, ProbeTarget, probe_settings_from_spec
from rpp.observe.prometheus import PrometheusClient, queries_from_spec
from rpp.observe.shared import Shared

# Logged under the controller's name, as when the reconciler observed itself.
log = layer_logger("rpp.controller")


class PoolObserver:
    """Observes any pool; one per controller process, beside the reconciler."""

    def __init__(
        self,
        *,
        kube: KubeApi,
        prober: Prober,
        prometheus: PrometheusClient,
        redactor: Redactor | None = None,
    ) -> None:
        self.kube = kube
        self.prober = prober
        self.prometheus = prometheus
        self.redactor = redactor

    async def observe(
        self, *, pool: Pool, obj: Mapping[str, Any], status: PoolStatus, shared: Shared
    ) -> tuple[PoolObservation, Mapping[str, str]]:
        """What decide is given about one pool, and the env Secret's values for act."""
        spec, name = pool.spec, pool.name
        slots: Mapping[str, str] | None = None
        slots_error = None
        try:
            stored = await self.kube.read_config_map(spec.nginx.slots_config_map)
            slots = None if stored is None else dict(stored.data)
        except KubeError as err:
            slots_error = unreadable(err, chart_value="rbac.extraSlotsConfigMaps")
        secret = await read_pool_secret(self.kube, spec)
        owned = owned_pods(spec, shared.pods) if shared.pods is not None else ()
        remember_secrets(self.redactor, pool=name, spec=spec, env=secret.env, owned=owned)
        pod_ids = {m.pod_id for m in status.members} | {p.id for p in owned}
        # Restart detection reads the process start only for pods in an update.
        updating = {m.pod_id for m in status.members if m.update is not None}
        # A wired pod's hard failure is confirmed at once: nginx sends it requests.
        wired = {m.pod_id for m in status.members if m.slot is not None}
        settings = probe_settings_from_spec(spec)
        probes = await self.prober.probe(
            ProbeTarget(
                pod_id=pod_id,
                settings=settings,
                metrics_token=secret.token,
                read_process_start=pod_id in updating,
                confirm=pod_id in wired,
            )
            for pod_id in sorted(pod_ids)
        )
        try:
            reading = await self.prometheus.read(queries_from_spec(spec), pool=name)
        except Exception as err:  # a bug in a query path must not stop the pool
            log.exception("Prometheus read failed")
            reading = PrometheusReading(problems=(f"query failed: {err}",))
        obs = PoolObservation(
            pods=shared.pods,
            runpod_error=shared.runpod_error,
            refused_key=shared.refused_key,
            notices=shared.notices,
            notices_error=shared.notices_error,
            billing=shared.billing,
            probes=probes,
            prometheus=reading,
            slots=slots,
            slots_error=slots_error,
            secret=secret.state,
            pool=PoolObject.from_object(obj, finalizer=self.kube.settings.finalizer),
        )
        return obs, secret.env
