"""Rebuilding a lost or unreadable status from ground truth, in one quiet loop.

Where it sits: decide, at the start of a loop, right after membership. Status is the
pool's only memory, and it can be lost: a backup restored without status, a status
written by another version of the controller, a hand edit that broke it. Stopping the
pool for good (as before) left it unmanaged, with only a log line; guessing would risk
a second pod for a need the old status knew about. So the pool rebuilds:

- the members come from ground truth: the pods RunPod lists for the pool (namePrefix
  and spec.adopt), each one serving in the slot the slots ConfigMap gives it, the
  others warming (rpp/decide/ledger/membership.py adopts them all);
- the old status is kept in an annotation on the pool (rpp/controller/reconcile.py),
  and an Event (StatusRebuilt) and a history entry say why it was rebuilt;
- that loop creates, terminates and updates nothing: the next one decides from the
  rebuilt status, with every pod the pool has already in it.

An unreadable status is rebuilt (the reconciler says so); an empty one is rebuilt only
when the slots ConfigMap wires pods, which a new pool's never does.
"""

from __future__ import annotations

from collections.abc import Mapping

from rpp.decide.state.loop_state import LoopState
from rpp.model.effects import RecordEvent
from rpp.model.records import HistoryEntry
from rpp.model.status import PoolStatus


def needed(*, status: PoolStatus, unreadable: str | None, wired: Mapping[int, str]) -> str | None:
    """Why the status must be rebuilt this loop; None when it need not be."""
    if unreadable is not None:
        return unreadable
    # observedGeneration alone is still empty: what the API server reads back for a
    # status the CRD defaults (observedGeneration 0, so kstatus waits for a new pool).
    if status.replace(observed_generation=None) == PoolStatus() and wired:
        pods = ", ".join(sorted(set(wired.values())))
        return (
            f"the stored status is empty while the slots ConfigMap wires {pods} (a backup "
            "restored without status?)"
        )
    return None


def announce(loop: LoopState, why: str) -> None:
    """The Event and the history entry that say the status was rebuilt, and from what."""
    members = loop.status.current.members
    serving = sum(1 for m in members if m.slot is not None)
    text = (
        f"status rebuilt from ground truth: {why}; {len(members)} pod(s) of the pool "
        f"listed by RunPod adopted, {serving} serving in the slots nginx reads; nothing is "
        "created or terminated this loop"
    )
    loop.status.with_history(
        HistoryEntry(time=loop.now, action="rebuild", outcome="ok", detail=text)
    )
    loop.effects.append(RecordEvent(type="Warning", reason="StatusRebuilt", message=text))
    loop.note(text)
