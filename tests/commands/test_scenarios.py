"""Every example scenario tells the story its description promises, read from its JSON events.

Each test runs one file of examples/scenarios/ through the simulator (the real controller
on virtual time), parses the `--json` output line by line and checks the story from the
structured events: the fake cloud's ground truth (`cloud`), what the controller did
(`transition`, `action`), what it said (`condition`) and the state after every reconcile
(`loop`). No log text is read.
"""

from __future__ import annotations

import datetime as dt
import io
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rpp.commands.simulate import default_scenario
from rpp.sim.run import run_scenario
from rpp.sim.scenario import load_scenario
from tests.crd_admission import status_problems

SCENARIOS = Path(__file__).parents[2] / "examples" / "scenarios"
DEFAULT = "(default)"  # the embedded default scenario, as `rpp simulate` runs it
EVERY_SCENARIO = [DEFAULT, *sorted(p.stem for p in SCENARIOS.glob("*.yaml"))]
Record = dict[str, Any]


class Story:
    """The JSON events of one run, with the questions the tests ask of them."""

    def __init__(self, name: str) -> None:
        out = io.StringIO()
        scenario = (
            default_scenario() if name == DEFAULT else load_scenario(SCENARIOS / f"{name}.yaml")
        )
        run = run_scenario(scenario, out=out, as_json=True, check_invariants=True)
        self.start = run.timeline.start
        self.records: list[Record] = [json.loads(line) for line in out.getvalue().splitlines()]

    def of(self, event: str, **match: Any) -> list[Record]:
        return [
            r
            for r in self.records
            if r["event"] == event and all(r.get(k) == v for k, v in match.items())
        ]

    def first(self, event: str, **match: Any) -> Record:
        found = self.of(event, **match)
        assert found, f"no {event} event with {match}"
        return found[0]

    def pod(self, number: int) -> str:
        """The Nth pool pod by creation, as the scenario's `pod: N` counts."""
        created = [r["pod"] for r in self.of("cloud", kind="created")]
        return str(created[number - 1])

    def transition(self, pod: str, source: str, *, to: str) -> Record:
        return self.first("transition", pod=pod, **{"from": source, "to": to})

    def loops(self, since: float = 0.0, *, until: float = float("inf")) -> list[Record]:
        return [r for r in self.of("loop") if since <= r["t"] <= until]

    @property
    def end(self) -> Record:
        assert self.records[-1]["event"] == "end"
        return self.records[-1]

    def final_members(self) -> dict[str, dict[str, Any]]:
        """The members of the final status; none when the pool was deleted."""
        status = self.end["status"] or {}
        return {m["podId"]: m for m in status.get("members", [])}


def replaced_surge_first(s: Story, victim: str, *, rule: str, broke_at: float) -> str:
    """The common shape of a replacement; returns the replacement's pod id."""
    flagged = s.transition(victim, "Ready", to="Flagged")
    assert rule in flagged["reason"]
    assert flagged["t"] >= broke_at
    (replacement,) = [r["pod"] for r in s.of("cloud", kind="created") if r["t"] >= broke_at]
    created = s.first("cloud", kind="created", pod=replacement)
    assert created["t"] >= flagged["t"]  # created because of the flag
    ready = s.transition(replacement, "Warming", to="Ready")
    draining = s.transition(victim, "Flagged", to="Draining")
    deleted = s.first("cloud", kind="deleted", pod=victim)
    assert ready["t"] <= draining["t"]  # the old pod leaves only once the new one serves
    assert deleted["t"] - draining["t"] >= 150  # drain.period
    members = s.final_members()
    assert victim not in members
    assert members[replacement]["phase"] == "Ready"
    assert s.end["status"]["ready"] == len(members) == 3
    assert len(s.of("cloud", kind="created")) == 4  # three adopted, one replacement
    return str(replacement)


def terminated_dead_then_replaced(s: Story, victim: str, *, rule: str, broke_at: float) -> str:
    """A dead pod's replacement: flagged, its replacement created, and the dead pod, out
    of nginx, terminated the next loop (DeadPodTerminated) without waiting for the
    replacement to serve; the replacement is wired later. Returns the replacement."""
    flagged = s.transition(victim, "Ready (quarantined)", to="Flagged")
    assert rule in flagged["reason"]
    assert flagged["t"] >= broke_at
    (replacement,) = [r["pod"] for r in s.of("cloud", kind="created") if r["t"] >= broke_at]
    created = s.first("cloud", kind="created", pod=replacement)
    assert created["t"] >= flagged["t"]  # created because of the flag
    terminated = s.transition(victim, "Flagged", to="Terminating")
    assert flagged["t"] < terminated["t"] <= flagged["t"] + 60  # the next loop
    assert "is dead" in terminated["reason"]
    assert "out of nginx: terminated now" in terminated["reason"]
    assert not s.of("transition", pod=victim, to="Draining")  # no wait for its replacement
    deleted = s.first("cloud", kind="deleted", pod=victim)
    ready = s.transition(replacement, "Warming", to="Ready")
    assert deleted["t"] < ready["t"]  # it stopped billing before its replacement served
    members = s.final_members()
    assert victim not in members
    assert members[replacement]["phase"] == "Ready"
    assert s.end["status"]["ready"] == len(members) == 3
    assert len(s.of("cloud", kind="created")) == 4  # three adopted, one replacement
    return str(replacement)


