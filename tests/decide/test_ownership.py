"""Which pods a pool owns, found through the loop's indexed listing.

The controller's loop reads one RunPod listing for every pool and indexes it once
(`IndexedPods`); each pool then looks up its own pods instead of scanning the listing.
The index must find exactly what the ownership rule (`owns`) says, for any names:
prefixes that are each other's prefix ("rpp-web-" and "rpp-web-2-"), suffixes with
dashes or capitals, adopted ids, duplicate ids, terminated pods, unreadable pods that
are members.

The names a pool creates: each carries a tag of the controller that decided (issue 15:
two controllers acting at once asked for one name), never one that may name a pod
already (listed, logged or written down), and is owned by its pool whoever made it.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from rpp.decide.ownership import (
    IndexedPods,
    new_pod_name,
    owned_pods,
    owns,
    owns_name,
    writer_tag,
)
from rpp.decide.pool import decide
from rpp.model.effects import CreatePod
from rpp.model.observations import PodStatus, PoolObservation, RunPodPod
from rpp.model.records import CreateAttempt, Intent
from rpp.model.spec import RunPodPoolSpec
from rpp.model.spec_load import load_spec
from rpp.model.status import PoolStatus

PREFIXES = ("rpp-web-", "rpp-web-2-", "rpp-w-", "other-")


def spec(prefix: str, adopt: tuple[str, ...] = ()) -> RunPodPoolSpec:
    resolved, problems = load_spec(
        "web",
        {"templateId": "t", "namePrefix": prefix, "adopt": list(adopt)},
    )
    assert problems == []
    assert resolved is not None
    return resolved


def pod(
    pod_id: str,
    name: str,
    status: PodStatus = PodStatus.RUNNING,
    unreadable: str | None = None,
) -> RunPodPod:
    return RunPodPod(
        id=pod_id,
        name=name,
        status=status,
        image="img:1",
        gpu_type=None,
        gpu_count=1,
        cloud=None,
        datacenter=None,
        cost_per_hr=0.5,
        created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        unreadable=unreadable,
    )


def scanned(
    resolved: RunPodPoolSpec, pods: tuple[RunPodPod, ...], members: frozenset[str]
) -> tuple[RunPodPod, ...]:
    """The rule applied to every pod of the listing, as before the index."""
    mine = [
        p
        for p in pods
        if (owns(resolved, p) or (p.unreadable is not None and p.id in members))
        and p.status is not PodStatus.TERMINATED
    ]
    return tuple(sorted(mine, key=lambda p: p.id))


names = st.builds(
    lambda prefix, suffix: prefix + suffix,
    st.sampled_from((*PREFIXES, "rpp-", "", "rpp-web")),
    st.text(alphabet="ab9-Z\n", max_size=6),
)
pods = st.builds(
    pod,
    st.sampled_from(["pod00001", "pod00002", "pod00003", "pod00004", "pod00005", "pod00006"]),
    names,
    st.sampled_from([PodStatus.RUNNING, PodStatus.RUNNING, PodStatus.TERMINATED]),
    st.sampled_from([None, None, "gpuCount: 'x'"]),
)
ids = st.sampled_from(["pod00001", "pod00004", "pod00009"])


@settings(max_examples=300, deadline=None)
@given(
    listing=st.lists(pods, max_size=12).map(tuple),
    prefix=st.sampled_from(PREFIXES),
    adopt=st.lists(ids, max_size=3, unique=True).map(tuple),
    members=st.frozensets(ids | st.just("pod00002")),
)
def test_the_indexed_listing_finds_exactly_the_pods_the_rule_owns(
    listing: tuple[RunPodPod, ...], prefix: str, adopt: tuple[str, ...], members: frozenset[str]
) -> None:
    resolved = spec(prefix, adopt)
    want = scanned(resolved, listing, members)
    assert owned_pods(resolved, IndexedPods(listing), members=members) == want
    assert owned_pods(resolved, listing, members=members) == want


def test_one_listing_serves_pools_whose_prefixes_nest() -> None:
    given = (
        pod("a0000000", "rpp-web-abc"),
        pod("b0000000", "rpp-web-2-abc"),
        pod("c0000000", "rpp-web-2-"),
        pod("d0000000", "rpp-web-x-1"),
        pod("e0000000", "hand-made"),
    )
    listing = IndexedPods(given)
    assert [p.id for p in owned_pods(spec("rpp-web-"), listing)] == ["a0000000"]
    assert [p.id for p in owned_pods(spec("rpp-web-2-"), listing)] == ["b0000000"]
    assert [p.id for p in owned_pods(spec("rpp-web-", adopt=("e0000000",)), listing)] == [
        "a0000000",
        "e0000000",
    ]
    assert tuple(listing) == given  # still the listing, in RunPod's order


NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def manage(prefix: str = "rpp-web-") -> RunPodPoolSpec:
    """A pool that creates: Manage, 3 pods wanted, a datacenter and a budget."""
    resolved, problems = load_spec(
        "web",
        {
            "templateId": "t",
            "dryRun": False,
            "replicas": {"min": 3},
            "namePrefix": prefix,
            "datacenters": {"allow": ["EU-RO-1"]},
            "limits": {"maxPods": 4, "maxHourlyCostUsd": 10.0, "estimatedPodCostUsd": 0.7},
        },
    )
    assert problems == []
    assert resolved is not None
    return resolved


def created_name(writer: str | None, status: PoolStatus | None = None) -> str:
    """The name of the one pod an empty pool asks for at NOW, decided by `writer`."""
    decision = decide(
        pool="web",
        generation=1,
        spec=manage(),
        status=status or PoolStatus(),
        obs=PoolObservation(pods=(), writer=writer),
        now=NOW,
    )
    (create,) = [e for e in decision.effects if isinstance(e, CreatePod)]
    return create.name


def test_two_controllers_deciding_the_same_loop_ask_for_different_pod_names() -> None:
    # Issue 15: two active controllers, one second, the same observations: one name, two
    # pods. The writer's tag in the name keeps them apart.
    assert created_name("controller-7d9f-a_1b2c3d4e") != created_name("controller-7d9f-b_9f8e7d6c")
    assert created_name("a") == created_name("a")  # the same writer decides the same name


def test_a_name_in_the_create_log_or_an_intent_is_not_asked_for_again() -> None:
    # A create of unknown outcome (logged) or one a stopped loop wrote down (an intent) may
    # have made its pod, not listed yet: the next attempt in that second takes another name.
    first = created_name("a")
    logged = PoolStatus(create_log=(CreateAttempt(time=NOW, outcome="unknown", name=first),))
    again = created_name("a", logged)
    assert again not in {first, ""}
    written = PoolStatus(intents=(Intent(action="create", time=NOW, name=first),))
    assert created_name("a", written) not in {first, ""}
    both = logged.replace(intents=(Intent(action="create", time=NOW, name=again),))
    assert created_name("a", both) not in {first, again}


@settings(max_examples=100, deadline=None)
@given(
    writers=st.lists(st.text(max_size=40), min_size=1, max_size=4, unique=True),
    second=st.integers(min_value=36**5, max_value=36**7 - 1),  # 1971 to the year 4453
    prefix=st.sampled_from(PREFIXES),
    attempts=st.integers(min_value=1, max_value=40),
)
def test_every_name_a_controller_asks_for_is_new_and_owned_by_its_pool_alone(
    writers: list[str], second: int, prefix: str, attempts: int
) -> None:
    now = dt.datetime.fromtimestamp(second, dt.UTC)
    pools = {q: spec(q) for q in PREFIXES}
    mine = pools[prefix]
    taken: list[str] = []
    for writer in writers:
        for _ in range(attempts):  # one writer's retries in one second, each written down
            name = new_pod_name(mine, now=now, writer=writer, taken=taken)
            assert name not in taken
            taken.append(name)
            assert re.fullmatch(re.escape(prefix) + r"[a-z0-9]{10,}", name)
            assert name[len(prefix) :].startswith(writer_tag(writer))
            made = pod("pod00001", name)
            # Owned by prefix, whoever made it; never by a pool whose prefix nests.
            assert [p.name for p in owned_pods(mine, IndexedPods((made,)))] == [name]
            assert [q for q, pool in pools.items() if owns_name(pool, name)] == [prefix]
    tags = {writer_tag(w) for w in writers}
    if len(tags) == len(writers):  # different tags: no name in common, even unrecorded
        for a, b in itertools.combinations(writers, 2):
            assert new_pod_name(mine, now=now, writer=a, taken=()) != new_pod_name(
                mine, now=now, writer=b, taken=()
            )
