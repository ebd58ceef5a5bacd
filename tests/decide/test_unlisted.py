"""A loop without RunPod's pod list (rpp/decide/unlisted.py), through decide.

Nothing is created, terminated or updated and no member moves through its lifecycle,
but the probes still ran: a wired pod whose probes fail hard leaves nginx when another
pod passing shows the controller's own network works; without such a sign the last
wired pod stays (NotActing says so). Nothing is written over nginx's slots when they
serve what the status does not say.
"""

from __future__ import annotations

from rpp.decide.nginx_slots import SlotTarget, render_slots, wired_pods
from rpp.decide.pool import Decision, decide
from rpp.decide.state.conditions import Cond
from rpp.model.effects import CreatePod, TerminatePod, Unwire, UpdatePod, WriteSlots
from rpp.model.members import MemberRecord, Phase
from rpp.model.observations import PoolObservation, ProbeResult, SecretState
from rpp.model.status import PoolStatus
from tests.decide.builders import NOW, POOL, member, pool_spec, pool_status, wired

PASSED = ProbeResult(
    passed=True, health_ok=True, metrics_ok=True, health_latency_s=0.1, metrics_latency_s=0.1
)
DEAD = ProbeResult(
    passed=False,
    health_ok=False,
    metrics_ok=False,
    health_latency_s=None,
    metrics_latency_s=None,
    error="connect timeout",
    hard_failures=2,
)


def slots_of(*members: MemberRecord) -> dict[str, str]:
    """The slots ConfigMap as the last listed loop wrote it for `members`."""
    spec = pool_spec()
    targets = {m.slot: SlotTarget(m.pod_id) for m in members if m.slot is not None}
    return render_slots(pool=POOL, spec=spec, slots=targets)


def unlisted(
    status: PoolStatus, probes: dict[str, ProbeResult], slots: dict[str, str]
) -> Decision:
    obs = PoolObservation(
        pods=None,
        runpod_error="GET /pods: 502",
        probes=probes,
        slots=slots,
        secret=SecretState(configured=True),
    )
    return decide(pool=POOL, generation=1, spec=pool_spec(), status=status, obs=obs, now=NOW)


def acts_on_runpod(decision: Decision) -> bool:
    return any(isinstance(e, CreatePod | TerminatePod | UpdatePod) for e in decision.effects)


def test_a_dead_wired_pod_leaves_nginx_when_another_pod_passes_its_probe() -> None:
    a, b = wired("a", 8081), wired("b", 8082)
    decision = unlisted(pool_status(a, b), {"a": DEAD, "b": PASSED}, slots_of(a, b))

    dead = decision.status.member("a")
    assert dead is not None
    assert dead.slot is None
    assert dead.quarantine is not None
    assert dead.phase == Phase.READY  # quarantined, not moved through its lifecycle
    assert [e.pod_id for e in decision.effects if isinstance(e, Unwire)] == ["a"]
    (write,) = [e for e in decision.effects if isinstance(e, WriteSlots)]
    assert write.slots == ((8082, "b"),)
    assert not acts_on_runpod(decision)
    not_acting = decision.status.condition(Cond.NOT_ACTING)
    assert not_acting is not None
    assert (not_acting.status, not_acting.reason) == ("True", "RunPodUnavailable")


def test_the_last_wired_pod_stays_in_nginx_when_nothing_shows_the_network_works() -> None:
    a = wired("a", 8081)
    decision = unlisted(pool_status(a), {"a": DEAD}, slots_of(a))

    kept = decision.status.member("a")
    assert kept is not None
    assert kept.slot == 8081
    assert not any(isinstance(e, Unwire | WriteSlots) for e in decision.effects)
    not_acting = decision.status.condition(Cond.NOT_ACTING)
    assert not_acting is not None
    assert "keeps a in nginx although its probes fail hard" in not_acting.message


def test_probes_are_folded_in_and_the_listing_facts_left_as_they_were() -> None:
    a = wired("a", 8081, pass_streak=4, missing_loops=1, cost_per_hr=0.69)
    decision = unlisted(pool_status(a), {"a": PASSED}, slots_of(a))
    after = decision.status.member("a")
    assert after is not None
    assert after.pass_streak == 5
    assert after.last_probe is not None
    assert after.last_probe.at == NOW
    assert (after.missing_loops, after.cost_per_hr) == (1, 0.69)


def test_a_warming_pod_does_not_move_while_the_list_is_unread() -> None:
    w = member("w", Phase.WARMING, pass_streak=2)
    a = wired("a", 8081)
    decision = unlisted(pool_status(a, w), {"a": PASSED, "w": PASSED}, slots_of(a))
    after = decision.status.member("w")
    assert after is not None
    assert (after.phase, after.slot) == (Phase.WARMING, None)
    assert not decision.transitions


def test_nothing_is_written_over_slots_that_serve_what_the_status_does_not_say() -> None:
    a, b = wired("a", 8081), wired("b", 8082)
    other = wired("z", 8083)  # nginx serves a pod the status does not know
    decision = unlisted(pool_status(a, b), {"a": DEAD, "b": PASSED}, slots_of(a, b, other))
    assert wired_pods(slots_of(a, b, other)) == {8081: "a", 8082: "b", 8083: "z"}
    kept = decision.status.member("a")
    assert kept is not None
    assert kept.slot == 8081
    assert kept.last_probe is None  # not even the probes are folded in
    assert not any(isinstance(e, Unwire | WriteSlots) for e in decision.effects)