def stays_wired(s: Story, pod: str, *, since: float, until: float) -> bool:
    return all(pod in r["wired"] for r in s.loops(since, until=until))


@pytest.fixture(scope="module")
def stories() -> Callable[[str], Story]:
    cache: dict[str, Story] = {}

    def get(name: str) -> Story:
        if name not in cache:
            cache[name] = Story(name)
        return cache[name]

    return get


def test_every_example_scenario_is_tested_here() -> None:
    tested = {
        "pod-dies",
        "pod-hangs",
        "listing-down-pod-dies",
        "slow-host",
        "host-notice",
        "out-of-stock",
        "release-good",
        "release-errors",
        "release-slow",
        "release-fails-to-start",
        "autoscale",
        "controller-restart",
        "error-rate",
        "pool-deleted",
        "crash-after-create",
        "cost-cap",
        "enough-serving",
        "no-surge-room",
        "status-lost",
        "listing-lag",
        "last-pod-dies-at-cap",
        "kept-while-serving",
        "clock-step",
        "status-write-storm",
        "pool-wide-hold",
        "independent-failures",
        "console-terminate",
    }
    assert {p.stem for p in SCENARIOS.glob("*.yaml")} == tested


def test_a_pod_dies_it_is_quarantined_at_once_flagged_on_the_rule_then_terminated_and_replaced(
    stories: Any,
) -> None:
    s = stories("pod-dies")
    victim = s.pod(2)
    fault = s.first("cloud", kind="fault", pod=victim)
    assert fault["t"] == 1200

    quarantined = s.transition(victim, "Ready", to="Ready (quarantined)")
    assert quarantined["t"] <= 1200 + 60  # its second failed probe, 30 s apart
    assert "its last 2 probes failed hard" in quarantined["reason"]
    assert victim not in s.loops(quarantined["t"])[0]["wired"]  # out of nginx at once
    flagged = s.transition(victim, "Ready (quarantined)", to="Flagged")
    assert 1200 + 120 <= flagged["t"] <= 1200 + 150  # the Unreachable rule's 2 minutes
    terminated_dead_then_replaced(s, victim, rule="Unreachable", broke_at=1200)


def test_a_pod_hangs_its_probes_time_out_and_it_is_terminated_and_replaced(stories: Any) -> None:
    s = stories("pod-hangs")
    victim = s.pod(2)
    quarantined = s.transition(victim, "Ready", to="Ready (quarantined)")
    assert quarantined["t"] <= 1200 + 60  # its second timed-out probe
    assert "timed out after 10s" in quarantined["reason"]
    assert victim not in s.loops(quarantined["t"])[0]["wired"]  # out of nginx at once
    flagged = s.transition(victim, "Ready (quarantined)", to="Flagged")
    assert "timed out" in flagged["reason"]
    terminated_dead_then_replaced(s, victim, rule="Unreachable", broke_at=1200)


def test_a_pod_dies_while_the_listing_fails_and_still_leaves_nginx(stories: Any) -> None:
    s = stories("listing-down-pod-dies")
    victim = s.pod(2)
    raised = s.first("condition", type="NotActing", status="True")
    assert raised["reason"] == "RunPodUnavailable"
    quarantined = s.transition(victim, "Ready", to="Ready (quarantined)")
    assert quarantined["t"] <= 1200 + 60
    assert victim not in s.loops(quarantined["t"])[0]["wired"]
    cleared = s.first("condition", type="NotActing", status="False")
    assert raised["t"] <= quarantined["t"] < cleared["t"]  # while RunPod's listing fails
    # Nothing but the unwire while NotActing: no create, no terminate.
    acts = {r["action"] for r in s.of("action") if raised["t"] <= r["t"] < cleared["t"]}
    assert acts == {"unwire", "write-slots"}
    flagged = s.transition(victim, "Ready (quarantined)", to="Flagged")
    assert flagged["t"] >= cleared["t"]  # the rule flags it once the listing reads
    terminated_dead_then_replaced(s, victim, rule="Unreachable", broke_at=1200)


