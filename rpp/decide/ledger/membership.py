"""Membership: the pool's members against what RunPod lists and nginx serves.

Where it sits: decide, before any member machine runs. Status is the controller's
memory, but it can lag reality: a crash between a create and the status write, a
create that answered 5xx yet made a pod, a status lost or edited by hand. Every pod
the pool owns that status does not know is adopted here, never created again:

- a pod whose name matches a create the pool attempted keeps that attempt's
  replacement link (a replacement made through a 5xx is still a replacement), whether
  the create was logged or only written down before a crash (rpp/decide/ledger/intents.py);
- a pod that the slots ConfigMap already wires comes back as Ready in that slot, so a
  restarted controller with an empty status does not unwire a serving pool;
- any other owned pod (namePrefix, or spec.adopt) is adopted Warming: it serves once
  it passes its probes, like a new pod.

Members RunPod no longer lists are not dropped here: their machines count the loops
they are missing and leave (Gone) after two, unwiring their slot; a pod RunPod created
and does not list yet is waited for first (rpp/decide/capacity/unconfirmed.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rpp.decide.ledger.intents import attempts_by_name
from rpp.machines.member_step import new_member
from rpp.model.members import MemberRecord
from rpp.model.observations import RunPodPod
from rpp.model.status import PoolStatus


@dataclass(frozen=True)
class Found:
    """A pod the pool owns that status did not know, and how it came back."""

    record: MemberRecord
    how: str  # human words for history and the event


def find_new_members(
    *,
    status: PoolStatus,
    owned: Iterable[RunPodPod],
    wired: Mapping[int, str],
    now: dt.datetime,
) -> list[Found]:
    """Records for owned pods status does not know, in pod id order."""
    known = {m.pod_id for m in status.members}
    used_slots = {m.slot for m in status.members if m.slot is not None}
    attempts = attempts_by_name(status)
    found: list[Found] = []
    for pod in owned:
        if pod.id in known:
            continue
        slot = next((s for s, pid in sorted(wired.items()) if pid == pod.id), None)
        if slot in used_slots:
            slot = None  # status gave that slot to another member since: status wins
        attempt = attempts.get(pod.name)
        if attempt is not None:
            came_from, replaces = attempt
            record = new_member(pod, now=now, slot=slot, replacement_for=replaces)
            how = f"found pod {pod.name} ({pod.id}) from {came_from}"
            if replaces:
                how += f", replacing {replaces}"
        else:
            record = new_member(pod, now=now, slot=slot, adopted=True)
            how = f"adopted pod {pod.name} ({pod.id})"
        if slot is not None:
            used_slots.add(slot)
            how += f", already serving in slot {slot}"
        found.append(Found(record, how))
    return found
