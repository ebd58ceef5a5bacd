"""Quarantine: a wired pod whose probes fail hard leaves nginx at once, not after the
Unreachable rule's duration, and comes back when it passes again.

Covered: what the quarantine writes (the slot freed, the reason in the stored status,
its Events); the flag that ends it; and, in the simulated world, the stories a
platform engineer would tell: a dead pod out of nginx the first loop after it died (its
probe and the same probe 5 s later fail hard) and replaced only after the rule's
duration, a pod that recovers put back without a replacement, the last wired pod taken out
only while RunPod's list reads, and the prober telling hard failures
(no connection, no answer in time, RunPod's 404/502/503) from slow or wrong answers.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
import yaml

from rpp.adapters.pod_http import PodAnswer, PodRequest, PodUnreachable
from rpp.model.effects import RecordEvent, Unwire, Wire
from rpp.model.members import MemberRecord, Quarantine
from rpp.model.status import PoolStatus
from rpp.observe.prober import CONFIRM_AFTER_S, Prober, ProbeTarget
from rpp.sim.faults import ServerError
from tests.machines.test_member_machine import BLOCKED, FIRES, T0, run
from tests.pod_fakes import ScriptedPods
from tests.stories.world_kit import Story, pool_manifest, story

QUARANTINE = "Ready->Ready failing_hard, wired, not last, not pool-wide (quarantined)"
RELEASE = "Ready->Ready quarantined, passes_in_a_row, slot_offered (released)"


class TestWhatQuarantineWrites:
    def test_quarantine_frees_the_slot_and_keeps_the_probes_words_as_its_reason(self) -> None:
        step = run(FIRES[QUARANTINE])
        unwire, event = step.effects
        assert unwire == Unwire(
            pod_id="pod1", slot=1, reason="quarantined: its probes failed hard"
        )
        assert step.record.slot is None
        assert step.record.phase == "Ready"
        assert step.record.since == T0, "a quarantine is no phase change"
        assert step.record.quarantine == Quarantine(
            since=T0 + dt.timedelta(seconds=30),
            reason="health /health: HTTP 502; metrics /metrics: HTTP 502",
        )
        assert isinstance(event, RecordEvent)
        assert (event.type, event.reason) == ("Warning", "PodQuarantined")
        assert "its last 2 probes failed hard (health /health: HTTP 502" in event.message

    def test_kubectl_get_rpp_o_yaml_shows_the_quarantine_and_its_reason(self) -> None:
        stored = yaml.safe_dump(run(FIRES[QUARANTINE]).record.stored())
        record = yaml.safe_load(stored)
        assert record["quarantine"] == {
            "since": "2026-01-01T00:00:30Z",
            "reason": "health /health: HTTP 502; metrics /metrics: HTTP 502",
        }
        assert record["hardFailures"] == 2
        assert "slot" not in record

    def test_release_wires_the_offered_slot_and_ends_the_quarantine(self) -> None:
        step = run(FIRES[RELEASE])
        wire, event = step.effects
        assert wire == Wire(pod_id="pod1", slot=2)
        assert (step.record.slot, step.record.quarantine) == (2, None)
        assert isinstance(event, RecordEvent)
        assert (event.type, event.reason) == ("Normal", "PodReleased")

    def test_a_flag_ends_the_quarantine_its_replacement_takes_the_place(self) -> None:
        step = run(BLOCKED["Ready->Flagged from quarantine: a rule due, nothing to unwire"])
        assert (step.record.phase, step.record.quarantine) == ("Flagged", None)
        assert step.record.flagged_rule == "Unreachable"

    def test_the_hard_failure_count_needs_failures_in_a_row(self) -> None:
        assert run(BLOCKED["Ready stays wired: one hard failure"]).record.hard_failures == 1
        reset = "Ready stays wired: a failure that is not hard (a timeout) resets the count"
        assert run(BLOCKED[reset]).record.hard_failures == 0


def in_nginx(s: Story) -> set[str]:
    return set(s.wired().values())


def of(status: PoolStatus, pod_id: str) -> MemberRecord:
    member = status.member(pod_id)
    assert member is not None, f"{pod_id} is no member"
    return member


def test_a_dead_pod_leaves_nginx_at_the_first_loop_after_it_died_and_is_replaced_on_the_rule() -> (
    None
):
    async def body(s: Story) -> None:
        before = await s.until(lambda st: st.ready == 2, limit=20)
        victim = sorted(m.pod_id for m in before.members)[0]
        creates = len(s.effects("create"))
        s.world.pods[victim].die()
        died_at = s.clock.now()
        # Its probe fails hard, and so does the same probe 5 s later: two in a row.
        status = (await s.loops(1)).status
        assert status is not None
        member = status.member(victim)
        assert member is not None
        assert (member.phase, member.hard_failures) == ("Ready", 2)
        assert member.quarantine is not None
        assert "HTTP 502" in member.quarantine.reason
        assert victim not in in_nginx(s)
        assert (member.quarantine.since - died_at).total_seconds() <= 60
        assert len(s.effects("create")) == creates, "no replacement before the rule's duration"
        flagged = await s.until(lambda st: of(st, victim).phase == "Flagged")
        flagged_member = flagged.member(victim)
        assert flagged_member is not None
        assert flagged_member.flagged_rule == "Unreachable"
        assert flagged_member.quarantine is None
        flagged_at = s.clock.now()
        assert (flagged_at - member.quarantine.since).total_seconds() >= 90
        final = await s.until(lambda st: st.ready == 2 and st.member(victim) is None, limit=60)
        assert any(m.replacement_for == victim for m in final.members)

    story(body)


def test_a_pod_that_recovers_goes_back_into_nginx_without_a_replacement() -> None:
    async def body(s: Story) -> None:
        before = await s.until(lambda st: st.ready == 2, limit=20)
        victim = sorted(m.pod_id for m in before.members)[1]
        creates = len(s.effects("create"))
        s.world.pods[victim].die()
        await s.until(lambda st: of(st, victim).quarantine is not None)
        s.world.pods[victim].recover()
        back = await s.until(lambda st: of(st, victim).wired, limit=5)
        member = back.member(victim)
        assert member is not None
        assert (member.phase, member.quarantine, member.pass_streak) == ("Ready", None, 3)
        assert victim in in_nginx(s)
        assert len(s.effects("create")) == creates
        assert back.ready == 2
        # Status reads it as what it was, never as `Ready -> Ready`.
        moves = [h.outcome for h in back.history if h.pod == victim and h.action == "transition"]
        assert moves[-2:] == ["Ready -> Ready (quarantined)", "Ready (quarantined) -> Ready"]

    story(body)


def test_the_last_wired_pod_is_quarantined_while_runpods_list_reads() -> None:
    """RunPod's API answered this loop, so the controller's network works: the pod it
    cannot reach through RunPod's proxy is one nginx cannot use either."""

    async def body(s: Story) -> None:
        before = await s.until(lambda st: st.ready == 1, limit=20)
        (only,) = [m.pod_id for m in before.members]
        s.world.pods[only].die()
        status = await s.loops(2)
        assert status.status is not None
        member = status.status.member(only)
        assert member is not None
        assert member.hard_failures >= 2
        assert member.quarantine is not None
        assert not member.wired
        assert only not in in_nginx(s)
        assert status.status.ready == 0

    story(body, manifest=pool_manifest(replicas={"min": 1, "max": 1}))


