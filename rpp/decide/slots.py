"""Pool step "rewrite the nginx slots": one WriteSlots effect when what nginx serves
should change.

Where it sits: decide, last of the pool steps. The members' slots (after every machine
and pool order of the loop) are rendered with rpp/decide/nginx_slots.py and compared with
the slots ConfigMap read during observe; only a difference produces a write, so an
unchanged pool never touches the ConfigMap and never restarts nginx.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rpp.decide.nginx_slots import SlotTarget, render_slots, slot_ports
from rpp.model.effects import WriteSlots
from rpp.model.members import MemberRecord, Phase
from rpp.model.spec import RunPodPoolSpec


def slot_targets(spec: RunPodPoolSpec, members: Sequence[MemberRecord]) -> dict[int, SlotTarget]:
    """Slot port -> pod for every member in a slot that nginx still has."""
    ports = set(slot_ports(spec))
    return {
        m.slot: SlotTarget(m.pod_id, m.datacenter)
        for m in members
        if m.slot is not None and m.slot in ports and m.phase != Phase.GONE
    }


def render_for(
    *, pool: str, spec: RunPodPoolSpec, members: Sequence[MemberRecord], proxy_url: str
) -> WriteSlots:
    targets = slot_targets(spec, members)
    data = render_slots(pool=pool, spec=spec, slots=targets, proxy_url=proxy_url)
    return WriteSlots(
        slots=tuple(sorted((port, t.pod_id) for port, t in targets.items())),
        data=tuple(sorted(data.items())),
    )


def slots_effect(
    *,
    pool: str,
    spec: RunPodPoolSpec,
    members: Sequence[MemberRecord],
    observed: Mapping[str, str] | None,
    proxy_url: str,
) -> WriteSlots | None:
    """The write that makes the ConfigMap match the members, or None when it does."""
    write = render_for(pool=pool, spec=spec, members=members, proxy_url=proxy_url)
    if observed is not None and dict(observed) == dict(write.data):
        return None
    if observed is None:
        return WriteSlots(slots=write.slots, data=write.data, create=True)
    return write
