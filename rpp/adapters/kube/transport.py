"""One Kubernetes API request and what its failure means, in the words of an RBAC rule.

`rpp.adapters.kube.real` sends every request through `send`: it awaits the official client's raw
response, returns the object the server answered with, and turns an HTTP failure into the
typed errors of `rpp.adapters.kube.api`. The message names the verb and resource (so a 403 reads
as the missing RBAC rule) and carries at most the server's one-line Status message: never response
headers, never bodies, never the client's exception with its dump of both.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from rpp.adapters.kube.api import (
    RBAC_HINT,
    AlreadyExists,
    Conflict,
    Forbidden,
    KubeError,
    NotFound,
    describe_target,
)


@dataclass(frozen=True)
class Op:
    """Which call this is: the RBAC verb, the resource (with subresource) and the object."""

    verb: str
    resource: str
    name: str | None
    namespace: str
    missing_hint: str = ""
    """Said on a 404, e.g. that the CRD is not installed when even a list is not found."""
    rbac_hint: str = RBAC_HINT
    """Said on a 403 that lasts: which Role lacks the grant."""

    @property
    def target(self) -> str:
        """`leases 'runpod-pool-controller' in namespace runpod`: what the call is on."""
        return describe_target(self.resource, self.name, self.namespace)

    def __str__(self) -> str:
        """`get leases 'runpod-pool-controller' in namespace runpod`, for log lines."""
        return f"{self.verb} {self.target}"

    def error(self, message: str, *, status: int | None = None) -> KubeError:
        """A failure of this call that no typed error fits, saying `message`."""
        return KubeError(
            self.verb,
            self.resource,
            self.name,
            namespace=self.namespace,
            message=message,
            status=status,
        )


async def send(
    op: Op,
    request: Awaitable[Any],
    *,
    host: str,
    resource_version: str | None = None,
    on_headers: Callable[[Mapping[str, str]], None] | None = None,
) -> dict[str, Any]:
    """Await one `*_without_preload_content` call; the decoded answer or a typed error.

    `on_headers` sees the headers of every answer, an error's too (the clock reads Date).
    """
    try:
        response = await request
        body = await response.read()
    except (aiohttp.ClientError, TimeoutError, OSError) as error:
        raise unreachable(op, host=host, error=error) from None
    if on_headers is not None:
        on_headers(response.headers)
    status = int(response.status)
    if status >= 300:
        raise failure(
            op,
            status=status,
            body=body,
            headers=response.headers,
            resource_version=resource_version,
        )
    decoded: dict[str, Any] = json.loads(body)
    return decoded


def failure(
    op: Op,
    *,
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    resource_version: str | None = None,
) -> KubeError:
    """The typed error for an HTTP answer of `status` >= 300, with the Retry-After the
    server asked for (429 and 503 carry one)."""
    server = _status_of(body)
    error = error_for(
        op,
        status=status,
        message=str(server.get("message", "")),
        reason=str(server.get("reason", "")),
        resource_version=resource_version,
    )
    error.retry_after = retry_after(headers.get("Retry-After"))
    return error


def retry_after(value: str | None) -> float | None:
    """A Retry-After header in seconds (the API server sends whole seconds); None when
    absent or not a number (an HTTP date is not something the API server sends)."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and seconds >= 0 else None


def error_for(
    op: Op,
    *,
    status: int,
    message: str,
    reason: str = "",
    resource_version: str | None = None,
) -> KubeError:
    """The typed error for an HTTP failure of `op`."""
    verb, resource, name, namespace = op.verb, op.resource, op.name, op.namespace
    if status == 403:
        return Forbidden(verb, resource, name, namespace=namespace, hint=op.rbac_hint)
    if status == 404:
        return NotFound(verb, resource, name, namespace=namespace, hint=op.missing_hint)
    # A 409 on create means the name is taken; on update, that the object moved on.
    if status == 409 and (reason == "AlreadyExists" or verb == "create"):
        return AlreadyExists(verb, resource, name, namespace=namespace)
    if status == 409:
        return Conflict(
            verb, resource, name, namespace=namespace, resource_version=resource_version
        )
    if status == 401:
        text = (
            f"unauthorized: cannot {op}: the API server rejected the controller's "
            "credentials; check its ServiceAccount token or kubeconfig"
        )
    else:
        detail = " ".join(message.split())[:300]
        text = f"kubernetes API error: cannot {op}: HTTP {status}: {detail}"
    return op.error(text, status=status)


def unreachable(op: Op, *, host: str, error: BaseException) -> KubeError:
    """The error for a request that got no HTTP answer at all."""
    kind = "timed out" if isinstance(error, TimeoutError) else type(error).__name__
    return op.error(f"cannot reach the Kubernetes API at {host} to {op}: {kind}")


def _status_of(body: bytes) -> dict[str, Any]:
    """The `Status` object of an error response, or {} when the body is not one."""
    try:
        decoded = json.loads(body)
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) else {}
