"""The fake RunPod's key check, as a key rotation needs it: several keys accepted at once,
RunPod's 401 problem for any other, and the set changed through `/_fake/auth`.

That the 401 is RunPod's published shape is checked with the other answers in
tests/adapters/runpod/test_contract_runpod.py.
"""

from __future__ import annotations

from typing import Any

import httpx

from rpp.sim.cloud import FakeCloud
from rpp.sim.cloud_api import CloudApi
from tests.fixtures_runpod import stocked_cloud


def api(cloud: FakeCloud, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=CloudApi(cloud)),
        base_url="https://api.runpod.io",
        headers={"Authorization": f"Bearer {key}"},
    )


async def listing(cloud: FakeCloud, key: str) -> httpx.Response:
    async with api(cloud, key) as http:
        return await http.get("/v2/pods")


async def control(cloud: FakeCloud, body: dict[str, Any]) -> httpx.Response:
    async with api(cloud, "any") as http:
        return await http.post("/_fake/auth", json=body)


async def test_both_keys_of_a_rotation_pass_and_any_other_gets_runpods_401() -> None:
    cloud = stocked_cloud(accepted_keys=("rpa_old", "rpa_new"))

    refused = await listing(cloud, "rpa_other")

    assert (await listing(cloud, "rpa_old")).status_code == 200
    assert (await listing(cloud, "rpa_new")).status_code == 200
    assert refused.status_code == 401
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert refused.json()["title"] == "Unauthorized"
    assert "rpa_other" not in refused.text


async def test_the_control_endpoint_revokes_the_old_key_without_echoing_any() -> None:
    cloud = stocked_cloud(accepted_keys=("rpa_old", "rpa_new"))

    answer = await control(cloud, {"acceptedKeys": ["rpa_new"]})

    assert answer.status_code == 200
    assert "rpa_new" not in answer.text
    assert (await listing(cloud, "rpa_old")).status_code == 401
    assert (await listing(cloud, "rpa_new")).status_code == 200


async def test_a_bad_key_list_is_refused_and_a_null_key_accepts_any_again() -> None:
    cloud = stocked_cloud(accepted_key="rpa_only")

    bad = await control(cloud, {"acceptedKeys": "rpa_new"})
    assert bad.status_code == 400
    assert cloud.accepted_keys == frozenset({"rpa_only"})

    assert (await control(cloud, {"acceptedKey": None})).status_code == 200
    assert (await listing(cloud, "anything")).status_code == 200