def test_a_slow_host_is_replaced_while_it_keeps_serving(stories: Any) -> None:
    s = stories("slow-host")
    victim = s.pod(1)
    flagged = s.transition(victim, "Ready", to="Flagged")
    assert flagged["t"] >= 1200 + 600  # SlowScrape lasts 10 minutes first
    replacement = replaced_surge_first(s, victim, rule="SlowScrape", broke_at=1200)
    ready = s.transition(replacement, "Warming", to="Ready")
    assert stays_wired(s, victim, since=flagged["t"], until=ready["t"] - 1)  # still serves


def test_a_critical_error_note_raises_host_notice_and_replaces_the_pod(stories: Any) -> None:
    s = stories("host-notice")
    victim = s.pod(3)
    raised = s.first("condition", type="HostNotice", status="True")
    assert victim in raised["message"]
    assert "critical error on this machine" in raised["message"]
    assert 1200 <= raised["t"] <= 1230
    flagged = s.transition(victim, "Ready", to="Flagged")
    replacement = replaced_surge_first(s, victim, rule="HostNotice", broke_at=1200)
    ready = s.transition(replacement, "Warming", to="Ready")
    assert stays_wired(s, victim, since=flagged["t"], until=ready["t"] - 1)
    cleared = s.first("condition", type="HostNotice", status="False")
    assert cleared["t"] > ready["t"]  # once the flagged pod left nginx


def test_out_of_stock_for_hours_keeps_capacity_unavailable_raised_until_stock_returns(
    stories: Any,
) -> None:
    s = stories("out-of-stock")
    victim = s.pod(1)
    flagged = s.transition(victim, "Ready (quarantined)", to="Flagged")
    first = s.transition(victim, "Flagged", to="Terminating")
    assert first["t"] <= flagged["t"] + 60  # dead and out of nginx: terminated at once
    assert "is dead" in first["reason"]
    (asked,) = s.of("action", action="create", t=flagged["t"])  # its replacement, first
    assert asked["outcome"] == "refused"  # no stock: it is terminated all the same
    raised = s.first("condition", type="CapacityUnavailable", status="True")
    cleared = s.first("condition", type="CapacityUnavailable", status="False")
    restock = [r for r in s.of("cloud", kind="fault") if r["t"] == 3 * 3600]
    (replacement,) = [r["pod"] for r in s.of("cloud", kind="created") if r["t"] > 0]

    assert len(restock) == 1
    assert raised["t"] < 20 * 60
    assert cleared["t"] > 3 * 3600  # raised for hours, the whole time there was no GPU
    refused = [r for r in s.of("action", action="create") if r["outcome"] == "refused"]
    assert len(refused) >= 30  # one try per 5-minute backoff
    assert all(r["t"] < 3 * 3600 for r in refused)
    assert s.first("cloud", kind="created", pod=replacement)["t"] > 3 * 3600
    assert cleared["t"] >= s.first("cloud", kind="created", pod=replacement)["t"]
    assert s.end["status"]["ready"] == 2
    assert victim not in s.final_members()


NEW = "ghcr.io/example/inference:1.5.0"
OLD = "ghcr.io/example/inference:1.4.2"


def canary_of(s: Story) -> tuple[Record, str]:
    """The release's first rollout record after the apply, and its canary pod."""
    applied = s.first("scenario", do="apply")
    assert applied["t"] == 610
    started = s.first("rollout", image=NEW, phase="Canary")
    assert started["t"] == applied["t"]
    canary = started["canary"]
    assert canary == s.pod(2), "the oldest Ready pod (adopted ones by name) goes first"
    return started, str(canary)


def rolled_back_at_the_canary(s: Story, *, failure: str) -> Record:
    """The shape of a release stopped by its canary's bake; returns the verdict record."""
    _, canary = canary_of(s)
    baking = s.transition(canary, "Updating", to="Ready")
    assert "canary bakes for 10m" in baking["reason"]
    (verdict,) = s.of("rollout", image=NEW, verdict="Failed")
    assert (verdict["phase"], verdict["judgedBy"]) == ("RolledBack", "metrics")
    assert failure in verdict["message"]
    assert "on the old pods" in verdict["message"]
    assert "requests" in verdict["message"]
    assert "window" in verdict["message"]
    assert verdict["t"] - baking["t"] < 600, "failed before the bake was over"
    failed = next(r for r in s.of("transition", pod=canary, to="Draining") if r["t"] > baking["t"])
    assert failed["t"] == verdict["t"]
    assert "failed" in failed["reason"]
    assert canary not in s.loops(failed["t"])[0]["wired"], "unwired at once"
    cond = s.first("condition", type="UpdateFailed", status="True")
    assert cond["reason"] == "CanaryFailed"
    assert failure in cond["message"]
    assert f"{NEW} is not tried again until spec.image changes" in cond["message"]
    # In place, on its own machine, and back: no pod created, none deleted.
    updates = s.of("cloud", kind="updated")
    assert [(u["pod"], u["image"]) for u in updates] == [(canary, NEW), (canary, OLD)]
    assert updates[1]["t"] - failed["t"] >= 150, "it drained before going back"
    back = s.of("transition", pod=canary, to="Ready", **{"from": "Updating"})[-1]
    assert back["t"] > updates[1]["t"]
    assert not s.of("cloud", kind="created", image=NEW)
    assert not [r for r in s.of("cloud", kind="deleted") if r["t"] > 610]
    assert all(len(r["wired"]) >= 2 for r in s.loops(610))
    # Rejected: the release stays rolled back to the end, and nothing retries it.
    assert {r["rollout"] for r in s.loops(verdict["t"])} == {"RolledBack"}
    assert {m["image"] for m in s.final_members().values()} == {OLD}
    assert s.end["status"]["ready"] == 3
    assert s.end["status"]["rollout"]["verdict"]["result"] == "Failed"
    return verdict


