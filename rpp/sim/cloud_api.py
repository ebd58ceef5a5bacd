"""The fake cloud's HTTP face: RunPod REST v2 (`/v2/...`) and GraphQL (`/graphql`).

A plain ASGI app over `FakeCloud`, served in-process through `httpx.ASGITransport` or
over real HTTP by uvicorn (`rpp fake-runpod`), so the real client code runs unchanged.
Each request is recorded (`cloud.calls`), authenticated like RunPod (any non-empty
bearer, or only the keys of `cloud.accepted_keys`: 401 in RunPod's problem shape for any
other; a key starting "ro-" behaves as a Read Only key: 403 on every write), counted
against the optional per-minute quota, then given its scripted fault, if any, before
the model answers in the spec's shapes and status codes.

The control endpoints under `/_fake/` (rpp.sim.cloud_control) let a test script a
separately running fake: faults, stock, machine notes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from rpp.model.runpod_operations import RunPodOperation as Op
from rpp.model.timestamps import from_rfc3339
from rpp.sim import asgi_io as io
from rpp.sim import cloud_render as render
from rpp.sim.cloud import CloudError, FakeCloud
from rpp.sim.cloud_model import BUCKETS, bucket_start, pod_bills
from rpp.sim.cloud_requests import check_action, check_create, check_update
from rpp.sim.faults import (
    CreatedButFailed,
    EchoingRefusal,
    ExtraPods,
    Fault,
    ListingLag,
    MalformedJson,
    OddFields,
    RateLimited,
    RawAnswer,
    Refuse,
    ServerError,
    Slow,
    Timeout,
)
from rpp.sim.inference_work import WorkLog
from rpp.sim.odd_answers import echo_detail, reshape, send_raw

Answer = tuple[int, Any]  # (status, JSON body or None for an empty answer)
Handler = Callable[[FakeCloud, io.Request, Mapping[str, str]], Answer]

_ROUTES: list[tuple[str, Op, re.Pattern[str], str]] = [
    ("GET", Op.LIST_PODS, re.compile(r"^/v2/pods/?$"), "pods"),
    ("POST", Op.CREATE_POD, re.compile(r"^/v2/pods/?$"), "pods"),
    ("GET", Op.GET_POD, re.compile(r"^/v2/pods/(?P<id>[^/]+)$"), "pod"),
    ("PATCH", Op.UPDATE_POD, re.compile(r"^/v2/pods/(?P<id>[^/]+)$"), "pod"),
    ("DELETE", Op.DELETE_POD, re.compile(r"^/v2/pods/(?P<id>[^/]+)$"), "pod"),
    ("POST", Op.POD_ACTION, re.compile(r"^/v2/pods/(?P<id>[^/]+)/action$"), "action"),
    ("GET", Op.LIST_GPU_TYPES, re.compile(r"^/v2/catalog/gpus/?$"), "gpus"),
    ("GET", Op.LIST_DATA_CENTERS, re.compile(r"^/v2/catalog/datacenters/?$"), "datacenters"),
    ("POST", Op.HOST_NOTICES, re.compile(r"^/graphql/?$"), "graphql"),
    ("GET", Op.LIST_POD_BILLING, re.compile(r"^/v2/billing/pods/?$"), "billing"),
]


def operation_of(method: str, path: str) -> Op | None:
    """The operationId a request to the API calls (`createPod`...), None for no route."""
    for route_method, operation, pattern, _ in _ROUTES:
        if route_method == method and pattern.match(path):
            return operation
    return None


def _json_body(request: io.Request) -> Any:
    try:
        return json.loads(request.body or b"null")
    except ValueError:
        raise CloudError(
            422, "The request body is not valid JSON.", errors=["body: not JSON"]
        ) from None


def _csv(request: io.Request, name: str) -> list[str]:
    return [v for raw in request.query.get(name, []) for v in raw.split(",") if v]


def _only(values: list[str], allowed: tuple[str, ...], name: str) -> list[str]:
    bad = [v for v in values if v not in allowed]
    if bad:
        raise CloudError(422, f"Invalid {name}: {', '.join(bad)}.", errors=[f"query.{name}"])
    return values


def _list_gpus(cloud: FakeCloud, request: io.Request, _: Mapping[str, str]) -> Answer:
    include = _only(_csv(request, "include"), ("AVAILABILITY",), "include")
    product = _only(_csv(request, "product"), ("POD", "CLUSTER", "SERVERLESS"), "product")
    if bool(include) != bool(product):
        raise CloudError(400, "product is required with include=AVAILABILITY, and only with it.")
    for name in ("cloud", "count"):
        if name in request.query and not include:
            raise CloudError(400, f"{name} is valid only with include=AVAILABILITY.")
    cloud_type = _only(_csv(request, "cloud") or ["SECURE"], ("SECURE", "COMMUNITY"), "cloud")[0]
    count_text = (request.query.get("count") or ["1"])[0]
    if not count_text.isdigit() or int(count_text) < 1:
        raise CloudError(422, f"Invalid count: {count_text}.", errors=["query.count"])
    body = render.gpu_catalog_json(
        cloud, availability=bool(include), cloud_type=cloud_type, count=int(count_text)
    )
    return 200, body


def _list_datacenters(cloud: FakeCloud, request: io.Request, _: Mapping[str, str]) -> Answer:
    include = _only(_csv(request, "include"), ("GPU_AVAILABILITY", "CPU_AVAILABILITY"), "include")
    unsupported = set(request.query) - {"include"}
    if unsupported:
        raise CloudError(400, f"This fake does not filter by {', '.join(sorted(unsupported))}.")
    return 200, render.datacenters_json(cloud, gpu_availability="GPU_AVAILABILITY" in include)


def _pods(cloud: FakeCloud, request: io.Request, _: Mapping[str, str]) -> Answer:
    if request.method == "GET":
        return 200, {"pods": [render.pod_json(cloud, p) for p in cloud.listed_pods()]}
    pod = cloud.create_pod(check_create(_json_body(request)))
    return 201, render.pod_json(cloud, pod)


def _pod(cloud: FakeCloud, request: io.Request, params: Mapping[str, str]) -> Answer:
    pod_id = params["id"]
    if request.method == "GET":
        return 200, render.pod_json(cloud, cloud.get_listed(pod_id))
    if request.method == "PATCH":
        pod = cloud.update_pod(pod_id, check_update(_json_body(request)))
        return 200, render.pod_json(cloud, pod)
    cloud.delete_pod(pod_id)
    return 204, None


def _action(cloud: FakeCloud, request: io.Request, params: Mapping[str, str]) -> Answer:
    pod = cloud.pod_action(params["id"], check_action(_json_body(request)))
    return (204, None) if pod is None else (200, render.pod_json(cloud, pod))


def _graphql(cloud: FakeCloud, request: io.Request, _: Mapping[str, str]) -> Answer:
    body = _json_body(request)
    query = body.get("query") if isinstance(body, dict) else None
    if not isinstance(query, str):
        return 400, {"errors": [{"message": "Must provide query string."}]}
    if all(word in query for word in ("myself", "pods", "machine")):
        return 200, render.notices_json(cloud.listed_pods())
    return 200, {"errors": [{"message": "This fake answers only the machine-notice query."}]}


def _billing(cloud: FakeCloud, request: io.Request, _: Mapping[str, str]) -> Answer:
    """listPodBilling from the cloud's own pod lifetimes and prices (hour or day buckets)."""
    unsupported = set(request.query) - {"startTime", "endTime", "bucketSize", "podId"}
    if unsupported:
        raise CloudError(400, f"This fake does not bill by {', '.join(sorted(unsupported))}.")
    size = (request.query.get("bucketSize") or ["day"])[0]
    if size not in BUCKETS:
        _only([size], ("hour", "day", "week", "month", "year"), "bucketSize")
        raise CloudError(400, f"This fake bills in hour or day buckets, not {size}.")
    now = cloud.clock.now()
    start = _billing_time(request, "startTime") or now - dt.timedelta(days=30)
    end = _billing_time(request, "endTime") or now
    if end <= start:
        raise CloudError(400, "endTime must be after startTime.")
    start = bucket_start(start, size)
    if bucket_start(end, size) != end:  # snapped up to the end of its bucket
        end = bucket_start(end, size) + BUCKETS[size]
    pod_id = next(iter(request.query.get("podId") or ()), None)
    bills = pod_bills(cloud.billed, start=start, end=end, size=size, now=now, pod_id=pod_id)
    return 200, render.pod_billing_json(bills, start=start, end=end, size=size, pod_id=pod_id)


