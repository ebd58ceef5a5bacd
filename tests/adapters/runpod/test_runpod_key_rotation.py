"""A rotated RunPod key swapped into a running client (`RunPodClient.use_key`).

Covered: the next request carries the new key in its Authorization header, the listing
too (its request is built once and reused, so a stale copy would keep the old key);
RunPod's error bodies are scrubbed of the old key and the new one alike; a blank key is
refused; a key RunPod revoked answers 401 as `Unauthorized`, and the new key is served.
"""

from __future__ import annotations

import json

import httpx
import pytest
from prometheus_client import CollectorRegistry

from rpp.adapters.runpod import answers
from rpp.adapters.runpod.client import RunPodClient
from rpp.sim.virtual_time import VirtualClock, run_virtual
from tests.fixtures_runpod import FAST, client_for, stocked_cloud

OLD = "rpa_OLD_KEY_0001"
NEW = "rpa_NEW_KEY_0002"


class Keys:
    """A RunPod stand-in that notes each request's Authorization header and answers with
    `answer` (a status and a body)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.answer: tuple[int, dict[str, object]] = (200, {"pods": []})

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request.headers.get("authorization", ""))
        status, body = self.answer
        return httpx.Response(status, content=json.dumps(body).encode())

    def client(self) -> RunPodClient:
        return RunPodClient(
            api_key=OLD,
            transport=httpx.MockTransport(self.handle),
            registry=CollectorRegistry(),
            **FAST,
        )


def test_the_next_listing_after_a_swap_carries_the_new_key() -> None:
    async def body(clock: VirtualClock) -> None:
        keys = Keys()
        async with keys.client() as c:
            await c.list_pods()
            await c.list_pods()  # the listing's request is built once and sent again
            c.use_key(NEW)
            await c.list_pods()
            keys.answer = (404, {"title": "Not Found", "detail": "no such pod"})
            assert await c.delete_pod("pod-1") is False  # a request built for the call

        assert keys.seen == [f"Bearer {OLD}", f"Bearer {OLD}", f"Bearer {NEW}", f"Bearer {NEW}"]

    run_virtual(body)


def test_runpods_error_texts_are_scrubbed_of_the_old_key_and_the_new_one() -> None:
    async def body(clock: VirtualClock) -> None:
        keys = Keys()
        keys.answer = (400, {"title": "Bad Request", "detail": f"echo {OLD} and {NEW}"})
        async with keys.client() as c:
            c.use_key(NEW)
            with pytest.raises(answers.Rejected) as refused:
                await c.get_pod("pod-1")

        text = str(refused.value)
        assert "echo [redacted] and [redacted]" in text
        assert OLD not in text
        assert NEW not in text

    run_virtual(body)


def test_a_blank_key_is_refused_and_the_key_in_use_stays() -> None:
    async def body(clock: VirtualClock) -> None:
        keys = Keys()
        async with keys.client() as c:
            with pytest.raises(ValueError, match="empty"):
                c.use_key("  ")
            await c.list_pods()

        assert keys.seen == [f"Bearer {OLD}"]

    run_virtual(body)


def test_a_revoked_key_is_unauthorized_and_the_rotated_one_is_served() -> None:
    async def body(clock: VirtualClock) -> None:
        cloud = stocked_cloud(accepted_keys=(OLD, NEW))  # both pass while rotating
        async with client_for(cloud, api_key=OLD) as c:
            assert await c.list_pods() == []
            cloud.accepted_keys = frozenset({NEW})  # the old key revoked in RunPod's console
            with pytest.raises(answers.Unauthorized) as refused:
                await c.list_pods()
            c.use_key(NEW)
            assert await c.list_pods() == []

        assert refused.value.status == 401
        assert OLD not in str(refused.value)

    run_virtual(body)