def test_a_good_release_bakes_its_canary_against_its_peers_then_rolls_on(stories: Any) -> None:
    s = stories("release-good")
    _, canary = canary_of(s)
    baking = s.transition(canary, "Updating", to="Ready")
    assert "canary bakes for 10m" in baking["reason"]
    passed = s.first("rollout", image=NEW, verdict="Passed")
    assert (passed["phase"], passed["judgedBy"]) == ("Rolling", "metrics")
    assert passed["t"] - baking["t"] >= 600, "the whole bake"
    assert "as good as the old pods" in passed["message"]
    updates = s.of("cloud", kind="updated")
    assert updates[0]["pod"] == canary
    assert len({u["pod"] for u in updates}) == len(updates) == 3  # each pod once, in place
    assert all(u["image"] == NEW for u in updates)
    assert updates[1]["t"] > passed["t"], "the others wait for the verdict"
    back = [s.transition(u["pod"], "Updating", to="Ready")["t"] for u in updates]
    for previous_ready, next_update in zip(back[1:], [u["t"] for u in updates][2:], strict=False):
        assert previous_ready <= next_update  # maxParallel 1: one pod after the other
    assert not s.of("cloud", kind="created", image=NEW)
    assert not s.of("cloud", kind="deleted")  # no GPU was given up or needed
    assert all(len(r["wired"]) >= 2 for r in s.loops(610))
    assert s.of("rollout", image=NEW)[-1]["phase"] == "Done"
    assert {m["image"] for m in s.final_members().values()} == {NEW}
    assert s.end["status"]["ready"] == 3


def test_a_release_failing_30_percent_of_requests_is_rolled_back_at_its_canary(
    stories: Any,
) -> None:
    verdict = rolled_back_at_the_canary(stories("release-errors"), failure="error ratio")
    assert "at most +2.0%" in verdict["message"]


def test_a_three_times_slower_release_is_rolled_back_at_its_canary(stories: Any) -> None:
    verdict = rolled_back_at_the_canary(stories("release-slow"), failure="latency")
    assert "at most 1.5x" in verdict["message"]
    assert "2.9" in verdict["message"], "three times the 0.25 s, read over a mixed window"


def test_a_release_that_never_starts_is_rolled_back_and_retried_after_the_backoff(
    stories: Any,
) -> None:
    s = stories("release-fails-to-start")
    _, canary = canary_of(s)
    sent = s.transition(canary, "Draining", to="Updating")
    assert not s.of("rollout", image=NEW, phase="Baking"), "it never served on the new image"
    cond = s.first("condition", type="UpdateFailed", status="True")
    assert cond["reason"] == "RolledBack"
    assert cond["t"] - sent["t"] >= 900, "health.warmupTimeout, as before canaries"
    rolled = s.first("rollout", image=NEW, phase="RolledBack")
    assert rolled["verdict"] is None, "no bake, no verdict: not a rejected image"
    back = s.first("transition", pod=canary, to="Ready", **{"from": "Updating"})
    assert back["t"] > cond["t"]
    # As before canaries: after the 30-minute backoff the release is tried again.
    again = [r for r in s.of("rollout", image=NEW, phase="Canary") if r["t"] > back["t"]]
    assert again
    assert again[0]["t"] - cond["t"] >= 1800
    updates = s.of("cloud", kind="updated")
    assert {u["pod"] for u in updates} == {canary}, "the other pods never leave the old image"
    assert not s.of("condition", type="UpdateFailed", reason="CanaryFailed")