def _billing_time(request: io.Request, name: str) -> dt.datetime | None:
    text = next(iter(request.query.get(name) or ()), None)
    if text is None:
        return None
    try:
        return from_rfc3339(text)
    except ValueError:
        raise CloudError(422, f"Invalid {name}: {text}.", errors=[f"query.{name}"]) from None


_HANDLERS: dict[str, Handler] = {
    "pods": _pods,
    "pod": _pod,
    "action": _action,
    "gpus": _list_gpus,
    "datacenters": _list_datacenters,
    "graphql": _graphql,
    "billing": _billing,
}


async def _hold(receive: io.Receive, seconds: float | None) -> bool:
    """Wait `seconds` (None: forever) or until the client hangs up; True if it did."""

    async def disconnected() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    task = asyncio.ensure_future(disconnected())
    try:
        done, _ = await asyncio.wait({task}, timeout=seconds)
    finally:
        task.cancel()  # also when the request itself is cancelled (in-process client)
        # Wait for it to end: a task dropped while cancelling is "destroyed pending".
        await asyncio.gather(task, return_exceptions=True)
    return bool(done)


class CloudApi:
    """ASGI app: RunPod REST v2 + the GraphQL notice query over one `FakeCloud`."""

    def __init__(
        self, cloud: FakeCloud, *, control: bool = True, work_log: WorkLog | None = None
    ) -> None:
        self.cloud = cloud
        self.control = control
        self.work_log = work_log  # the pods' work, served at /_fake/work when given

    async def __call__(self, scope: io.Scope, receive: io.Receive, send: io.Send) -> None:
        if await io.reject_non_http(scope, receive, send):
            return
        request = await io.read_request(scope, receive)
        if self.control and request.path.startswith("/_fake/"):
            from rpp.sim.cloud_control import handle_control

            await handle_control(self.cloud, request, send, work_log=self.work_log)
            return
        route = self._route(request)
        if route is None:
            self.cloud.record("unknown", request.method, request.path)
            allowed = [m for m, _, rx, _ in _ROUTES if rx.match(request.path)]
            if allowed:
                await io.send_problem(
                    send,
                    405,
                    title="Method Not Allowed",
                    detail=f"{request.method} is not supported on {request.path}.",
                    headers=[("allow", ", ".join(allowed))],
                )
            else:
                await io.send_problem(
                    send, 404, title="Not Found", detail=f"No route for {request.path}."
                )
            return
        operation, handler, params = route
        self.cloud.record(operation, request.method, request.path)
        await self._serve(operation, handler, params, request, receive, send)

    def _route(self, request: io.Request) -> tuple[Op, Handler, dict[str, str]] | None:
        for method, operation, pattern, handler in _ROUTES:
            match = pattern.match(request.path)
            if match and method == request.method:
                return operation, _HANDLERS[handler], match.groupdict()
        return None

    async def _serve(
        self,
        operation: Op,
        handler: Handler,
        params: dict[str, str],
        request: io.Request,
        receive: io.Receive,
        send: io.Send,
    ) -> None:
        cloud = self.cloud
        auth = request.header("authorization") or ""
        key = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        if not cloud.accepts(key):
            await io.send_problem(
                send, 401, title="Unauthorized", detail="Invalid or missing API key."
            )
            return
        quota = cloud.take_quota()
        headers: list[tuple[str, str]] = []
        if quota is not None:
            allowed, remaining, reset = quota
            limit = cloud.rate_limit_per_minute
            headers = [
                ("ratelimit", f'"minute";r={remaining};t={reset}'),
                ("ratelimit-policy", f'"minute";q={limit};w=60'),
            ]
            if not allowed:
                await io.send_problem(
                    send,
                    429,
                    title="Too Many Requests",
                    detail="Rate limit exceeded for the minute window.",
                    headers=[("retry-after", str(reset)), *headers],
                )
                return
        if operation.writes and key.startswith("ro-"):
            await io.send_problem(
                send,
                403,
                title="Forbidden",
                detail="This API key is Read Only and cannot perform write operations.",
                headers=headers,
            )
            return
        fault = cloud.faults.take(operation)
        if isinstance(fault, EchoingRefusal):
            await io.send_problem(
                send, fault.status, title=fault.title, detail=echo_detail(request), headers=headers
            )
            return
        if isinstance(fault, ListingLag):
            # Not an error: the create answers as usual, and its pod lists late.
            if operation is Op.CREATE_POD:
                cloud.next_listing_lag = float(fault.seconds)
            fault = None
        replaced = fault is not None and not fault.takes_effect
        if replaced and fault and await self._fault_instead(fault, receive, send, headers):
            return
        try:
            status, payload = handler(cloud, request, params)
        except CloudError as error:
            # The operation failed on its own (no stock, 404...): that is the answer,
            # even when a fault was to strike after it took effect.
            await io.send_problem(
                send,
                error.status,
                title=error.title or _title(error.status),
                detail=error.detail,
                errors=error.errors,
                headers=headers,
            )
            return
        if isinstance(fault, OddFields | ExtraPods):
            payload = reshape(operation, payload, fault)
        elif fault is not None and fault.takes_effect:
            await self._fault_after(fault, receive, send, headers)
            return
        if payload is None:
            await io.send_bytes(send, status, b"", content_type=None, headers=headers)
        else:
            await io.send_json(send, status, payload, headers=headers)

    async def _fault_instead(
        self, fault: Fault, receive: io.Receive, send: io.Send, headers: list[tuple[str, str]]
    ) -> bool:
        """Apply a fault that replaces the operation; False to answer normally after it."""
        if isinstance(fault, Slow | Timeout):
            gone = await _hold(receive, fault.seconds)
            return gone or (isinstance(fault, Timeout) and fault.seconds is None)
        if isinstance(fault, ServerError | Refuse):
            title = fault.title if isinstance(fault, Refuse) else None
            await io.send_problem(
                send,
                fault.status,
                title=title or _title(fault.status),
                detail=fault.detail,
                headers=headers,
            )
        elif isinstance(fault, RateLimited):
            await io.send_problem(
                send,
                429,
                title="Too Many Requests",
                detail=fault.detail,
                headers=[
                    ("retry-after", str(fault.retry_after)),
                    ("ratelimit", f'"minute";r=0;t={fault.retry_after}'),
                ],
            )
        elif isinstance(fault, RawAnswer):
            await send_raw(send, fault, headers)
        elif isinstance(fault, MalformedJson):
            await io.send_bytes(
                send, fault.status, b'{"pods": [{"id": "', content_type="application/json"
            )
        return True

    async def _fault_after(
        self, fault: Fault, receive: io.Receive, send: io.Send, headers: list[tuple[str, str]]
    ) -> None:
        """The operation took effect; now the answer fails (5xx, or none at all)."""
        if isinstance(fault, Timeout):
            gone = await _hold(receive, fault.seconds)
            if not gone:
                await io.send_problem(
                    send, 504, title="Gateway Timeout", detail="Upstream timed out."
                )
            return
        status = fault.status if isinstance(fault, CreatedButFailed) else 500
        detail = fault.detail if isinstance(fault, CreatedButFailed) else "Internal server error"
        await io.send_problem(send, status, title=_title(status), detail=detail, headers=headers)


_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    402: "Payment Required",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


def _title(status: int) -> str:
    return _TITLES.get(status, f"HTTP {status}")
