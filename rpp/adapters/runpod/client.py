"""The RunPod REST v2 client (async, httpx): the adapter observe and act call.

One `RunPodClient` serves every pool that shares an API key: observe calls
`list_pods()` and `host_notices()` once per loop, act calls create/update/delete. It
speaks REST v2 under `/v2` and GraphQL at `/graphql` on one base URL, and takes an
optional httpx transport so tests and the simulator run this very code against the
fake cloud in-process, with no sockets. It reads no environment variables and no clock:
retry deadlines run on the event loop's clock, which the simulator's loop advances.

RETRIES: reads, updates and deletes are retried by tenacity on 429, 5xx, timeouts and
connection errors, with jittered exponential backoff inside one deadline: no attempt
starts and no wait ends past it, so a call takes at most the deadline plus one
attempt's connect+read timeout. A 429
waits at least its Retry-After, and never past the deadline (then the 429 is raised).
A `RateLimit` header reporting an exhausted window makes the next call wait for its
reset the same way. A create is NEVER retried blindly: RunPod can answer 5xx or time
out after making the pod, so those end in `Unknown` and the next list finds the pod by
its unique name. Only a 429 or a connection that was never opened is safe to resend.

SIZE: an answer is read as a stream and never past `max_answer_bytes` (16 MiB by
default, RUNPOD_MAX_ANSWER_MB): a bigger one is refused unread, as BadResponse (for a
create, Unknown), so a hostile or broken RunPod cannot take the controller's memory.
RunPod's error details are cut to a few hundred characters, with their size given,
before they become error texts, log lines or status messages.

HOSTILE FIELDS: answers are read field by field (rpp/adapters/runpod/reading.py): a pod
with odd fields is kept, marked `unreadable`, and only an answer that is not RunPod's
shape at all fails the call. `runpod_pool_runpod_unreadable_pods` counts the odd pods
of the last listing. A parser that still raises (a bug) ends the call as BadResponse,
never as an exception the loop does not expect.

SECRETS: the key travels only in the Authorization header of the httpx client. It is
never in a URL, a log line, an exception text or a metric, and RunPod's error bodies
are scrubbed of it before they become error texts. Pod env (which carries secrets)
is never quoted in an error either: a body that does not parse is described, not shown.
A rotated key is swapped in with `use_key` between calls, without a new client; every
key the client ever sent is still scrubbed (an answer to an old request may echo it).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from prometheus_client import CollectorRegistry
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception
from tenacity.wait import wait_random_exponential

from rpp import __version__
from rpp.adapters.logs import fields, layer_logger
from rpp.adapters.runpod import answers
from rpp.adapters.runpod.billing import billing_from_json, billing_query
from rpp.adapters.runpod.call_metrics import ApiCallMetrics
from rpp.adapters.runpod.catalog import (
    DataCenterInfo,
    GpuCatalog,
    datacenters_from_json,
    gpu_catalog_from_json,
)
from rpp.adapters.runpod.notices import NOTICES_QUERY, notices_from_graphql
from rpp.adapters.runpod.reading import WireError
from rpp.adapters.runpod.retrying import (
    BackoffHonouringRetryAfter,
    StopAtDeadline,
    is_safe_to_resend,
    is_transient,
    may_have_acted,
)
from rpp.adapters.runpod.wire import (
    PodRequest,
    pod_from_json,
    pods_from_list,
    update_body,
)
from rpp.model.observations import BillingRecord, HostNotice, RunPodPod
from rpp.model.runpod_operations import RunPodOperation

log = layer_logger("rpp.adapters.runpod")

DEFAULT_BASE_URL = "https://api.runpod.io"
DEFAULT_MAX_ANSWER_BYTES = 16 << 20
URLS_KEPT = 4096  # parsed URLs of API paths kept (a few, plus one per pod acted on)
BARE_KEPT = 256  # built bodiless requests without parameters kept (the listing, a pod's GET)
USER_AGENT = f"runpod-pool-controller/{__version__} (python-httpx/{httpx.__version__})"

T = TypeVar("T")


def _json(body: bytes | bytearray) -> Any:
    try:
        return json.loads(body)
    except ValueError as exc:
        # Never quote the body: pod JSON carries env, and env carries secrets.
        raise WireError(f"answer is not JSON (error at char {getattr(exc, 'pos', '?')})") from None
    except RecursionError:
        raise WireError("answer nests deeper than a JSON reader follows") from None


class _TooLarge(Exception):
    """An answer longer than the client reads; `size` is what it declared, if it did."""

    def __init__(self, size: int | None) -> None:
        self.size = size


async def _read_bounded(response: httpx.Response, limit: int) -> bytearray:
    """The whole body, unless it is over `limit` bytes: then `_TooLarge`, unread."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _TooLarge(int(declared))
    body = bytearray()
    async for chunk in response.aiter_bytes():  # decoded: a gzip bomb counts as unpacked
        body += chunk
        if len(body) > limit:
            raise _TooLarge(None)
    return body