def test_the_last_wired_pod_stays_while_nothing_shows_the_controllers_network_works() -> None:
    """RunPod's list does not read and no other pod passes: every probe failing may be the
    controller's own network, so the last wired pod stays in nginx (and Ready is False)."""

    async def body(s: Story) -> None:
        before = await s.until(lambda st: st.ready == 1, limit=20)
        (only,) = [m.pod_id for m in before.members]
        s.world.cloud.faults.always("listPods", ServerError(status=503))
        s.world.pods[only].die()
        status = await s.loops(4)
        assert status.status is not None
        member = status.status.member(only)
        assert member is not None
        assert member.hard_failures >= 2
        assert (member.quarantine, member.wired) == (None, True)
        assert only in in_nginx(s)
        ready = status.status.condition("Ready")
        assert ready is not None
        assert ready.status == "False"
        acting = status.status.condition("NotActing")
        assert acting is not None
        assert f"keeps {only} in nginx" in acting.message
        assert "the controller's own network" in acting.message

    story(body, manifest=pool_manifest(replicas={"min": 1, "max": 1}))


@pytest.mark.parametrize(
    ("status", "body", "hard"),
    [
        (502, b"502 Bad Gateway", True),
        (503, b"no healthy upstream", True),
        (404, b"pod podabc not found\n", True),
        # RunPod's proxy answers 404 for a pod that is gone or does not listen, with no
        # promise of a body to tell it by; an app's own 404 fails the probe as surely.
        (404, b'{"detail":"Not Found"}', True),
        (500, b"boom", False),
        (200, b"ok", False),
    ],
)
async def test_the_prober_tells_hard_failures_from_other_answers(
    status: int, body: bytes, hard: bool
) -> None:
    async def answer(request: PodRequest, *, limit: int) -> PodAnswer:
        return PodAnswer(status, body)

    prober = Prober(client=ScriptedPods(answer), url_pattern="http://fake")
    result = await prober.probe_one(ProbeTarget(pod_id="podabc"))
    assert result.hard_failure is hard
    assert result.passed is (status == 200)


