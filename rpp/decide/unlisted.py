"""A loop whose RunPod listing could not be read: dead pods still leave nginx.

Where it sits: decide, the branch rpp/decide/pool.py takes when `obs.pods` is None
(NotActing, reason RunPodUnavailable). Without RunPod's word the pool creates,
terminates and updates nothing, and moves no member through its lifecycle: a pod this
loop could not see may well be there, and counting it missing would let it go. The
probes still ran, though (they go through RunPod's proxy, not its API), and a wired pod
whose probes fail hard is dead weight in nginx whatever the listing would say: each
request sent to it fails or waits. Unwiring it costs no pod and is safe to repeat, so
it is done here as in a listed loop:

- every member gets this loop's probe folded into its record (pass streak, probes
  failed hard), its listing facts untouched;
- a wired Ready member whose probes fail hard is quarantined (the member machine's
  `observe_unlisted`: the same guards as `observe`'s quarantine). Without RunPod's list
  the only sign that the controller's own network works is another pod passing its
  probe: with one, even the last wired pod leaves; without one, the last wired pod
  and a pool whose every Ready pod fails stay in nginx (the shared-cause case);
- the slots ConfigMap is written when that changed it; nothing at all is done when
  the ConfigMap could not be read or serves what the members do not say (a status
  being rebuilt): nothing is ever written over nginx's slots on a guess.

A quarantined pod goes back into nginx only in a listed loop (`release` needs a slot
the pool offers, and the pool offers slots only when it acts).
"""

from __future__ import annotations

from rpp.decide.health.pool_wide import MIN_PODS_FOR_POOL_WIDE
from rpp.decide.nginx_slots import SlotsFormatError, slots_effect, wired_pods
from rpp.decide.state.loop_state import LoopState
from rpp.machines import member_step
from rpp.machines.signals import MemberSignals, fails_hard, refresh
from rpp.model.effects import RecordEvent
from rpp.model.members import MemberRecord, Phase
from rpp.model.spec import Mode


def step(loop: LoopState) -> list[str]:
    """Fold in the probes, quarantine the wired pods that fail hard, write the slots.

    Returns the wired pods kept in nginx although their probes fail hard, because
    nothing this loop shows the controller's own network works (NotActing says so)."""
    status = loop.status.current
    members = sorted(status.members, key=lambda m: (m.since, m.pod_id))
    if _serving(loop) != {m.slot: m.pod_id for m in members if m.slot is not None}:
        # nginx serves what the status does not say (or its ConfigMap did not read): the
        # status needs a listed loop to be rebuilt, and no write goes over nginx's slots.
        return []
    probes = loop.obs.probes
    ready = [m for m in members if m.phase == Phase.READY]
    # Degraded, as far as this loop can tell: its probe failed (no Prometheus rule is
    # judged without the pool acting). Every Ready pod at once is the shared-cause case.
    failing = [m for m in ready if (p := probes.get(m.pod_id)) is not None and not p.passed]
    pool_wide = len(ready) >= MIN_PODS_FOR_POOL_WIDE and len(failing) == len(ready)
    manage = loop.spec.mode is Mode.MANAGE
    wired = sum(1 for m in members if m.slot is not None)
    passed = {pod for pod, p in probes.items() if p.passed}
    planned: list[MemberRecord] = []
    real: list[MemberRecord] = []
    blind: list[str] = []
    for m in members:
        signals = MemberSignals(
            settings=loop.settings,
            pod=None,
            probe=probes.get(m.pod_id),
            pool_wide=pool_wide,
            # Recounted after each member: two failing pods never empty nginx in one loop.
            last_wired=wired - (m.slot is not None) <= 0,
            network_ok=bool(passed - {m.pod_id}),
        )
        moved = member_step.observe_unlisted(m, signals=signals, now=loop.now)
        if m.slot is not None and moved.record.slot is None:
            wired -= 1
        elif moved.record.slot is not None and fails_hard(moved.record, loop.settings):
            blind.append(m.pod_id)
        planned.append(moved.record)
        acts = [e for e in moved.effects if not isinstance(e, RecordEvent)]
        real.append(refresh(m, signals, loop.now, listing=False) if acts else moved.record)
        loop.effects += moved.effects
        if moved.moves and (manage or not acts):
            loop.transition(m, moved)
    write, loop.slots = slots_effect(
        pool=loop.pool,
        spec=loop.spec,
        members=planned,
        observed=loop.obs.slots,
        proxy_url=loop.proxy_url,
        last=loop.slots,
    )
    if write is not None:
        loop.effects.append(write)
    kept = planned if manage else real
    loop.status.adopt(status.replace(members=tuple(kept)))
    return blind


def _serving(loop: LoopState) -> dict[int, str] | None:
    """What nginx serves (slot -> pod; a missing ConfigMap serves nothing), or None when
    the slots ConfigMap could not be read."""
    if loop.obs.slots_error:
        return None
    try:
        return wired_pods(loop.obs.slots)
    except SlotsFormatError:
        return None
