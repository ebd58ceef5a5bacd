"""Which pods a pool owns, found through the loop's indexed listing.

The controller's loop reads one RunPod listing for every pool and indexes it once
(`PodListing`); each pool then looks up its own pods instead of scanning the listing.
The index must find exactly what the ownership rule (`owns`) says, for any names:
prefixes that are each other's prefix ("rpp-web-" and "rpp-web-2-"), suffixes with
dashes or capitals, adopted ids, duplicate ids, terminated pods, unreadable pods that
are members.
"""

from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from rpp.decide.ownership import PodListing, owned_pods, owns
from rpp.model.observations import PodStatus, RunPodPod
from rpp.model.spec import RunPodPoolSpec
from rpp.model.spec_load import load_spec

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
    assert owned_pods(resolved, PodListing(listing), members=members) == want
    assert owned_pods(resolved, listing, members=members) == want


def test_one_listing_serves_pools_whose_prefixes_nest() -> None:
    given = (
        pod("a0000000", "rpp-web-abc"),
        pod("b0000000", "rpp-web-2-abc"),
        pod("c0000000", "rpp-web-2-"),
        pod("d0000000", "rpp-web-x-1"),
        pod("e0000000", "hand-made"),
    )
    listing = PodListing(given)
    assert [p.id for p in owned_pods(spec("rpp-web-"), listing)] == ["a0000000"]
    assert [p.id for p in owned_pods(spec("rpp-web-2-"), listing)] == ["b0000000"]
    assert [p.id for p in owned_pods(spec("rpp-web-", adopt=("e0000000",)), listing)] == [
        "a0000000",
        "e0000000",
    ]
    assert tuple(listing) == given  # still the listing, in RunPod's order
