"""Which RunPod pods belong to a pool, and the names of the pods it creates.

Where it sits: the start of decide. One `GET /v2/pods` per loop serves every pool; each
pool keeps only the pods it owns: named with its namePrefix followed by the suffix this
module generates (lowercase letters and digits only), or listed in spec.adopt. The
strict suffix matters: pools "web" and "web-2" have prefixes "rpp-web-" and
"rpp-web-2-", and "rpp-web-2-abc" must not look like a pod of "web".

The executor applies the same test again on a fresh read of a pod right before it
deletes or updates it (the ownership safeguard), so the rule lives here once.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Collection, Iterable

from rpp.model.observations import PodStatus, RunPodPod
from rpp.model.spec import RunPodPoolSpec

_SUFFIX = re.compile(r"^[a-z0-9]+$")
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def owns_name(spec: RunPodPoolSpec, name: str) -> bool:
    """A pod name the pool created: namePrefix plus a letters-and-digits suffix."""
    if not name.startswith(spec.name_prefix):
        return False
    return bool(_SUFFIX.match(name[len(spec.name_prefix) :]))


def owns(spec: RunPodPoolSpec, pod: RunPodPod) -> bool:
    """The pool may touch this pod: its name is the pool's, or spec.adopt lists its id."""
    return pod.id in spec.adopt or owns_name(spec, pod.name)


def owned_pods(
    spec: RunPodPoolSpec, pods: Iterable[RunPodPod], *, members: Collection[str] = ()
) -> tuple[RunPodPod, ...]:
    """The pool's pods from the loop's listing, terminated ones left out, by id.

    A pod whose fields RunPod's answer did not read (`unreadable`) may have lost its
    name in that answer; it stays the pool's when its id is one of `members`, so an odd
    answer never makes a member look gone.
    """

    def mine(pod: RunPodPod) -> bool:
        return owns(spec, pod) or (pod.unreadable is not None and pod.id in members)

    return tuple(
        sorted(
            (p for p in pods if mine(p) and p.status is not PodStatus.TERMINATED),
            key=lambda p: p.id,
        )
    )


def _base36(number: int) -> str:
    digits = ""
    while True:
        number, rest = divmod(number, 36)
        digits = _ALPHABET[rest] + digits
        if number == 0:
            return digits


def new_pod_name(spec: RunPodPoolSpec, *, now: dt.datetime, taken: Iterable[str]) -> str:
    """A unique name for the next pod: prefix + creation second in base 36 (+ a counter).

    Unique names are what make a create safe after a timeout or a 5xx: the next listing
    finds the pod by its name and adopts it instead of creating another. Derived from
    `now`, so decide stays deterministic.
    """
    used = set(taken)
    stem = spec.name_prefix + _base36(int(now.timestamp()))
    name, n = stem, 0
    while name in used:
        n += 1
        name = f"{stem}{_base36(n)}"
    return name
