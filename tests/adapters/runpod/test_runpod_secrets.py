"""A secret-shaped API key (and pod env secrets) never reach logs, errors or metrics.

Every logger is captured at DEBUG (the client's, httpx's and httpcore's) while the
client succeeds and fails every way it can, in-process and over real HTTP, including
RunPod echoing the key back in an error body. Then the captured log text, every
exception's text and repr, the client's repr and the metrics exposition are searched
for the key and for a pod env secret.
"""

from __future__ import annotations

import logging
import socket

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from rpp.adapters.runpod import answers
from rpp.adapters.runpod.client import RunPodClient
from rpp.adapters.runpod.wire import PodRequest
from rpp.sim import faults
from rpp.sim.cloud_api import CloudApi
from rpp.sim.localhttp import serve_local
from tests.fixtures_runpod import FAST, RTX4090, client_for, stocked_cloud

API_KEY = "rpa_7Q2XK9M7B3N8V1C4Z6L0J2H5G8F1D3S7A9P4O6I2U8YT"
ENV_SECRET = "hf_envSECRETvalue0123456789abcdef"
REQUEST = PodRequest(name="rpp-sec-1", image="img:1", env={"HF_TOKEN": ENV_SECRET})


async def test_key_and_env_secrets_never_reach_logs_errors_or_metrics(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    registry = CollectorRegistry()
    errors: list[BaseException] = []
    cloud = stocked_cloud()

    async def expect_failure(call: object) -> None:
        try:
            await call  # type: ignore[misc]
        except answers.RunPodError as error:
            errors.append(error)
        else:
            raise AssertionError("the call was expected to fail")

    async with client_for(
        cloud, api_key=API_KEY, registry=registry, read_timeout=0.2, connect_timeout=0.1
    ) as c:
        pod = await c.create_pod(REQUEST, gpu_type=RTX4090, datacenter="EU-RO-1", cloud="SECURE")
        cloud.faults.next("createPod", faults.Refuse(status=400, detail=f"bad key {API_KEY}"))
        cloud.faults.next("listPods", faults.ServerError(503, detail=f"echo: Bearer {API_KEY}"))
        cloud.faults.next("getPod", faults.MalformedJson())
        cloud.faults.next("updatePod", faults.Timeout())
        await expect_failure(
            c.create_pod(REQUEST, gpu_type=RTX4090, datacenter="EU-RO-1", cloud="SECURE")
        )
        listed = await c.list_pods()  # after a 503 that echoed the key
        await expect_failure(c.get_pod(pod.id))
        await c.update_pod(pod.id, image="img:2", env=REQUEST.env)  # a timeout, then retried
        await c.host_notices()
        client_repr = repr(c)
        cloud.accepted_keys = frozenset({"another-key"})
        await expect_failure(c.list_pods())

    # Over a real socket too, so httpx's and httpcore's own debug logs are in the capture.
    cloud.accepted_keys = None
    async with serve_local(CloudApi(cloud)) as port:
        url = f"http://127.0.0.1:{port}"
        async with RunPodClient(api_key=API_KEY, base_url=url, registry=registry, **FAST) as c:
            await c.list_pods()
            await expect_failure(c.get_pod("nosuchpod00000"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    settings = {**FAST, "retry_deadline": 0.2}
    async with RunPodClient(
        api_key=API_KEY, base_url=f"http://127.0.0.1:{closed}", registry=registry, **settings
    ) as c:
        await expect_failure(c.list_pods())

    texts = [caplog.text, client_repr, generate_latest(registry).decode()]
    texts += [str(e) for e in errors] + [repr(e) for e in errors]
    texts += [str(e.detail) for e in errors if isinstance(e, answers.RunPodError)]
    texts += [repr(p) for p in listed] + [repr(REQUEST)]
    for text in texts:
        assert API_KEY not in text
        assert API_KEY[4:20] not in text  # not even a fragment of it
        assert ENV_SECRET not in text
    # The test would be vacuous if nothing had been logged or raised.
    assert {type(e) for e in errors} >= {
        answers.Rejected,
        answers.BadResponse,
        answers.Unauthorized,
        answers.NotFound,
        answers.ConnectionFailed,
    }
    assert "HTTP Request" in caplog.text  # httpx's own request log line was captured
    assert "updatePod: timeout" in caplog.text
    assert "[redacted]" in " ".join(str(e) for e in errors)