def _too_large(error: _TooLarge, limit: int) -> str:
    if error.size is not None:
        return (
            f"RunPod's answer is {error.size:,} bytes, more than the {limit:,} this controller "
            "reads (RUNPOD_MAX_ANSWER_MB); not read"
        )
    return (
        f"RunPod's answer runs past the {limit:,} bytes this controller reads "
        "(RUNPOD_MAX_ANSWER_MB); the rest was not read"
    )


class RunPodClient:
    """Async client for RunPod REST v2 and the one GraphQL notice query."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str = DEFAULT_BASE_URL,
        transport: httpx.AsyncBaseTransport | None = None,
        connect_timeout: float = 5.0,
        read_timeout: float = 15.0,
        retry_deadline: float = 25.0,
        backoff_initial: float = 0.5,
        backoff_max: float = 8.0,
        registry: CollectorRegistry | None = None,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        _check_key(api_key)
        if not base_url.startswith(("https://", "http://")):
            raise ValueError(f"RunPod base URL {base_url!r} must start with https:// or http://")
        if min(connect_timeout, read_timeout, retry_deadline) <= 0:
            raise ValueError("RunPod timeouts and the retry deadline must be positive seconds")
        if max_answer_bytes < 1024:
            raise ValueError("RunPod's answer limit must be at least 1 KiB")
        self._max_answer_bytes = max_answer_bytes
        self._unreadable_seen = 0  # odd pods of the last listing, to log only changes
        self.base_url = base_url.rstrip("/")
        self._urls: dict[str, httpx.URL] = {}
        self._bare: dict[tuple[str, str], httpx.Request] = {}
        self._key = api_key
        self._secrets: tuple[bytes, ...] = (api_key.encode(),)
        self._attempt_timeout = connect_timeout + read_timeout
        self._retry_deadline = retry_deadline
        self._backoff = wait_random_exponential(multiplier=backoff_initial, max=backoff_max)
        self._metrics = ApiCallMetrics(registry)
        self._quiet_until = 0.0  # loop time before which RunPod asked us not to call
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            transport=transport,
            timeout=httpx.Timeout(
                connect=connect_timeout,
                read=read_timeout,
                write=read_timeout,
                pool=connect_timeout,
            ),
            headers={
                "Authorization": f"Bearer {api_key}",
                "User-Agent": USER_AGENT,
                "Accept": "application/json",
            },
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"RunPodClient(base_url={self.base_url!r})"

    def use_key(self, api_key: str) -> None:
        """Send `api_key` from the next request on: a rotated key, without a restart.
        A request already under way finishes with the key it was sent with."""
        _check_key(api_key)
        if api_key == self._key:
            return
        self._key = api_key
        self._http.headers["Authorization"] = f"Bearer {api_key}"
        # Requests kept for reuse carry the old header, copied in when they were built.
        self._bare.clear()
        secret = api_key.encode()
        if secret not in self._secrets:
            # Longest first, so a key that contains another is cut whole.
            self._secrets = tuple(sorted((*self._secrets, secret), key=len, reverse=True))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> RunPodClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ---- operations -------------------------------------------------------------------

    async def list_pods(self) -> list[RunPodPod]:
        """Every pod of the account; the caller filters a pool's by name or spec.adopt.

        Pods with odd fields are in the list, marked `unreadable`; entries without a
        usable pod id are left out. Both are counted in the unreadable-pods gauge.
        """
        listing = await self._call(
            RunPodOperation.LIST_PODS, "GET", "/v2/pods", lambda b: pods_from_list(_json(b))
        )
        odd = listing.unreadable
        self._metrics.unreadable_pods(odd)
        if odd != self._unreadable_seen:
            level = logging.WARNING if odd else logging.INFO
            log.log(
                level,
                "RunPod lists %d pod(s) with fields this controller cannot read%s",
                odd,
                f"; no pool acts on what they say: {listing.describe_odd()}" if odd else "",
            )
            self._unreadable_seen = odd
        return list(listing.pods)

    async def get_pod(self, pod_id: str) -> RunPodPod:
        """One pod, re-read right before an update or delete (ownership check)."""
        return await self._call(
            RunPodOperation.GET_POD, "GET", _pod_path(pod_id), lambda b: pod_from_json(_json(b))
        )

    async def create_pod(
        self, request: PodRequest, *, gpu_type: str, datacenter: str, cloud: str
    ) -> RunPodPod:
        """Create one pod on one (GPU type, datacenter, cloud). Never retried blindly.

        Raises `Unknown` when RunPod may have made the pod anyway (timeout, 5xx, a
        dropped connection, a 2xx whose body is not a pod).
        """
        body = request.create_body(gpu_type=gpu_type, datacenter=datacenter, cloud=cloud)
        return await self._call(
            RunPodOperation.CREATE_POD,
            "POST",
            "/v2/pods",
            lambda b: pod_from_json(_json(b)),
            json_body=body,
            idempotent=False,
        )

    async def update_pod(self, pod_id: str, *, image: str, env: Mapping[str, str]) -> RunPodPod:
        """Switch a pod's image in place. `env` must be the COMPLETE env: it replaces."""
        return await self._call(
            RunPodOperation.UPDATE_POD,
            "PATCH",
            _pod_path(pod_id),
            lambda b: pod_from_json(_json(b)),
            json_body=update_body(image=image, env=env),
        )

    async def delete_pod(self, pod_id: str) -> bool:
        """Terminate a pod. True if deleted now, False if it was already gone."""
        try:
            await self._call(
                RunPodOperation.DELETE_POD, "DELETE", _pod_path(pod_id), lambda b: None
            )
        except answers.NotFound:
            return False
        return True

    async def gpu_catalog(self, *, cloud: str, gpu_count: int = 1) -> GpuCatalog:
        """GPU types with pod stock per datacenter for one cloud (SECURE or COMMUNITY)."""
        params: dict[str, str | int] = {
            "include": "AVAILABILITY",
            "product": "POD",
            "cloud": cloud,
            "count": gpu_count,
        }
        return await self._call(
            RunPodOperation.LIST_GPU_TYPES,
            "GET",
            "/v2/catalog/gpus",
            lambda b: gpu_catalog_from_json(_json(b), cloud=cloud),
            params=params,
        )

    async def datacenters(self) -> list[DataCenterInfo]:
        """Datacenters with the GPU types each offers and their levels."""
        return await self._call(
            RunPodOperation.LIST_DATA_CENTERS,
            "GET",
            "/v2/catalog/datacenters",
            lambda b: datacenters_from_json(_json(b)),
            params={"include": "GPU_AVAILABILITY"},
        )

    async def host_notices(self) -> dict[str, HostNotice]:
        """Machine note and maintenance window of every pod, from one GraphQL query."""
        return await self._call(
            RunPodOperation.HOST_NOTICES,
            "POST",
            "/graphql",
            lambda b: notices_from_graphql(_json(b)),
            json_body={"query": NOTICES_QUERY},
        )

    async def pod_billing(
        self, *, start: dt.datetime, end: dt.datetime
    ) -> tuple[BillingRecord, ...]:
        """What RunPod billed each pod of the account per hour in [start, end) (listPodBilling);
        read at a low rate by observe (rpp/observe/billing.py), never every loop."""
        return await self._call(
            RunPodOperation.LIST_POD_BILLING,
            "GET",
            "/v2/billing/pods",
            lambda b: billing_from_json(_json(b)),
            params=billing_query(start=start, end=end),
        )

    # ---- the one request path -----------------------------------------------------------

    async def _call(
        self,
        operation: RunPodOperation,
        method: str,
        path: str,
        parse: Callable[[bytearray], T],
        *,
        params: Mapping[str, str | int] | None = None,
        json_body: Any = None,
        idempotent: bool = True,
    ) -> T:
        deadline = asyncio.get_running_loop().time() + self._retry_deadline
        retrying = AsyncRetrying(
            stop=StopAtDeadline(deadline),
            wait=BackoffHonouringRetryAfter(self._backoff),
            retry=retry_if_exception(is_transient if idempotent else is_safe_to_resend),
            before_sleep=lambda state: self._log_retry(operation, state),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                return await self._attempt(
                    operation,
                    method,
                    path,
                    parse,
                    params=params,
                    json_body=json_body,
                    deadline=deadline,
                    idempotent=idempotent,
                )
        raise AssertionError("tenacity ends with a result or the last error")  # pragma: no cover

    async def _attempt(
        self,
        operation: RunPodOperation,
        method: str,
        path: str,
        parse: Callable[[bytearray], T],
        *,
        params: Mapping[str, str | int] | None,
        json_body: Any,
        deadline: float,
        idempotent: bool,
    ) -> T:
        loop = asyncio.get_running_loop()
        await self._wait_for_quota(operation, deadline)
        # httpx enforces connect/read timeouts on sockets only; this bound also holds
        # for in-process transports and for answers that trickle in byte by byte. It is
        # not clipped to the retry deadline: a last attempt cut short would report a
        # timeout that never happened instead of RunPod's real answer.
        limit = self._attempt_timeout
        started = loop.time()
        status: int | None = None
        try:
            try:
                async with asyncio.timeout(limit):
                    status, headers, body = await self._exchange(method, path, params, json_body)
            except TimeoutError:
                detail = f"no answer within {limit:g}s"
                raise answers.Timeout(operation=operation, detail=detail) from None
            except (httpx.ConnectTimeout, httpx.PoolTimeout):
                raise answers.ConnectionFailed(
                    operation=operation, detail="could not connect to RunPod in time", sent=False
                ) from None
            except httpx.TimeoutException as exc:
                raise answers.Timeout(operation=operation, detail=type(exc).__name__) from None
            except httpx.ConnectError as exc:
                raise answers.ConnectionFailed(
                    operation=operation, detail=self._scrub(str(exc)), sent=False
                ) from None
            except httpx.TransportError as exc:
                raise answers.ConnectionFailed(
                    operation=operation,
                    detail=f"{type(exc).__name__}: {self._scrub(str(exc))}",
                    sent=True,
                ) from None
            self._note_rate_limit(status, headers, loop.time())
            if isinstance(body, _TooLarge):
                detail = _too_large(body, self._max_answer_bytes)
                if 200 <= status < 300:
                    raise answers.BadResponse(operation=operation, status=status, detail=detail)
                raise answers.error_for_response(
                    operation=operation, status=status, body=b"", headers=headers, note=detail
                )
            if not 200 <= status < 300:
                raise answers.error_for_response(
                    operation=operation,
                    status=status,
                    body=self._scrub_bytes(body),
                    headers=headers,
                )
            result = self._parse(operation, status, parse, body)
        except answers.RunPodError as error:
            if not idempotent and not is_safe_to_resend(error) and may_have_acted(error):
                error = answers.Unknown(operation=operation, cause=error)
            self._record(operation, error.outcome, status, loop.time() - started, path)
            raise error from None
        self._record(operation, answers.CallOutcome.OK, status, loop.time() - started, path)
        return result

    async def _exchange(
        self,
        method: str,
        path: str,
        params: Mapping[str, str | int] | None,
        json_body: Any,
    ) -> tuple[int, httpx.Headers, bytearray | _TooLarge]:
        """Send one request; read its answer as a stream, never past the answer limit."""
        if params is None and json_body is None:
            request = self._bare_request(method, path)
        else:
            request = self._http.build_request(
                method, self._url(path), params=params, json=json_body
            )
        response = await self._http.send(request, stream=True)
        try:
            body: bytearray | _TooLarge = await _read_bounded(response, self._max_answer_bytes)
        except _TooLarge as too_large:
            body = too_large
        finally:
            await response.aclose()
        return response.status_code, response.headers, body

    def _bare_request(self, method: str, path: str) -> httpx.Request:
        """A request without body or parameters, built once and sent again: the listing
        is asked every loop, and merging the client's defaults into a new request each
        time was a tenth of the call. Such a request never changes."""
        request = self._bare.get((method, path))
        if request is None:
            if len(self._bare) >= BARE_KEPT:
                self._bare.clear()
            request = self._http.build_request(method, self._url(path))
            self._bare[(method, path)] = request
        return request

    def _url(self, path: str) -> httpx.URL:
        """The absolute URL of an API path, parsed once: the same few paths are called
        every loop, and joining them to the base URL again was a tenth of a call."""
        url = self._urls.get(path)
        if url is None:
            if len(self._urls) >= URLS_KEPT:  # pod paths come and go with their pods
                self._urls.clear()
            url = self._urls[path] = httpx.URL(self.base_url + path)
        return url

    def _parse(
        self,
        operation: RunPodOperation,
        status: int,
        parse: Callable[[bytearray], T],
        body: bytearray,
    ) -> T:
        try:
            return parse(body)
        except WireError as exc:
            detail = self._scrub(str(exc))
            raise answers.BadResponse(operation=operation, status=status, detail=detail) from None
        except Exception as exc:  # a parser bug must end the call, not the loop
            log.error("RunPod %s: reading the answer failed: %s", operation, type(exc).__name__)
            raise answers.BadResponse(
                operation=operation,
                status=status,
                detail=f"the answer could not be read ({type(exc).__name__})",
            ) from None

    async def _wait_for_quota(self, operation: RunPodOperation, deadline: float) -> None:
        """Honour RunPod's rate limit before sending: wait, or fail if past the deadline."""
        loop = asyncio.get_running_loop()
        wait = self._quiet_until - loop.time()
        if wait <= 0:
            return
        if loop.time() + wait >= deadline:
            # Not a call to RunPod, so not counted; the error says how long to wait.
            raise answers.RateLimited(
                operation=operation,
                detail="RunPod's rate-limit window is used up; not calling before it resets",
                retry_after=wait,
            )
        log.info("RunPod %s: waiting %.1fs for the rate-limit window to reset", operation, wait)
        await asyncio.sleep(wait)

    def _note_rate_limit(self, status: int, headers: httpx.Headers, now: float) -> None:
        resume = 0.0
        if status == 429:
            resume = answers.parse_retry_after(headers.get("retry-after")) or 0.0
        for remaining, reset in answers.parse_rate_limit(headers.get("ratelimit")).values():
            if remaining <= 0:
                resume = max(resume, reset)
        if resume > 0:
            self._quiet_until = max(self._quiet_until, now + resume)

    def _record(
        self,
        operation: RunPodOperation,
        outcome: answers.CallOutcome,
        status: int | None,
        took: float,
        path: str,
    ) -> None:
        self._metrics.record(operation, outcome)
        log.debug(
            "RunPod %s %s -> %s (HTTP %s) in %.3fs",
            operation,
            path,
            outcome.value,
            status if status is not None else "-",
            took,
            extra=fields(outcome=outcome.value),
        )

    def _log_retry(self, operation: RunPodOperation, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        outcome = error.outcome.value if isinstance(error, answers.RunPodError) else None
        log.warning(
            "RunPod %s attempt %d failed (%s); retrying in %.2fs",
            operation,
            state.attempt_number,
            error,
            state.upcoming_sleep,
            extra=fields(outcome=outcome),
        )

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret.decode(), "[redacted]")
        return text

    def _scrub_bytes(self, body: bytearray) -> bytes:
        scrubbed = bytes(body)
        for secret in self._secrets:
            scrubbed = scrubbed.replace(secret, b"[redacted]")
        return scrubbed


def _check_key(api_key: str) -> None:
    if not api_key or not api_key.strip():
        raise ValueError("the RunPod API key is empty; pass the key from the pool's Secret")


def _pod_path(pod_id: str) -> str:
    if not pod_id:
        raise ValueError("a pod id is required")
    return "/v2/pods/" + quote(pod_id, safe="")
