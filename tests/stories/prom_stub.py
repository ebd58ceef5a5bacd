"""A Prometheus query API that answers every instant query with one settable value.

Enough for the autoscaler stories: the pool's autoscaling.query returns `value`
(None answers an empty result, as Prometheus does when the series is missing).
"""

from __future__ import annotations

import json
from typing import Any

import httpx


class PromStub:
    """`value` answers scalar-like queries (autoscaling); `per_pod[metric]` answers a query
    that mentions `metric` with one series per pod, labelled runpod_pod."""

    def __init__(
        self, value: float | None = None, per_pod: dict[str, dict[str, float]] | None = None
    ) -> None:
        self.value = value
        self.per_pod = per_pod or {}
        self.queries: list[str] = []
        self.down = False  # answers 503, as a Prometheus that cannot serve queries

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        query = httpx.QueryParams(scope.get("query_string", b"").decode()).get("query", "")
        self.queries.append(query)
        if self.down:
            await _send(send, 503, {"status": "error", "error": "service unavailable"})
            return
        result: list[dict[str, Any]] = []
        matched = [m for m in self.per_pod if m in query]
        if matched:
            result = [
                {"metric": {"runpod_pod": pod}, "value": [0, str(v)]}
                for pod, v in self.per_pod[matched[0]].items()
            ]
        elif self.value is not None:
            result = [{"metric": {}, "value": [0, str(self.value)]}]
        await _send(
            send, 200, {"status": "success", "data": {"resultType": "vector", "result": result}}
        )

    def transport(self) -> httpx.ASGITransport:
        return httpx.ASGITransport(app=self)  # type: ignore[arg-type]  # an ASGI app (asgi_io)


async def _send(send: Any, status: int, body: dict[str, Any]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})
