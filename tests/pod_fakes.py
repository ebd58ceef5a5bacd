"""A scripted `PodClient` for prober tests that need no server: each GET is answered by
the test's own function, and every request is recorded."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

from rpp.adapters.pod_http import PodAnswer, PodRequest


class Answer(Protocol):
    def __call__(self, request: PodRequest, *, limit: int) -> Awaitable[PodAnswer]: ...


class ScriptedPods:
    """Answers each GET with `answer` (which may raise the client's errors); records them."""

    def __init__(self, answer: Answer) -> None:
        self._answer = answer
        self.requests: list[PodRequest] = []

    async def get(self, request: PodRequest, *, limit: int) -> PodAnswer:
        self.requests.append(request)
        return await self._answer(request, limit=limit)

    async def aclose(self) -> None:
        pass
