"""Which RunPod pods belong to a pool, and the names of the pods it creates.

Where it sits: the start of decide. One `GET /v2/pods` per loop serves every pool; each
pool keeps only the pods it owns: named with its namePrefix followed by the suffix this
module generates (lowercase letters and digits only), or listed in spec.adopt. The
strict suffix matters: pools "web" and "web-2" have prefixes "rpp-web-" and
"rpp-web-2-", and "rpp-web-2-abc" must not look like a pod of "web". Ownership goes by
prefix alone, not by who created the pod: a pod another controller made for the pool is
the pool's too (rpp/decide/ledger/second_controller.py reports that controller).

The executor applies the same test again on a fresh read of a pod right before it
deletes or updates it (the ownership safeguard), so the rule itself (`owns`,
`owns_name`) lives once in the model (rpp/model/pod_ownership.py), below both.

The loop's listing is indexed once for every pool (`IndexedPods`): scanning the whole
listing for each pool cost pools x pods checks a loop (50,000 at 50 pools of 20).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
from collections.abc import Collection, Iterable

from rpp.model.observations import PodStatus, RunPodPod
from rpp.model.pod_ownership import owns, owns_name
from rpp.model.spec import RunPodPoolSpec

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"

# The rule itself is the model's: act applies it too (rpp/model/pod_ownership.py).
__all__ = [
    "TAG_LENGTH",
    "IndexedPods",
    "new_pod_name",
    "owned_pods",
    "owns",
    "owns_name",
    "writer_tag",
]


class IndexedPods(tuple[RunPodPod, ...]):
    """One loop's RunPod listing, indexed on first use for every pool that reads it.

    Still the tuple of pods in RunPod's order. The index groups them by name stem (the
    name up to and including its last '-': a pool's namePrefix is the stem of every
    name it owns by `owns_name`, as the prefix ends with '-' and the suffix has none)
    and by id (for spec.adopt), and keeps the unreadable ones apart (a member's id holds
    those). It only narrows the candidates: the rule in `owned_pods` still decides.
    """

    @functools.cached_property
    def _by_stem(self) -> dict[str, list[tuple[int, RunPodPod]]]:
        index: dict[str, list[tuple[int, RunPodPod]]] = {}
        for at, pod in enumerate(self):
            stem = pod.name[: pod.name.rfind("-") + 1]
            index.setdefault(stem, []).append((at, pod))
        return index

    @functools.cached_property
    def _by_id(self) -> dict[str, list[tuple[int, RunPodPod]]]:
        index: dict[str, list[tuple[int, RunPodPod]]] = {}
        for at, pod in enumerate(self):
            index.setdefault(pod.id, []).append((at, pod))
        return index

    @functools.cached_property
    def _unreadable(self) -> list[tuple[int, RunPodPod]]:
        return [(at, pod) for at, pod in enumerate(self) if pod.unreadable is not None]

    def candidates(
        self, spec: RunPodPoolSpec, members: Collection[str] = ()
    ) -> list[tuple[int, RunPodPod]]:
        """Each pod named with the pool's prefix, adopted by it, or unreadable with a
        member's id, once, with its place in the listing."""
        found = dict(self._by_stem.get(spec.name_prefix, ()))
        for pod_id in spec.adopt:
            found.update(self._by_id.get(pod_id, ()))
        found.update((at, pod) for at, pod in self._unreadable if pod.id in members)
        return list(found.items())


def owned_pods(
    spec: RunPodPoolSpec, pods: Iterable[RunPodPod], *, members: Collection[str] = ()
) -> tuple[RunPodPod, ...]:
    """The pool's pods from the loop's listing, terminated ones left out, by id.

    A pod whose fields RunPod's answer did not read (`unreadable`) may have lost its
    name in that answer; it stays the pool's when its id is one of `members`, so an odd
    answer never makes a member look gone.

    Pass the loop's `IndexedPods` so its index serves every pool; any other iterable of
    pods is indexed for this call.
    """

    def mine(pod: RunPodPod) -> bool:
        return owns(spec, pod) or (pod.unreadable is not None and pod.id in members)

    listing = pods if isinstance(pods, IndexedPods) else IndexedPods(pods)
    found = [
        (p.id, at, p)
        for at, p in listing.candidates(spec, members)
        if mine(p) and p.status is not PodStatus.TERMINATED
    ]
    return tuple(p for _, _, p in sorted(found, key=lambda f: f[:2]))


def _base36(number: int) -> str:
    digits = ""
    while True:
        number, rest = divmod(number, 36)
        digits = _ALPHABET[rest] + digits
        if number == 0:
            return digits


TAG_LENGTH = 4  # 36^4: two identities share a tag about once in 1.7 million pairs


def writer_tag(writer: str | None) -> str:
    """The writer's mark in the names it creates: TAG_LENGTH base-36 characters of a hash
    of its identity, the same for one identity in every loop and every process (None,
    a process without an identity, tags as the empty identity)."""
    digest = int.from_bytes(hashlib.sha256((writer or "").encode()).digest()[:8], "big")
    return _base36(digest % 36**TAG_LENGTH).rjust(TAG_LENGTH, "0")


def new_pod_name(
    spec: RunPodPoolSpec, *, now: dt.datetime, writer: str | None, taken: Iterable[str]
) -> str:
    """A name no other create asked for: namePrefix + writer tag + second + counter.

    - the writer tag (`writer_tag`, 4 characters) comes first: two controllers acting at
      once (issue 15) have different identities, so neither asks for a name the other
      might, whatever their clocks say (unless their tags coincide: TAG_LENGTH);
    - the creation second in base 36 (6 characters until 2038-12-24, then 7);
    - a base-36 counter (1, 2, ...) only when that name is in `taken`: the owned pods,
      the create log (the last hour) and the intents, so a second attempt of one writer
      never reuses a name whose pod may exist.

    E.g. "rpp-inference-" + "1k9f" + "t85t0o" (+ "1"): namePrefix plus 10 characters, one
    or two more now and then; with the default namePrefix ("rpp-<pool>-", pool names of
    at most 50 characters) 65 at most before a counter. RunPod sets no maximum on a pod
    name (vendor/runpod/openapi-v2.json asks only for one character) and namePrefix
    has none either.

    Unique names are what make a create safe after a timeout or a 5xx: the write-ahead
    intent records the exact name and the next listing adopts the pod by it instead of
    creating another. Derived from `now` and `writer`, both given, so decide stays
    deterministic (the simulator's writer is always "simulator").
    """
    used = set(taken)
    stem = spec.name_prefix + writer_tag(writer) + _base36(int(now.timestamp()))
    name, n = stem, 0
    while name in used:
        n += 1
        name = f"{stem}{_base36(n)}"
    return name
