"""A dead, hung or deleted pod leaves nginx within 60 s at the default 30 s interval.

Each story breaks one pod of three serving ones between two loops, then counts the
simulated seconds until the slots ConfigMap (what nginx reads) no longer holds it:
a hung pod (its probes time out: two in a row quarantine it), a pod deleted in RunPod
whose proxy answers 404 (a hard failure, whatever the 404's body says: RunPod promises
none), and a dead pod while RunPod's listing cannot be read (NotActing: quarantine
needs no listing, and creates, terminates and updates still wait).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from rpp.sim.asgi_io import Reply
from rpp.sim.cloud_render import pod_json
from rpp.sim.faults import ExtraPods, ServerError
from tests.stories.world_kit import Story, pool_manifest, story

LIMIT_S = 60.0
INTERVAL_S = 30.0
POOL = pool_manifest(replicas={"min": 3, "max": 3}, maxPerDatacenter=2)


async def three_serving(s: Story) -> list[str]:
    status = await s.until(lambda st: st.ready == 3, limit=20)
    return sorted(m.pod_id for m in status.members if m.slot is not None)


async def seconds_until_unwired(s: Story, pod: str, *, limit_s: float = 300.0) -> float:
    """Simulated seconds from now until nginx's slots no longer hold `pod`: the next loop
    a full INTERVAL_S away (the worst case, as if the pod broke just after a loop), then
    a loop every INTERVAL_S from start to start, as `rpp run` keeps them."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while pod in s.wired().values() and loop.time() - start <= limit_s:
        await asyncio.sleep(
            start + INTERVAL_S * math.ceil((loop.time() - start + 1) / INTERVAL_S) - loop.time()
        )
        await s.world.loop()
    return loop.time() - start


def test_a_hung_pod_leaves_nginx_within_60_s() -> None:
    async def body(s: Story) -> None:
        victim = (await three_serving(s))[1]
        s.world.pods[victim].hang()
        took = await seconds_until_unwired(s, victim)
        assert took <= LIMIT_S, f"the hung pod stayed in nginx {took:g}s"
        member = s.status().member(victim)
        assert member is not None
        assert member.quarantine is not None
        assert "timed out" in member.quarantine.reason

    story(body, manifest=POOL)


def test_a_pod_deleted_in_runpod_leaves_nginx_on_its_proxy_404_within_60_s() -> None:
    async def body(s: Story) -> None:
        victim = (await three_serving(s))[1]
        # Deleted in RunPod's console; RunPod's listing still shows it for a while (its
        # last record, as a lagging listing would), so only the proxy's 404 tells. The
        # 404's body names no pod: RunPod documents none to tell it by.
        listed = pod_json(s.world.cloud, s.world.cloud.pods[victim])
        s.world.cloud.delete_pod(victim)
        s.world.cloud.faults.next("listPods", ExtraPods(pods=(listed,)), times=20)
        respond = s.world.pod_client._respond

        async def plain_404(request: Any) -> Reply:
            if request.host.startswith(f"{victim}-"):
                return Reply.text(404, "404 page not found\n")
            return await respond(request)

        s.world.pod_client._respond = plain_404
        took = await seconds_until_unwired(s, victim)
        assert took <= LIMIT_S, f"the deleted pod stayed in nginx {took:g}s"
        member = s.status().member(victim)
        assert member is not None
        assert member.quarantine is not None
        assert "HTTP 404" in member.quarantine.reason

    story(body, manifest=POOL)


def test_a_dead_pod_leaves_nginx_within_60_s_while_runpods_listing_fails() -> None:
    async def body(s: Story) -> None:
        victim = (await three_serving(s))[1]
        s.world.cloud.faults.always("listPods", ServerError(status=503))
        s.world.pods[victim].die()
        calls = len(s.world.cloud.calls)
        took = await seconds_until_unwired(s, victim)
        assert took <= LIMIT_S, f"the dead pod stayed in nginx {took:g}s"
        status = s.status()
        acting = status.condition("NotActing")
        assert acting is not None
        assert acting.reason == "RunPodUnavailable"
        member = status.member(victim)
        assert member is not None
        assert member.quarantine is not None
        # Nothing but listings (and notice queries) went to RunPod: no create, no
        # terminate, no update without its word.
        sent = {c.operation for c in s.world.cloud.calls[calls:]}
        assert sent <= {"listPods", "hostNotices"}, sent
        assert len(s.wired()) == 2

    story(body, manifest=POOL)