def test_a_load_spike_grows_the_pool_to_max_then_it_shrinks_back(stories: Any) -> None:
    s = stories("autoscale")
    spike, calm = s.of("scenario", do="load")
    grown = next(r for r in s.loops() if r["desired"] == 4)
    full = next(r for r in s.loops() if r["ready"] == 4)
    shrunk = next(r for r in s.loops(calm["t"]) if r["desired"] == 2)
    deleted = s.of("cloud", kind="deleted")

    assert (spike["t"], calm["t"]) == (1200, 3600)
    assert spike["t"] + 120 <= grown["t"] <= spike["t"] + 180  # scaleUpStabilization 2m
    assert len(s.of("cloud", kind="created")) == 4  # two adopted, two for the spike
    assert full["t"] < calm["t"]
    assert shrunk["t"] >= calm["t"] + 1800  # scaleDownStabilization 30m
    assert len(deleted) == 2
    first_gone = s.first("transition", pod=deleted[0]["pod"], to="Gone")
    second_drained = s.transition(deleted[1]["pod"], "Ready", to="Draining")
    assert first_gone["t"] <= second_drained["t"]  # one pod at a time through the drain
    assert s.end["status"]["ready"] == 2


def test_a_controller_restart_mid_replacement_carries_on_without_a_second_create(
    stories: Any,
) -> None:
    s = stories("controller-restart")
    victim = s.pod(2)
    restart = s.first("scenario", do="controller-restart")
    flagged = s.transition(victim, "Ready (quarantined)", to="Flagged")

    assert flagged["t"] < restart["t"]  # the replacement was under way
    replacement = terminated_dead_then_replaced(s, victim, rule="Unreachable", broke_at=1200)
    # The new process's first loop terminates the dead pod and keeps the replacement.
    assert s.transition(victim, "Flagged", to="Terminating")["t"] == restart["t"]
    assert s.transition(replacement, "Warming", to="Ready")["t"] > restart["t"]
    assert len(s.of("action", action="create")) == 1


def test_a_pod_answering_errors_is_replaced_for_its_error_rate(stories: Any) -> None:
    s = stories("error-rate")
    victim = s.pod(2)
    flagged = s.transition(victim, "Ready", to="Flagged")
    assert flagged["t"] >= 1200 + 300  # ErrorRate lasts 5 minutes first
    # By then the query's 5-minute window holds only failing-period answers: the share it
    # reports is the 30% the scenario set, not a mix with the healthy minutes before.
    assert "ErrorRate: 5xx share 30.00% over errorRatioQuery's window" in flagged["reason"]
    replaced_surge_first(s, victim, rule="ErrorRate", broke_at=1200)


def test_a_deleted_pool_drains_terminates_every_pod_and_only_then_goes(stories: Any) -> None:
    s = stories("pool-deleted")
    pods = [r["pod"] for r in s.of("cloud", kind="created")]
    deleted_at = s.first("scenario", do="delete")["t"]
    finalizer = s.first("action", action="finalizer")
    drained = [s.transition(pod, "Ready", to="Draining") for pod in pods]
    gone = [s.first("cloud", kind="deleted", pod=pod) for pod in pods]
    removed = s.of("action", action="finalizer")[-1]

    assert (finalizer["t"], finalizer["outcome"]) == (0, "ok")  # on the pool from the start
    assert "added" in finalizer["detail"]
    assert deleted_at == 1200
    assert all(r["t"] == deleted_at for r in drained)
    assert s.loops(deleted_at, until=deleted_at)[-1]["wired"] == []  # out of nginx at once
    assert all(r["t"] - deleted_at >= 150 for r in gone)  # drain.period first
    assert "removed" in removed["detail"]
    assert removed["t"] >= max(r["t"] for r in gone)  # only once RunPod lists none
    assert s.end["status"] is None
    assert s.end["deleted"] is True
    assert not s.of("cloud", kind="created", t=deleted_at)  # nothing replaced them


def test_a_crash_right_after_a_create_adopts_the_pod_and_makes_no_second_one(
    stories: Any,
) -> None:
    s = stories("crash-after-create")
    victim = s.pod(2)
    (replacement,) = [r["pod"] for r in s.of("cloud", kind="created") if r["t"] > 0]
    created = s.first("cloud", kind="created", pod=replacement)
    restarts = s.of("scenario", do="controller-restart")
    killed = [r for r in restarts if "is killed right after" in r["detail"]]
    assert len(killed) == 1
    assert "right after a createPod call" in killed[0]["detail"]
    assert killed[0]["t"] == created["t"]
    assert not s.of("action", action="create"), "the dead process never read its answer"
    adopted = s.first("recovery", action="adopt")
    assert adopted["t"] == created["t"], "the new process found it by name at once"
    assert f"replacing {victim}" in adopted["detail"]
    counted = s.first("recovery", action="create")
    assert "counted as a create" in counted["detail"]
    # The new process also finds pod 2 dead and out of nginx: terminated in its first
    # loop, while the adopted replacement warms; no drain waits for it.
    terminated = s.transition(victim, "Flagged", to="Terminating")
    assert terminated["t"] == created["t"]
    assert "is dead" in terminated["reason"]
    assert not s.of("transition", pod=victim, to="Draining")
    assert s.transition(replacement, "Warming", to="Ready")["t"] > terminated["t"]
    assert s.end["status"]["ready"] == 3
    final = s.end["status"]
    assert [a["name"] for a in final["createLog"]] == [created["name"]]
    assert victim not in s.final_members()


