"""A second controller acting on a pool is seen and named (SecondController), and a
take-over by the standby is not mistaken for one.

Two whole controllers (tests/controller/test_controller_replicas.py's `Replica`) run against one
in-memory Kubernetes API and one fake RunPod, on virtual time. Misconfigured leader
election is played by giving each replica a Lease of its own: both lead, both act on the
pool. The pool must then say so: SecondController, naming the other writer, with a
Warning Event and the condition gauge, for as long as the other acts and a while after;
and no two of the pods they create share a name. With one Lease shared, the standby
that takes over from a leader that stepped down must raise nothing.
rpp/controller/writers.py's evidence is checked on its own too.
"""

from __future__ import annotations

import asyncio
import datetime as dt

from rpp.adapters.kube.api import KubeSettings
from rpp.controller.writers import Writers
from rpp.decide.ledger.second_controller import HOLD
from rpp.decide.ownership import TAG_LENGTH, writer_tag
from rpp.model.records import CreateAttempt
from rpp.model.status import PoolStatus
from rpp.sim.kube_memory import MemoryKubeApi
from rpp.sim.virtual_time import VirtualClock, run_virtual
from tests.controller.test_controller_replicas import Replica
from tests.controller_kit import Partitionable, manifest, raised, status, world

COND = "SecondController"
T0 = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def test_two_controllers_on_their_own_leases_are_seen_named_and_told() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"))
        # Each replica elects on a Lease nobody else sees: both lead.
        a = Replica(w, "a", clock=clock, lease_view=MemoryKubeApi(KubeSettings("x"), clock=clock))
        b = Replica(w, "b", clock=clock, lease_view=MemoryKubeApi(KubeSettings("y"), clock=clock))
        await asyncio.sleep(300)

        assert a.acted
        assert b.acted
        message = raised(status(w), COND)
        assert message is not None
        assert "written by a after this controller (b)" in message or (
            "written by b after this controller (a)" in message
        )
        assert "one controller Deployment per namespace" in message
        assert any(e["reason"] == COND and e["type"] == "Warning" for e in w.kube.events)
        gauges = [
            r.parts.registry.get_sample_value(
                "runpod_pool_condition",
                {"pool_namespace": "runpod", "pool": "inference", "type": COND},
            )
            for r in (a, b)
        ]
        assert 1 in gauges

        # The other controller stops: the condition holds a while, then clears.
        await b.kill()
        await asyncio.sleep(HOLD.total_seconds() + 120)
        cleared = status(w).condition(COND)
        assert cleared is not None
        assert cleared.status == "False"
        await a.kill()
        await w.close()

    run_virtual(body)


def test_two_controllers_acting_at_once_never_make_two_pods_with_one_name() -> None:
    # Issue 15: two controllers acting at once made two pods with one name. Each names its
    # creates with a tag of its own identity now, handed from the reconciler to decide.
    # (Sharing one status, their write-ahead conflicts and each other's intents kept the
    # names apart here already; tests/decide/test_ownership.py has the same-second decision.)
    async def body(clock: VirtualClock) -> None:
        roomy = {"maxPods": 8, "maxHourlyCostUsd": 20.0, "maxCreatesPerHour": 20}
        w = world(clock, manifest("inference", replicas={"min": 3, "max": 3}, limits=roomy))
        a = Replica(w, "a", clock=clock, lease_view=MemoryKubeApi(KubeSettings("x"), clock=clock))
        await asyncio.sleep(15)  # B's loops fall between A's: each sees the pool wanting pods
        b = Replica(w, "b", clock=clock, lease_view=MemoryKubeApi(KubeSettings("y"), clock=clock))
        await asyncio.sleep(600)

        names = [name for _, name in w.created]
        assert len(set(names)) == len(names)
        makers = {name.removeprefix("rpp-inference-")[:TAG_LENGTH] for name in names}
        assert makers == {writer_tag("a"), writer_tag("b")}  # both created, each its own names
        assert raised(status(w), COND) is not None
        await a.kill()
        await b.kill()
        await w.close()

    run_virtual(body)


def test_the_standby_taking_over_one_lease_is_not_a_second_controller() -> None:
    async def body(clock: VirtualClock) -> None:
        w = world(clock, manifest("inference"))
        view = Partitionable(w.kube)
        a = Replica(w, "a", clock=clock, lease_view=view)
        await asyncio.sleep(0.5)
        b = Replica(w, "b", clock=clock, lease_view=w.kube)
        await asyncio.sleep(120)
        view.cut = "hang"  # A cannot renew: it steps down, and B takes over the Lease
        await asyncio.sleep(300)

        assert a.acted
        assert b.reconciled
        assert status(w).writer == "b"
        seen = [s for r in (a, b) for s in r.statuses if raised(s, COND)]
        assert seen == []
        assert not any(e["reason"] == COND for e in w.kube.events)
        await a.kill()
        await b.kill()
        await w.close()

    run_virtual(body)


def attempt(minute: int, name: str) -> CreateAttempt:
    return CreateAttempt(time=T0 + dt.timedelta(minutes=minute), outcome="created", name=name)


def test_creates_this_controller_did_not_make_are_evidence_once_and_its_own_never() -> None:
    mine = Writers("a")
    first = PoolStatus(create_log=(attempt(0, "rpp-p-old"),), writer="z")
    assert mine.evidence("p", first) is None  # what was there before this term: no evidence
    wrote = mine.mark(first.replace(create_log=(*first.create_log, attempt(1, "rpp-p-mine"))))
    assert wrote.writer == "a"
    mine.wrote("p", wrote)
    assert mine.evidence("p", wrote) is None

    other = wrote.replace(create_log=(*wrote.create_log, attempt(2, "rpp-p-theirs")), writer="b")
    said = mine.evidence("p", other)
    assert said is not None
    assert "written by b after this controller (a)" in said
    assert "rpp-p-theirs" in said
    assert "rpp-p-mine" not in said
    # Reported once: the same create read again is known now.
    again = mine.evidence("p", other.replace(writer="a"))
    assert again is None

    mine.start_term()  # leading again: the last leader's writes are no evidence
    assert mine.evidence("p", other) is None


def test_creates_of_a_write_whose_answer_was_lost_are_still_this_controllers_own() -> None:
    mine = Writers("a")
    assert mine.evidence("p", PoolStatus(writer="a")) is None
    sent = mine.mark(PoolStatus(create_log=(attempt(1, "rpp-p-mine"),)))
    mine.writing("p", sent)  # the API server stored it, but the answer timed out
    assert mine.evidence("p", sent) is None
