"""A second controller acting on the pool: seen, named, and told (SecondController).

Where it sits: decide, first thing, in every mode. Two controllers acting on one pool at
once (leader election misconfigured, two installs pointed at one namespace, a Lease
name changed on one replica) each decide alone: both create for the same need, both
drain, and their status writes overwrite each other. The reconciler knows who it is and
what it wrote (rpp/controller/writers.py); it hands decide what it saw of another
writer as a sentence (`PoolObservation.other_controller`): a status last written by
another controller after this one wrote it, or creates in the create log this one did
not make. Decide raises SecondController with that evidence and what to do.

The other controller may write only now and then, so the condition is not cleared on
the first loop without evidence: it holds for HOLD after it was raised, then clears.
The pool keeps acting: stopping both controllers would leave nobody to replace a dead
pod, and the condition (with its Warning Event and runpod_pool_condition) is what pages.
"""

from __future__ import annotations

import datetime as dt

from rpp.decide.state.conditions import Cond, Conditions

HOLD = dt.timedelta(minutes=10)
ADVICE = (
    "two controllers acting at once make two pods for one need and overwrite each "
    "other's status: run one controller Deployment per namespace, every replica with "
    "leader election on the same Lease (runpod-pool-controller)"
)


def report(conds: Conditions, evidence: str | None, *, now: dt.datetime) -> None:
    """Raise SecondController on evidence; clear it once HOLD passed without any."""
    if evidence:
        conds.set(
            Cond.SECOND_CONTROLLER,
            true=True,
            reason="AnotherWriter",
            message=f"another controller acts on this pool: {evidence}; {ADVICE}",
        )
        return
    raised = conds.before.get(Cond.SECOND_CONTROLLER.value)
    if raised is not None and raised.status == "True" and now - raised.last_transition_time < HOLD:
        return  # the other may write only now and then: keep it raised for a while
    conds.clear(
        Cond.SECOND_CONTROLLER,
        reason="OnlyWriter",
        message=f"no other controller has written this pool for {HOLD.seconds // 60} minutes",
    )