def test_the_cost_cap_holds_at_runpods_price_whatever_the_estimate(stories: Any) -> None:
    s = stories("cost-cap")
    assert not [r for r in s.of("cloud", kind="created") if r["t"] > 0]
    assert all(r["costPerHour"] <= 2.5 for r in s.loops())
    (refused,) = s.of("action", action="create")
    assert refused["outcome"] == "refused"
    assert "over the cost cap: NVIDIA GeForce RTX 4090 at $1.49/h" in refused["detail"]
    final = s.end["status"]
    assert final["catalogPrices"] == {"NVIDIA GeForce RTX 4090": 1.49}
    blocked = next(c for c in final["conditions"] if c["type"] == "CreateBlocked")
    assert blocked["reason"] == "CostCapReached"
    assert "NVIDIA GeForce RTX 4090 at $1.49/h" in blocked["message"]
    assert final["ready"] == 1


def test_a_pod_going_bad_while_the_pool_shrinks_is_taken_out_not_replaced(
    stories: Any,
) -> None:
    s = stories("enough-serving")
    victim, others = s.pod(1), [s.pod(2), s.pod(3)]
    flagged = s.transition(victim, "Ready", to="Flagged")
    released = s.transition(victim, "Flagged", to="Draining")
    assert released["t"] == flagged["t"] == 1200
    assert "not replaced" in released["reason"]
    assert not [r for r in s.of("cloud", kind="created") if r["t"] > 0]
    assert all(stays_wired(s, pod, since=60, until=3600) for pod in others)
    assert sorted(s.final_members()) == sorted(others)


def test_a_dead_pod_with_no_surge_room_is_terminated_first_then_the_pool_shrinks(
    stories: Any,
) -> None:
    s = stories("no-surge-room")
    victim = s.pod(2)
    flagged = s.transition(victim, "Ready (quarantined)", to="Flagged")
    first = s.transition(victim, "Flagged", to="Terminating")
    assert first["t"] == flagged["t"]
    assert "its replacement cannot be created first" in first["reason"]
    assert "limits.maxPods is 4" in first["reason"]
    (created,) = [r for r in s.of("cloud", kind="created") if r["t"] > 0]
    assert created["t"] > first["t"]
    assert max(len(r["members"]) for r in s.loops()) <= 4
    assert s.end["status"]["ready"] == 2
    assert not [m for m in s.final_members().values() if m["phase"] != "Ready"]


def test_a_broken_then_lost_status_is_rebuilt_and_nothing_is_created(stories: Any) -> None:
    s = stories("status-lost")
    rebuilds = s.of("recovery", action="rebuild")
    assert [r["t"] for r in rebuilds] == [1230, 2430]
    assert "status.members" in rebuilds[0]["detail"]
    assert "the stored status is empty" in rebuilds[1]["detail"]
    assert not [r for r in s.of("cloud", kind="created") if r["t"] > 0]
    assert not s.of("action", action="terminate")
    pods = [s.pod(n) for n in (1, 2, 3)]
    assert all(stays_wired(s, pod, since=60, until=3600) for pod in pods)
    assert s.end["status"]["ready"] == 3


def test_both_pods_dead_without_stock_are_held_for_pool_wide_hold_then_replaced(
    stories: Any,
) -> None:
    s = stories("pool-wide-hold")
    dead = {s.pod(1), s.pod(2)}
    held = s.first("condition", type="PoolWideDegradation", status="True")
    assert 600 <= held["t"] <= 600 + 60  # both breach Unreachable together
    assert "health.poolWideHold" in held["message"]
    said_ready = [r["t"] for r in s.of("condition", type="Ready", status="True")]
    assert not [t for t in said_ready if 600 <= t <= held["t"] + 1800]  # Ready False held
    created = [r for r in s.of("cloud", kind="created") if r["t"] > 0]
    assert created, "the hold ended and the pods were replaced"
    assert all(r["t"] >= held["t"] + 1800 for r in created)  # nothing during the hold
    ended = s.first("condition", type="PoolWideDegradation", status="False")
    assert ended["t"] <= held["t"] + 1800 + 120
    gone = [r["t"] for r in s.of("cloud", kind="deleted") if r["pod"] in dead]
    assert len(gone) == 2
    assert max(gone) <= held["t"] + 1800 + 900  # billed dead at most 15 min past the hold
    assert s.end["status"]["ready"] == 2
    assert not dead & set(s.final_members())


