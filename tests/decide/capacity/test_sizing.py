"""The `create` and `shrink` steps' choices (rpp/decide/capacity/sizing.py): which members
count toward the size, the one create a loop asks for (a replacement before the size,
nothing while serving meets desired), the CreatePod that passes every safeguard, and
the one member a pool above its size lets go (flagged pods first, then warming, then
the costliest and newest)."""

from __future__ import annotations

import datetime as dt

import pytest

from rpp.decide.capacity.sizing import (
    CreateWish,
    plan_create,
    scale_down_victim,
    serving_count,
    wanted_create,
)
from rpp.model.members import DrainReason, Phase
from rpp.model.records import Backoff, Intent
from tests.decide.builders import (
    DATACENTERS,
    GPU,
    HOUR,
    NOW,
    POOL,
    PREFIX,
    flagged,
    member,
    pod,
    pool_spec,
    pool_status,
    wired,
)

# --- serving_count ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "drain_reason", "counts"),
    [
        (Phase.WARMING, None, True),
        (Phase.READY, None, True),
        (Phase.UPDATING, None, True),
        (Phase.DRAINING, DrainReason.UPDATE, True),
        (Phase.DRAINING, DrainReason.SCALE_DOWN, False),
        (Phase.DRAINING, DrainReason.REPLACE, False),
        (Phase.FLAGGED, None, False),
        (Phase.TERMINATING, None, False),
        (Phase.GONE, None, False),
    ],
)
def test_members_that_serve_now_or_will_without_the_pool_acting_count_toward_the_size(
    phase: Phase, drain_reason: DrainReason | None, counts: bool
) -> None:
    one = member("a", phase, drain_reason=drain_reason)
    assert serving_count([one]) == (1 if counts else 0)


def test_a_dead_or_hung_member_never_counts_as_serving() -> None:
    members = [wired("a", 8081), wired("b", 8082), member("c", Phase.WARMING)]
    assert serving_count(members) == 3
    assert serving_count(members, down={"b", "c"}) == 1


# --- wanted_create ----------------------------------------------------------------------


def test_nothing_is_created_while_serving_meets_desired_even_with_a_flagged_member() -> None:
    members = [wired("a", 8081), wired("b", 8082), flagged("f", slot=8083)]
    assert wanted_create(members=members, desired=2, pool_wide=False) is None


def test_a_flagged_member_is_replaced_before_the_pool_grows_to_its_size() -> None:
    members = [wired("a", 8081), flagged("f", slot=8082, flagged_rule="ErrorRate")]
    wish = wanted_create(members=members, desired=3, pool_wide=False)
    assert wish == CreateWish("replace f (ErrorRate)", replacement_for="f")


def test_a_flag_without_a_rule_name_is_replaced_for_a_health_rule() -> None:
    members = [wired("a", 8081), flagged("f", flagged_rule=None)]
    wish = wanted_create(members=members, desired=2, pool_wide=False)
    assert wish is not None
    assert wish.reason == "replace f (a health rule)"


def test_while_pool_wide_degradation_holds_the_pool_only_grows_to_its_size() -> None:
    members = [wired("a", 8081), flagged("f", slot=8082)]
    wish = wanted_create(members=members, desired=3, pool_wide=True)
    assert wish == CreateWish("1 of 3 wanted pods", replacement_for=None)


def test_a_create_written_down_and_not_settled_counts_as_serving() -> None:
    members = [wired("a", 8081)]
    assert wanted_create(members=members, desired=2, pool_wide=False, coming=1) is None
    wish = wanted_create(members=members, desired=3, pool_wide=False, coming=1)
    assert wish == CreateWish("2 of 3 wanted pods")


def test_a_flagged_member_whose_replacement_is_written_down_is_not_replaced_twice() -> None:
    members = [wired("a", 8081), flagged("f", slot=8082)]
    wish = wanted_create(
        members=members, desired=3, pool_wide=False, covered=frozenset({"f"}), coming=1
    )
    assert wish == CreateWish("2 of 3 wanted pods")


# --- plan_create --------------------------------------------------------------------------

GROW = CreateWish("1 of 2 wanted pods")


