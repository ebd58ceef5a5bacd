"""A Prometheus query API that answers every instant query with one settable value.

Enough for the autoscaler stories: the pool's autoscaling.query returns `value`
(None answers an empty result, as Prometheus does when the series is missing).
"""

from __future__ import annotations

import json
from typing import Any

import httpx


class PromStub:
    def __init__(self, value: float | None = None) -> None:
        self.value = value
        self.queries: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        query = httpx.QueryParams(scope.get("query_string", b"").decode()).get("query", "")
        self.queries.append(query)
        result = [] if self.value is None else [{"metric": {}, "value": [0, str(self.value)]}]
        body = json.dumps(
            {"status": "success", "data": {"resultType": "vector", "result": result}}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def transport(self) -> httpx.ASGITransport:
        return httpx.ASGITransport(app=self)