def test_failures_minutes_apart_are_not_lumped_together_as_pool_wide(stories: Any) -> None:
    s = stories("independent-failures")
    erring, dead = s.pod(1), s.pod(2)
    assert not s.of("condition", type="PoolWideDegradation", status="True")
    died = s.first("cloud", kind="fault", pod=dead)["t"]
    out = next(r["t"] for r in s.loops(died) if dead not in r["wired"])
    assert out - died <= 60
    gone = s.first("cloud", kind="deleted", pod=dead)["t"]
    assert gone - died <= 15 * 60  # flagged on Unreachable, then terminated as dead
    drained = s.first("transition", pod=erring, to="Draining")
    replacement = s.first("transition", to="Ready", **{"from": "Warming"})
    assert replacement["t"] <= drained["t"]  # the erring pod served until its replacement did
    assert s.end["status"]["ready"] == 2
    assert not {erring, dead} & set(s.final_members())


def test_a_pod_terminated_in_the_console_leaves_nginx_at_once_and_is_replaced(
    stories: Any,
) -> None:
    s = stories("console-terminate")
    victim = s.pod(2)
    gone = s.first("cloud", kind="deleted", pod=victim)["t"]
    out = next(r["t"] for r in s.loops(gone) if victim not in r["wired"])
    assert out - gone <= 60
    quarantined = s.first("transition", pod=victim, to="Ready (quarantined)", **{"from": "Ready"})
    assert "404" in quarantined["reason"]
    assert quarantined["t"] == out
    assert len(s.of("cloud", kind="created")) == 4  # three adopted, one replacement
    assert s.end["status"]["ready"] == 3


# -- what a first-time reader of any timeline must be able to believe --------------------


def test_a_pod_listed_90s_after_its_create_is_not_created_twice_and_the_caps_hold(
    stories: Any,
) -> None:
    s = stories("listing-lag")
    created = s.of("cloud", kind="created")
    assert len(created) == 4  # three for the size, one replacement for the dead pod 2
    times = [r["t"] for r in created]
    # Each create waited for the pod before it to be listed (90 s), not one loop.
    assert all(b - a >= 90 for a, b in itertools.pairwise(times))
    live: set[str] = set()
    for r in s.records:
        if r["event"] == "cloud" and r["kind"] == "created":
            live.add(r["pod"])
            assert len(live) <= 4, f"maxPods 4 broken at {r['t']}s"
        elif r["event"] == "cloud" and r["kind"] == "deleted":
            live.discard(r["pod"])
    assert all(r["costPerHour"] <= 2.76 + 1e-9 for r in s.loops())
    assert not [r for r in s.of("transition", to="Gone") if r["from"] == "Warming"]
    waited = s.first("condition", type="CreateBlocked", status="True")
    assert waited["reason"] == "CreateUnconfirmed"
    assert "does not list it yet" in waited["message"]
    assert s.end["status"]["ready"] == 3


def test_the_only_pod_dying_at_max_pods_is_terminated_first_and_replaced(stories: Any) -> None:
    s = stories("last-pod-dies-at-cap")
    dead = s.pod(1)
    died = s.first("cloud", kind="fault", pod=dead)["t"]
    assert died == 600
    unwired = next(r["t"] for r in s.loops(died) if dead not in r["wired"])
    assert unwired - died <= 60, "the last wired pod leaves nginx: RunPod's list reads"
    deleted = s.first("cloud", kind="deleted", pod=dead)["t"]
    assert deleted - died <= 120 + 60, "terminated first once Unreachable is due"
    flagged = s.transition(dead, "Ready (quarantined)", to="Flagged")
    terminating = s.transition(dead, "Flagged", to="Terminating")
    assert terminating["t"] == flagged["t"]
    assert "MaxPodsReached" in terminating["reason"]
    (replacement,) = [r["pod"] for r in s.of("cloud", kind="created") if r["t"] > died]
    assert s.first("cloud", kind="created", pod=replacement)["t"] >= deleted
    assert s.transition(replacement, "Warming", to="Ready")["t"] <= died + 600
    assert s.end["status"]["ready"] == 1


def test_a_slow_pod_kept_at_max_pods_is_said_aloud_then_terminated_first_on_request(
    stories: Any,
) -> None:
    s = stories("kept-while-serving")
    slow = s.pod(2)
    flagged = s.transition(slow, "Ready", to="Flagged")
    assert "SlowScrape" in flagged["reason"]
    kept = s.first("condition", type="ReplacementBlocked", status="True")
    assert kept["t"] == flagged["t"]
    assert kept["reason"] == "MaxPodsReached"
    for said in (slow, "SlowScrape", "limits.maxPods", "TerminateFirst"):
        assert said in kept["message"]
    assert stays_wired(s, slow, since=flagged["t"], until=2700), "Keep: it serves on"
    assert not [r for r in s.of("cloud", kind="created") if r["t"] > 0 and r["t"] < 2700]
    draining = s.transition(slow, "Flagged", to="Draining")
    assert 2700 <= draining["t"] <= 2700 + 30
    deleted = s.first("cloud", kind="deleted", pod=slow)["t"]
    (replacement,) = [r["pod"] for r in s.of("cloud", kind="created") if r["t"] > 0]
    assert s.first("cloud", kind="created", pod=replacement)["t"] >= deleted
    assert s.first("condition", type="ReplacementBlocked", status="False")["t"] == draining["t"]
    assert s.end["status"]["ready"] == 3


