"""The controller's HTTP endpoints: /healthz, /metrics and /sd/<pool>, as one ASGI app.

Where it sits: beside the loop. `rpp run` serves it with uvicorn on LISTEN_ADDRESS, on
every replica (the standby too, so a scrape or a liveness probe never depends on who
leads):

- `/healthz`: 200 `ok` while the loop completes on time (or this replica is the
  standby); 503 with the reason otherwise, so a liveness probe restarts a stuck
  controller and `kubectl describe pod` says why. `health_app` serves it alone, for a
  second port (HEALTH_LISTEN_ADDRESS) the kubelet probes and nothing else reaches.
- `/metrics`: the process's registry (runpod_pool_* and RunPod API calls) in the
  Prometheus text format, served by prometheus_client's own ASGI app, with secrets
  scrubbed from the text (rpp/adapters/redaction.py) when `rpp run` gives a redactor.
- `/sd/<pool>`: Prometheus HTTP service discovery: one target group per wired nginx
  slot (`<service>.<namespace>.svc:<slot port>`, labelled `runpod_pod`, `slot` and
  `datacenter`), read from the pool's status on every request, so both replicas
  answer the same; 404 for a pool that does not exist.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, make_asgi_app

from rpp.adapters.kube.api import KubeApi, KubeError, NotFound
from rpp.adapters.logs import layer_logger
from rpp.adapters.redaction import Redactor
from rpp.controller.asgi import (
    Message,
    Receive,
    Scope,
    Send,
    reject_non_http,
    send_bytes,
    send_json,
)

log = layer_logger("rpp.controller")

SD_PREFIX = "/sd/"
HealthCheck = Callable[[], str | None]


def sd_groups(pool: Mapping[str, Any], *, namespace: str) -> list[dict[str, Any]]:
    """The HTTP SD answer for one pool object: a target group per wired member, by slot."""
    meta = pool.get("metadata") or {}
    name = str(meta.get("name", ""))
    nginx = (pool.get("spec") or {}).get("nginx") or {}
    service = nginx.get("service") or name  # the spec's derived default: the pool's name
    host = f"{service}.{meta.get('namespace') or namespace}.svc"
    members = (pool.get("status") or {}).get("members") or []
    wired = [m for m in members if isinstance(m, Mapping) and m.get("slot") is not None]
    groups = []
    for member in sorted(wired, key=lambda m: int(m["slot"])):
        groups.append(
            {
                "targets": [f"{host}:{member['slot']}"],
                "labels": {
                    "runpod_pod": str(member.get("podId", "")),
                    "slot": str(member["slot"]),
                    "datacenter": str(member.get("datacenter") or ""),
                },
            }
        )
    return groups


class HttpApi:
    """The ASGI app; `health` is the loop's check, `kube` serves the pools for /sd."""

    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        health: HealthCheck,
        kube: KubeApi,
        redactor: Redactor | None = None,
    ) -> None:
        # Uncompressed when scrubbed: the exposition text is scrubbed on its way out.
        self._metrics = make_asgi_app(registry, disable_compression=redactor is not None)
        self._health = health
        self._kube = kube
        self._redactor = redactor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await reject_non_http(scope, receive, send):
            return
        path: str = scope["path"]
        if scope["method"] not in ("GET", "HEAD"):
            await _text(send, 405, text="only GET is served here\n", allow="GET, HEAD")
        elif path == "/healthz":
            await self._healthz(send)
        elif path == "/metrics":
            await self._metrics(scope, receive, self._scrubbing(send))
        elif path.startswith(SD_PREFIX) and path.count("/") == 2 and len(path) > len(SD_PREFIX):
            await self._sd(path[len(SD_PREFIX) :], send)
        else:
            await _text(send, 404, text="not found: try /healthz, /metrics or /sd/<pool>\n")

    def _scrubbing(self, send: Send) -> Send:
        """`send`, with secrets cut from the body it carries (labels are free text too)."""
        redactor = self._redactor
        if redactor is None:
            return send

        async def scrubbed(message: Message) -> None:
            if message["type"] == "http.response.body" and message.get("body"):
                text = redactor.scrub(bytes(message["body"]).decode("utf-8", "replace"))
                message = {**message, "body": text.encode()}
            await send(message)

        return scrubbed

    async def health_app(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI app of the health port: /healthz, and nothing else."""
        if await reject_non_http(scope, receive, send):
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _text(send, 405, text="only GET is served here\n", allow="GET, HEAD")
        elif scope["path"] == "/healthz":
            await self._healthz(send)
        else:
            await _text(send, 404, text="not found: this port serves /healthz only\n")

    async def _healthz(self, send: Send) -> None:
        try:
            problem = self._health()
        except Exception as err:  # a broken check is itself a reason to restart
            log.exception("health check failed")
            problem = f"the health check failed: {err!r}"
        if problem is None:
            await _text(send, 200, text="ok\n")
        else:
            await _text(send, 503, text=f"unhealthy: {problem}\n")

    async def _sd(self, pool: str, send: Send) -> None:
        namespace = self._kube.settings.namespace
        try:
            obj = await self._kube.get_pool(pool)
        except NotFound:
            await send_json(
                send, 404, {"error": f"no RunPodPool {pool!r} in namespace {namespace}"}
            )
            return
        except KubeError as err:
            await send_json(send, 503, {"error": str(err)})
            return
        await send_json(send, 200, sd_groups(obj, namespace=namespace))


async def _text(send: Send, status: int, *, text: str, allow: str | None = None) -> None:
    headers = [("allow", allow)] if allow else []
    await send_bytes(
        send, status, text.encode(), content_type="text/plain; charset=utf-8", headers=headers
    )