@pytest.mark.parametrize(
    ("confirm", "answers", "hard_failures", "passed"),
    [
        (True, [502, 502], 2, False),  # dead: two in a row, in one loop
        (True, [502, 200], 0, True),  # a blip: what the pod says 5 s later counts
        (True, [404, 500], 0, False),  # it answers again, if badly: no longer hard
        (False, [502], 1, False),  # not wired: no hurry, one probe a loop
    ],
)
async def test_a_wired_pods_hard_failure_is_probed_again_at_once(
    confirm: bool, answers: list[int], hard_failures: int, passed: bool
) -> None:
    sent: list[float] = []

    async def answer(request: PodRequest, *, limit: int) -> PodAnswer:
        sent.append(asyncio.get_running_loop().time())
        return PodAnswer(answers[(len(sent) - 1) // 2], b"ok")

    prober = Prober(client=ScriptedPods(answer), url_pattern="http://fake")
    result = await prober.probe_one(ProbeTarget(pod_id="podabc", confirm=confirm))
    assert (result.hard_failures, result.passed) == (hard_failures, passed)
    assert len(sent) == 2 * len(answers)  # health and metrics, once per probe
    assert sent[-1] - sent[0] >= (CONFIRM_AFTER_S if len(answers) == 2 else 0)


async def test_a_metrics_page_alone_timing_out_is_not_hard() -> None:
    """A pod whose /health answers but whose metrics page is slower than the timeout still
    serves: SlowScrape judges it over its window; quarantine is for a pod nginx cannot use."""

    async def slow_metrics(request: PodRequest, *, limit: int) -> PodAnswer:
        if "metrics" in request.url:
            await asyncio.sleep(1)
        return PodAnswer(200, b"ok")

    prober = Prober(client=ScriptedPods(slow_metrics), url_pattern="http://fake", timeout_s=0.05)
    result = await prober.probe_one(ProbeTarget(pod_id="podabc", confirm=True))
    assert (result.passed, result.health_ok, result.hard_failures) == (False, True, 0)


async def test_the_prober_counts_no_connection_and_a_timeout_as_hard() -> None:
    async def refused(request: PodRequest, *, limit: int) -> PodAnswer:
        raise PodUnreachable("ClientConnectorError: connection refused")

    async def slow(request: PodRequest, *, limit: int) -> PodAnswer:
        await asyncio.sleep(1)
        return PodAnswer(200, b"too late")

    for answer, hard in ((refused, True), (slow, True)):
        prober = Prober(client=ScriptedPods(answer), url_pattern="http://fake", timeout_s=0.05)
        result = await prober.probe_one(ProbeTarget(pod_id="podabc"))
        assert (result.passed, result.hard_failure) == (False, hard)