def test_a_create_that_passes_every_safeguard_is_placed_and_priced_under_the_cap() -> None:
    spec = pool_spec()
    owned = [pod("a", datacenter=DATACENTERS[0], cost_per_hr=0.69)]
    wish = CreateWish("replace f (Unreachable)", replacement_for="f")
    plan = plan_create(
        pool=POOL,
        spec=spec,
        status=pool_status(catalog_prices={GPU: 0.69}),
        wish=wish,
        owned=owned,
        now=NOW,
        writer="controller-a",
    )
    assert plan.block is None
    assert plan.effect is not None
    effect = plan.effect
    assert effect.pool == POOL
    assert effect.name.startswith(PREFIX)
    assert (effect.reason, effect.replacement_for) == (wish.reason, "f")
    assert effect.gpu_types == (GPU,)
    # EU-RO-1 holds a pool pod already (maxPerDatacenter 1): the others, in allow order.
    assert effect.datacenters == DATACENTERS[1:]
    assert [dc for dc, _ in effect.skipped] == [DATACENTERS[0]]
    assert effect.max_price_per_hr == pytest.approx(10.0 - 0.69)
    assert effect.catalog_prices == ((GPU, 0.69),)
    assert effect.image is None  # the spec's image: nothing to override


def test_a_create_runs_the_image_it_is_given_only_when_it_is_not_the_specs() -> None:
    spec = pool_spec(image="img:2")

    def image_of(image: str | None) -> str | None:
        plan = plan_create(
            pool=POOL,
            spec=spec,
            status=pool_status(),
            wish=GROW,
            owned=[],
            now=NOW,
            writer=None,
            image=image,
        )
        assert plan.effect is not None
        return plan.effect.image

    assert image_of("img:1") == "img:1"  # the release keeps img:2 off until its canary passed
    assert image_of("img:2") is None


def test_a_blocked_create_carries_the_safeguards_reason_and_no_effect() -> None:
    status = pool_status(backoff=Backoff(create_until=NOW + HOUR))
    plan = plan_create(
        pool=POOL, spec=pool_spec(), status=status, wish=GROW, owned=[], now=NOW, writer=None
    )
    assert plan.effect is None
    assert plan.block is not None
    assert plan.block.reason == "CreateBackoff"


def test_a_pod_runpod_created_and_does_not_list_yet_holds_every_other_create() -> None:
    waiting = member("w", Phase.WARMING, unconfirmed_since=NOW - dt.timedelta(seconds=30))
    plan = plan_create(
        pool=POOL,
        spec=pool_spec(),
        status=pool_status(waiting),
        wish=GROW,
        owned=[],
        now=NOW,
        writer=None,
    )
    assert plan.block is not None
    assert plan.block.reason == "CreateUnconfirmed"
    assert f"{PREFIX}w (w)" in plan.block.message


def test_creates_written_down_and_not_settled_count_as_pods_for_max_pods() -> None:
    spec = pool_spec(limits={"maxPods": 2})
    intent = Intent(action="create", time=NOW, name=f"{PREFIX}new")
    plan = plan_create(
        pool=POOL,
        spec=spec,
        status=pool_status(intents=(intent,)),
        wish=GROW,
        owned=[pod("a")],
        now=NOW,
        writer=None,
    )
    assert plan.block is not None
    assert plan.block.reason == "MaxPodsReached"
    assert "the pool has 2 pod(s)" in plan.block.message


def test_creates_written_down_count_at_the_dearest_candidates_price_for_the_cost_cap() -> None:
    spec = pool_spec(limits={"maxPods": 8})

    def block_with(pending: int) -> str | None:
        intents = tuple(
            Intent(action="create", time=NOW, name=f"{PREFIX}n{i}") for i in range(pending)
        )
        plan = plan_create(
            pool=POOL,
            spec=spec,
            status=pool_status(intents=intents, catalog_prices={GPU: 4.0}),
            wish=GROW,
            owned=[pod("a", cost_per_hr=0.69)],
            now=NOW,
            writer=None,
        )
        return plan.block.reason if plan.block else None

    assert block_with(1) is None  # 0.69 + 4.00 + 4.00 fits under $10/h
    # 0.69 + 2 x 4.00 leaves $1.31/h, less than one more pod: the cap, before the rate.
    assert block_with(2) == "CostCapReached"


def test_a_create_with_no_datacenter_left_is_blocked_with_placements_words() -> None:
    spec = pool_spec(datacenters={"allow": ["EU-RO-1"]})
    plan = plan_create(
        pool=POOL,
        spec=spec,
        status=pool_status(),
        wish=GROW,
        owned=[pod("a", datacenter="EU-RO-1")],
        now=NOW,
        writer=None,
    )
    assert plan.effect is None
    assert plan.block is not None
    assert plan.block.reason == "NoDatacenter"
    assert "EU-RO-1" in plan.block.message
    assert "maxPerDatacenter 1 reached" in plan.block.message