def test_a_clock_step_either_way_moves_no_cap_and_no_rule_duration(stories: Any) -> None:
    s = stories("clock-step")
    assert [r["t"] for r in s.of("scenario", do="clock-step")] == [1200, 4800]
    creates = [r["t"] for r in s.of("cloud", kind="created") if r["t"] > 0]
    assert len(creates) == 4
    # maxCreatesPerHour 2 in every real hour, across the +1h step (the third create
    # waited for the hour of the first to end, where the step had let it out at once).
    assert all(len([t for t in creates if u - 3600 < t <= u]) <= 2 for u in creates)
    assert creates[2] >= creates[0] + 3600
    # Pod 4 dies at 1:19, a minute before the -1h step: flagged on the Unreachable
    # rule's 2 minutes and gone, where the step had kept it billed an hour longer.
    victim = s.pod(4)
    flagged = s.transition(victim, "Ready (quarantined)", to="Flagged")
    assert 4740 + 120 <= flagged["t"] <= 4740 + 180
    assert s.first("cloud", kind="deleted", pod=victim)["t"] <= 4740 + 15 * 60
    assert s.end["status"]["ready"] == 2


@pytest.mark.parametrize("name", EVERY_SCENARIO)
def test_every_scenario_keeps_every_invariant(stories: Any, name: str) -> None:
    s = stories(name)
    assert s.of("violation") == []


@pytest.mark.parametrize("name", EVERY_SCENARIO)
def test_no_scenario_raises_prometheus_unavailable_for_a_pool_with_nothing_to_scrape(
    stories: Any, name: str
) -> None:
    s = stories(name)
    raised = s.of("condition", type="PrometheusUnavailable", status="True")
    assert raised == [], "an empty answer before any pod serves is not Prometheus being down"


@pytest.mark.parametrize("name", EVERY_SCENARIO)
def test_a_created_pods_price_counts_in_the_loop_that_created_it(stories: Any, name: str) -> None:
    s = stories(name)
    loops = s.of("loop")
    for created in s.of("action", action="create", outcome="created"):
        at = next(i for i, r in enumerate(loops) if r["t"] == created["t"])
        loop, after = loops[at], loops[at + 1 : at + 2]
        assert created["pod"] in loop["members"]
        assert loop["costPerHour"] > 0
        # The next loop lists the same pods from RunPod: the cost must not jump then.
        deleted = [r for r in s.of("cloud", kind="deleted") if r["t"] > created["t"]]
        same = after and after[0]["members"].keys() == loop["members"].keys()
        if same and not (deleted and deleted[0]["t"] <= after[0]["t"]):
            assert after[0]["costPerHour"] == loop["costPerHour"]


@pytest.mark.parametrize("name", EVERY_SCENARIO)
def test_a_members_since_is_the_time_of_its_last_transition_line(stories: Any, name: str) -> None:
    s = stories(name)
    history = (s.end["status"] or {}).get("history", [])
    rebuilt = [
        (dt.datetime.fromisoformat(h["time"].replace("Z", "+00:00")) - s.start).total_seconds()
        for h in history
        if h["action"] == "rebuild"
    ]
    for pod, member in s.final_members().items():
        moved = s.of("transition", pod=pod)
        if not moved:
            continue
        # A status rebuilt from ground truth starts each member's phase anew.
        last = max([moved[-1]["t"], *rebuilt])
        since = dt.datetime.fromisoformat(member["since"].replace("Z", "+00:00"))
        assert abs((since - s.start).total_seconds() - last) < 1, (pod, moved[-1])


# pool-deleted ends with no pool and so no status to validate; its deletion is checked by
# test_a_deleted_pool_drains_terminates_every_pod_and_only_then_goes above (every pod
# terminated, the finalizer removed after the last) and tests/stories/test_deletion.py
# (test_a_deleted_pool_drains_and_terminates_every_pod_before_it_goes; the status of a
# blocked deletion validated in test_a_read_only_key_blocks_the_deletion_and_the_status_says_why).
KEEP_THEIR_POOL = [name for name in EVERY_SCENARIO if name != "pool-deleted"]


@pytest.mark.parametrize("name", KEEP_THEIR_POOL)
def test_the_final_status_of_every_scenario_validates_against_the_crds_status_schema(
    stories: Any, name: str
) -> None:
    """The API server would accept every status the controller wrote (`rpp simulate
    --json`'s `end` record is the pool as stored)."""
    s = stories(name)
    assert not s.end.get("deleted")
    assert status_problems(s.end["status"]) == []
    assert any(c["type"] == "Ready" for c in s.end["status"]["conditions"])
