"""The Kubernetes adapter with secrets scrubbed from every text it writes.

Where it sits: between the controller and the real (or in-memory) Kubernetes adapter,
at the way out of act. Status and Events are where the pool explains itself, and their
texts come from everywhere: RunPod's words (a refusal can quote the env it was sent),
exceptions, probes. `RedactingKube` scrubs them on the way out, whoever wrote them
(rpp/adapters/redaction.py says what is secret):

- a status write scrubs the human texts of the status (STATUS_TEXTS: messages,
  details, errors, reasons given in words) and never the ids, names, images and times
  the pool's memory is made of, which a scrub could corrupt;
- an Event's message is scrubbed whole;
- the slots ConfigMap carries no secret by construction and passes untouched.

Everything else is handed through as it is.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from rpp.adapters.kube.api import (
    EventType,
    KubeApi,
    KubeSettings,
    PoolEvent,
    SecretData,
    StoredConfigMap,
)
from rpp.adapters.redaction import Redactor

STATUS_TEXTS = frozenset(
    {
        "message",
        "detail",
        "error",
        "flaggedReason",
        "refused",
        "waiting",
        "terminateError",
        "purpose",
    }
)
"""The status fields written in words, from any source; every other string field of the
status is an id, a name, an image, an enum or a time (tests/adapters/test_redaction.py checks
that each string field of the status model is one or the other)."""


class RedactingKube:
    """A `KubeApi` that scrubs secrets from the status and Events it writes."""

    def __init__(self, inner: KubeApi, redactor: Redactor) -> None:
        self.inner = inner
        self.redactor = redactor

    @property
    def settings(self) -> KubeSettings:
        return self.inner.settings

    async def list_pools(self) -> list[dict[str, Any]]:
        return await self.inner.list_pools()

    async def get_pool(self, name: str) -> dict[str, Any]:
        return await self.inner.get_pool(name)

    async def replace_pool_status(
        self, name: str, *, status: Mapping[str, Any], resource_version: str
    ) -> dict[str, Any]:
        scrubbed = self.redactor.scrub_texts(status, fields=STATUS_TEXTS)
        return await self.inner.replace_pool_status(
            name, status=scrubbed, resource_version=resource_version
        )

    async def set_pool_finalizers(
        self, name: str, *, finalizers: Sequence[str], resource_version: str
    ) -> dict[str, Any]:
        return await self.inner.set_pool_finalizers(
            name, finalizers=finalizers, resource_version=resource_version
        )

    async def annotate_pool(self, name: str, *, annotations: Mapping[str, str]) -> dict[str, Any]:
        # An old status kept before a rebuild: its texts may quote anything.
        scrubbed = {key: self.redactor.scrub(value) for key, value in annotations.items()}
        return await self.inner.annotate_pool(name, annotations=scrubbed)

    async def read_config_map(self, name: str) -> StoredConfigMap | None:
        return await self.inner.read_config_map(name)

    async def create_config_map(
        self,
        name: str,
        *,
        data: Mapping[str, str],
        labels: Mapping[str, str],
        annotations: Mapping[str, str] | None = None,
    ) -> StoredConfigMap:
        return await self.inner.create_config_map(
            name, data=data, labels=labels, annotations=annotations
        )

    async def replace_config_map(
        self, current: StoredConfigMap, *, data: Mapping[str, str]
    ) -> StoredConfigMap:
        return await self.inner.replace_config_map(current, data=data)

    async def read_secret(self, name: str) -> SecretData | None:
        return await self.inner.read_secret(name)

    async def emit_event(
        self,
        pool: Mapping[str, Any],
        *,
        type_: EventType,
        reason: str,
        message: str,
        now: dt.datetime,
    ) -> None:
        await self.inner.emit_event(
            pool, type_=type_, reason=reason, message=self.redactor.scrub(message), now=now
        )

    def watch_pools(self) -> AsyncGenerator[PoolEvent, None]:
        return self.inner.watch_pools()

    async def get_lease(self, name: str) -> dict[str, Any] | None:
        return await self.inner.get_lease(name)

    async def create_lease(self, name: str, *, spec: Mapping[str, Any]) -> dict[str, Any]:
        return await self.inner.create_lease(name, spec=spec)

    async def replace_lease(
        self, name: str, *, spec: Mapping[str, Any], resource_version: str
    ) -> dict[str, Any]:
        return await self.inner.replace_lease(name, spec=spec, resource_version=resource_version)

    async def close(self) -> None:
        await self.inner.close()