def test_a_create_never_asks_for_a_name_an_intent_holds() -> None:
    def name(status_intents: tuple[Intent, ...]) -> str:
        plan = plan_create(
            pool=POOL,
            spec=pool_spec(),
            status=pool_status(intents=status_intents),
            wish=GROW,
            owned=[],
            now=NOW,
            writer="a",
        )
        assert plan.effect is not None
        return plan.effect.name

    first = name(())
    assert name((Intent(action="terminate", time=NOW, name=first, pod="x"),)) != first


# --- scale_down_victim --------------------------------------------------------------------


def test_nothing_shrinks_while_a_scale_down_is_under_way() -> None:
    leaving = member("d", Phase.DRAINING, drain_reason=DrainReason.SCALE_DOWN)
    members = [wired("a", 8081), wired("b", 8082), wired("c", 8083), leaving]
    assert scale_down_victim(members, desired=1) is None
    terminating = leaving.replace(phase=Phase.TERMINATING)
    assert scale_down_victim([*members[:3], terminating], desired=1) is None
    assert scale_down_victim(members[:3], desired=1) is not None


def test_nothing_shrinks_while_serving_does_not_pass_desired() -> None:
    members = [wired("a", 8081), wired("b", 8082), member("w", Phase.WARMING)]
    assert scale_down_victim(members, desired=3) is None


def test_a_flagged_pod_out_of_nginx_goes_once_the_others_meet_desired() -> None:
    out = flagged("f")
    assert scale_down_victim([wired("a", 8081), wired("b", 8082), out], desired=2) == out
    assert scale_down_victim([wired("a", 8081), out], desired=2) is None


def test_a_flagged_pod_being_replaced_goes_only_once_the_others_pass_desired() -> None:
    out = flagged("f")
    replacement = member("w", Phase.WARMING, replacement_for="f")
    # a and w meet desired: f leaves through surge-first, not as a scale-down.
    assert scale_down_victim([wired("a", 8081), replacement, out], desired=2) is None
    members = [wired("a", 8081), wired("b", 8082), replacement, out]
    assert scale_down_victim(members, desired=2) == out


def test_a_flagged_pod_that_still_serves_goes_only_while_nginx_keeps_desired_without_it() -> None:
    serving = flagged("f", slot=8083)
    assert scale_down_victim([wired("a", 8081), wired("b", 8082), serving], desired=2) == serving
    # b not wired yet: without f nginx would hold one pod of the two wanted.
    warming = member("b", Phase.WARMING)
    assert scale_down_victim([wired("a", 8081), warming, serving], desired=2) is None


def test_flagged_pods_out_of_nginx_go_before_flagged_ones_still_serving() -> None:
    older_serving = flagged("f1", slot=8083, since=NOW - 2 * HOUR)
    out = flagged("f2", since=NOW - HOUR)
    members = [wired("a", 8081), wired("b", 8082), older_serving, out]
    assert scale_down_victim(members, desired=2) == out


def test_a_warming_pod_goes_before_a_wired_one() -> None:
    warming = member("w", Phase.WARMING, cost_per_hr=0.1)
    members = [wired("a", 8081, cost_per_hr=2.0), wired("b", 8082), warming]
    assert scale_down_victim(members, desired=2) == warming


def test_a_warming_replacement_is_kept_while_the_pod_it_replaces_is_still_flagged() -> None:
    # f still serves and nginx could not keep 2 without it, so f stays; its replacement
    # w is the newest and dearest warming pod, yet the other warming pod x goes.
    members = [
        wired("a", 8081),
        member("b", Phase.READY),  # quarantined: Ready, out of nginx
        flagged("f", slot=8082),
        member("w", Phase.WARMING, replacement_for="f", cost_per_hr=3.0, since=NOW),
        member("x", Phase.WARMING, cost_per_hr=0.5),
    ]
    assert scale_down_victim(members, desired=2) == members[4]


def test_among_ready_pods_the_costliest_goes_then_the_newest() -> None:
    cheap_old = wired("a", 8081, cost_per_hr=0.5, created_at=NOW - 3 * HOUR)
    dear = wired("b", 8082, cost_per_hr=0.9, created_at=NOW - 3 * HOUR)
    cheap_new = wired("c", 8083, cost_per_hr=0.5, created_at=NOW - HOUR)
    assert scale_down_victim([cheap_old, dear, cheap_new], desired=2) == dear
    assert scale_down_victim([cheap_old, cheap_new], desired=1) == cheap_new


def test_a_dead_ready_pod_goes_first_among_ready_pods() -> None:
    dead = wired("a", 8081, cost_per_hr=0.1, created_at=NOW - 5 * HOUR)
    members = [dead, wired("b", 8082), wired("c", 8083), wired("d", 8084, cost_per_hr=2.0)]
    assert scale_down_victim(members, desired=2, down={"a"}) == dead
    assert scale_down_victim(members, desired=2) == members[3]
