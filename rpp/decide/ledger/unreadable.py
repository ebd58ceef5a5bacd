"""The pool's pods that RunPod's answer did not read: held, their facts kept, reported.

Where it sits: decide, right after ownership. RunPod's listing can carry a pod with odd
fields (`gpu.count: "two"`, a status no one has seen before, a cost of "inf"); the
RunPod client keeps such a pod, marked `unreadable` with what was odd
(rpp/adapters/runpod/wire.py). A foreign one matters to no pool. One the pool owns is
judged unknown: the pool does not know what RunPod says of it, so

- its facts come from its member record where the answer lacked them (datacenter,
  GPU type, image, creation time), and its cost counts at least the record's or the
  pool's estimate, so caps and placement never read a hole as "free";
- it is held: its member machine does not run, and no pool order (a drain for a
  replacement, a scale-down, an image roll) picks it, until its fields read again;
- the UnreadablePods condition (and its Event) names it and what was odd.

The other members and the pool's creates carry on: one odd answer about one pod never
stops the pool.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from rpp.decide.state.conditions import Cond, Conditions
from rpp.model.observations import RunPodPod
from rpp.model.spec import RunPodPoolSpec
from rpp.model.status import PoolStatus

SHOWN = 3  # pods named in the condition's message


def with_known_facts(
    owned: Sequence[RunPodPod], *, status: PoolStatus, spec: RunPodPoolSpec
) -> tuple[RunPodPod, ...]:
    """The owned pods, each unreadable one completed from its member record."""
    out: list[RunPodPod] = []
    for pod in owned:
        if pod.unreadable is None:
            out.append(pod)
            continue
        record = status.member(pod.id)
        least = spec.limits.estimated_pod_cost_usd
        if record is not None and record.cost_per_hr is not None:
            least = max(least, record.cost_per_hr)
        out.append(
            dataclasses.replace(
                pod,
                cost_per_hr=max(pod.cost_per_hr, least),
                datacenter=pod.datacenter or (record.datacenter if record else None),
                gpu_type=pod.gpu_type or (record.gpu_type if record else None),
                image=pod.image or (record.image or "" if record else ""),
                created_at=pod.created_at or (record.created_at if record else None),
            )
        )
    return tuple(out)


def held(owned: Sequence[RunPodPod]) -> frozenset[str]:
    """The ids of the owned pods nothing may act on this loop."""
    return frozenset(p.id for p in owned if p.unreadable is not None)


def report(conds: Conditions, owned: Sequence[RunPodPod]) -> None:
    """Raise UnreadablePods naming the odd pods, or clear it when none is left."""
    odd = [p for p in owned if p.unreadable is not None]
    if not odd:
        conds.clear(
            Cond.UNREADABLE_PODS, reason="AllRead", message="RunPod's answer reads for every pod"
        )
        return
    named = "; ".join(f"{p.id} ({p.name or 'no name'}): {p.unreadable}" for p in odd[:SHOWN])
    more = f"; and {len(odd) - SHOWN} more" if len(odd) > SHOWN else ""
    conds.set(
        Cond.UNREADABLE_PODS,
        true=True,
        reason="OddFields",
        message=f"RunPod's answer for {len(odd)} pool pod(s) has fields that do not read: "
        f"{named}{more}. The pool keeps their records and acts on none of them until they "
        "read again; the other pods carry on",
    )
