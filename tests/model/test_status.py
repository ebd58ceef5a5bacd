"""The persisted status model: exact JSON round trip, size, clear errors, pure helpers."""

from __future__ import annotations

import copy
import datetime as dt
import json
from typing import Any

import jsonschema
import pytest

from rpp.adapters.clock import UTC
from rpp.decide.state.conditions import ALL_CONDITIONS, SUMMARY_CONDITIONS
from rpp.model.effects import (
    CreatePod,
    Effect,
    RecordEvent,
    TerminatePod,
    Unwire,
    UpdatePod,
    Wire,
    WriteSlots,
)
from rpp.model.members import (
    DrainReason,
    MemberRecord,
    Phase,
    ProbeRecord,
    Quarantine,
    UpdateProgress,
    UpdateStep,
)
from rpp.model.rollout_records import BakeTally, RolloutPhase, Side, Verdict, VerdictResult
from rpp.model.status import (
    HISTORY_LIMIT,
    SPEND_PODS_KEPT,
    Autoscaling,
    Backoff,
    CapacityRefusal,
    Condition,
    CreateAttempt,
    HistoryEntry,
    Intent,
    PlannedAction,
    PoolStatus,
    Recommendation,
    Rollout,
    Spend,
    StatusFormatError,
    set_condition,
)
from tests.crd_admission import status_problems

T0 = dt.datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def full_member(index: int) -> MemberRecord:
    """A member with every field set at once, with realistic lengths (RunPod ids, long
    images). No phase holds all of them (a quarantine is cleared when a member leaves
    Ready, an update when it is wired again), so it bounds any member the machine makes."""
    return MemberRecord(
        pod_id=f"x7k2m9q4w1z{index:03d}",
        name=f"rpp-inference-{index:03d}-a8f3",
        phase=Phase.UPDATING,
        since=at(100 + index),
        slot=index,
        datacenter="EU-RO-1",
        gpu_type="NVIDIA GeForce RTX 4090",
        image="registry.example.com/team/inference-server:2026.01.15-abcdef1",
        cost_per_hr=0.69,
        created_at=at(index),
        last_probe=ProbeRecord(
            at=at(200),
            passed=False,
            health_ok=True,
            metrics_ok=False,
            health_latency=0.123456,
            metrics_latency=2.5,
            error="metrics: HTTP 503 from https://x7k2m9q4w1z-80.proxy.runpod.net/metrics",
            process_start=1767225600.25,
        ),
        pass_streak=2,
        hard_failures=1,
        quarantine=Quarantine(since=at(160), reason="health /health: HTTP 502"),
        breaches={"Unreachable": at(150), "SlowScrape": at(120), "ErrorRate": at(130)},
        flagged_rule="SlowScrape",
        flagged_reason="metrics probe took 2.50s (limit 2s) (breached 600s of 600s)",
        replacement_for="a1b2c3d4e5f6g7",
        replaced_by="h8i9j0k1l2m3n4",
        drain_reason=DrainReason.UPDATE,
        update=UpdateProgress(
            from_image="registry.example.com/team/inference-server:2026.01.01-1234567",
            to_image="registry.example.com/team/inference-server:2026.01.15-abcdef1",
            step=UpdateStep.RESTART,
            started_at=at(190),
            process_start_before=1767225000.5,
            rollback=True,
            refused="RunPod podEditJob: bad_request (400): image not found in registry",
        ),
        terminate_requested_at=at(300),
        terminate_error="RunPod deletePod: server_error (500): Internal server error",
        missing_loops=1,
        adopted=True,
        unconfirmed_since=at(10),
    )


def full_status(members: int = 3) -> PoolStatus:
    """A status with every field set, every condition type present and history full, its
    texts at their bounds (MESSAGE_LIMIT, DETAIL_LIMIT). The lists that grow with one
    loop's actions (plannedActions, intents, recommendations) have typical lengths."""
    conditions: tuple[Condition, ...] = ()
    for kind in (*SUMMARY_CONDITIONS, *ALL_CONDITIONS):
        conditions = set_condition(
            conditions,
            type=kind,
            status="True",
            reason="Because",
            message=f"{kind}: a long message explaining why, for a human. " * 30,
            now=at(10),
            generation=7,
        )
    return PoolStatus(
        mode="DryRun",
        observed_generation=7,
        desired=3,
        ready=2,
        cost_per_hour=2.07,
        planned=2,
        conditions=conditions,
        members=tuple(full_member(i) for i in range(members)),
        planned_actions=(
            PlannedAction(action="create", pod="rpp-inference-9", detail="create pod (below min)"),
            PlannedAction(action="event", detail="event Normal Scaled"),
        ),
        history=tuple(
            HistoryEntry(
                time=at(i),
                action="terminate",
                pod=f"x7k2m9q4w1z{i:03d}",
                outcome="ok",
                detail="terminate pod x7k2m9q4w1z (rpp-inference-001): drained (replace)" * 5,
            )
            for i in range(HISTORY_LIMIT)
        ),
        autoscaling=Autoscaling(
            value=3.25,
            size=3,
            recommendations=tuple(Recommendation(time=at(30 * i), size=3) for i in range(60)),
        ),
        create_log=(
            CreateAttempt(
                time=at(5),
                outcome="created",
                name="rpp-inference-t85t0o",
                replacement_for="a1b2c3d4e5f6g7",
            ),
        ),
        intents=(
            Intent(
                action="create",
                time=at(6),
                name="rpp-inference-t85t0o",
                replacement_for="a1b2c3d4e5f6g7",
                purpose="replace a1b2c3d4e5f6g7 (Unreachable)",
            ),
            Intent(
                action="update",
                time=at(6),
                name="rpp-inference-a1",
                pod="h8i9j0k1l2m3n4",
                image="ghcr.io/example/inference:1.5.0",
                rollback=True,
                purpose="rolling image update",
            ),
        ),
        catalog_prices={"NVIDIA RTX A6000": 0.49, "NVIDIA GeForce RTX 4090": 0.69},
        spend=Spend(
            last_hour=1.38,
            today=17.9,
            this_month=412.06,
            read_at=at(600),
            error="RunPod listPodBilling: HTTP 503 " * 40,
            pods=tuple(f"{i:014d}" for i in range(SPEND_PODS_KEPT)),
        ),
        datacenter_replacements={"EU-RO-1": (at(1), at(2)), "US-TX-3": (at(3),)},
        backoff=Backoff(create_until=at(300), update_until=at(1800)),
        last_capacity_refusal=CapacityRefusal(
            time=at(20),
            gpu_types=("NVIDIA GeForce RTX 4090", "NVIDIA RTX A6000"),
            cloud="SECURE",
            datacenters=("EU-RO-1", "US-TX-3"),
            message="There are no longer any instances available with the requested spec.",
        ),
        rollout=Rollout(
            image="ghcr.io/example/inference:1.5.0",
            from_image="ghcr.io/example/inference:1.4.2",
            phase=RolloutPhase.BAKING,
            canary="x7k2m9q4w1z000",
            bake=BakeTally(
                started_at=at(60),
                last_at=at(600),
                error_loops=18,
                canary_error_sum=5.4,
                peers_error_sum=0.0,
                latency_loops=18,
                canary_latency_sum=4.5,
                peers_latency_sum=4.5,
                canary_requests=270.0,
                peers_requests=540.0,
                peers=2,
            ),
            verdict=Verdict(
                result=VerdictResult.FAILED,
                judged_by="metrics",
                message="error ratio 30.0% against 0.0% on the old pods " * 30,
                window=540,
                canary=Side(error_ratio=0.3, latency=0.25, requests=270),
                peers=Side(error_ratio=0.0, latency=0.25, requests=540),
            ),
            updated=1,
            total=3,
            updating=("x7k2m9q4w1z000",),
            waiting="the pool is busy (Warming)",
        ),
        writer="runpod-pool-controller-6d9f8b7c5d-x2k4q_4f6c1e2a",
    )


def through_json(status: PoolStatus) -> PoolStatus:
    return PoolStatus.from_stored(json.loads(json.dumps(status.stored())))


class TestRoundTrip:
    def test_status_with_every_field_set_round_trips_through_json_exactly(self) -> None:
        status = full_status()
        stored = status.stored()
        again = through_json(status)
        assert again == status
        assert again.stored() == stored

    def test_every_member_field_reaches_storage(self) -> None:
        stored = full_member(1).stored()
        assert set(stored) == {
            "podId", "name", "phase", "since", "slot", "datacenter", "gpuType", "image",
            "costPerHr", "createdAt", "lastProbe", "passStreak", "breaches", "flaggedRule",
            "flaggedReason", "replacementFor", "replacedBy", "drainReason", "update",
            "terminateRequestedAt", "terminateError", "missingLoops", "adopted", "hardFailures",
            "quarantine", "unconfirmedSince",
        }  # fmt: skip
        assert stored["since"] == "2026-01-01T00:01:41Z"
        assert list(stored["breaches"]) == ["ErrorRate", "SlowScrape", "Unreachable"]

    def test_timestamps_are_truncated_to_seconds_so_the_round_trip_stays_exact(self) -> None:
        member = full_member(0).replace(since=at(0.999))
        assert member.since == T0
        assert through_json(PoolStatus(members=(member,))).members[0] == member

    def test_naive_timestamp_is_refused_with_a_clear_error(self) -> None:
        with pytest.raises(ValueError, match="has no timezone"):
            HistoryEntry(time=dt.datetime(2026, 1, 1), action="create", outcome="ok")

    def test_absent_or_null_status_reads_as_an_empty_status(self) -> None:
        assert PoolStatus.from_stored(None) == PoolStatus()
        assert PoolStatus.from_stored({}) == PoolStatus()

    def test_whole_numbers_written_back_as_floats_are_read_as_whole_numbers(self) -> None:
        stored = full_status(1).stored()
        stored["desired"] = 3.0
        status = PoolStatus.from_stored(stored)
        assert (status.desired, type(status.desired)) == (3, int)
        assert status.stored()["desired"] == 3

    @pytest.mark.parametrize("cost", [0, 2, 0.0, 2.5])
    def test_numbers_keep_the_json_form_they_were_written_in(self, cost: float) -> None:
        status = PoolStatus(cost_per_hour=cost)
        again = through_json(status)
        assert json.dumps(again.stored()) == json.dumps(status.stored())
        assert repr(again.cost_per_hour) == repr(cost)

    def test_the_size_cases_set_every_field_of_every_status_record(self) -> None:
        # The sizes below are the worst case only while full_status sets every field: a
        # field added to the model and not to full_status fails here, not silently there.
        schema = PoolStatus.model_json_schema(by_alias=True)
        stored = full_status(2).stored()
        for name, record in {**schema["$defs"], "PoolStatus": schema}.items():
            fields = set(record.get("properties", {}))
            required = set(record.get("required", ()))
            instances = [o for o in _objects(stored) if required <= set(o) <= fields]
            seen = set().union(*map(set, instances)) if instances else set()
            assert fields <= seen, f"{name}: full_status leaves out {sorted(fields - seen)}"

    def test_fifty_members_with_every_field_set_serialize_under_75_kib(self) -> None:
        # Every field at once, more than a member holds in any phase: rpp/model/status.py
        # states this bound and the figure it measured.
        stored = full_status(50).stored()
        members = json.dumps(stored["members"], separators=(",", ":"))
        assert len(members.encode()) < 75 * 1024, len(members)

    def test_whole_status_at_fifty_full_members_and_full_history_stays_under_120_kib(
        self,
    ) -> None:
        stored = full_status(50).stored()
        assert len(stored["history"]) == HISTORY_LIMIT
        compact = json.dumps(stored, separators=(",", ":"))
        assert len(compact.encode()) < 120 * 1024, len(compact)


def _objects(data: object) -> list[dict[str, Any]]:
    """Every JSON object in `data`, at any depth."""
    if isinstance(data, dict):
        return [data, *(o for value in data.values() for o in _objects(value))]
    if isinstance(data, list):
        return [o for value in data for o in _objects(value)]
    return []


def _set_path(data: dict[str, Any], path: tuple[Any, ...], value: object) -> dict[str, Any]:
    data = copy.deepcopy(data)
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


M0, M1, M2 = r"status\.members\[0\]", r"status\.members\[1\]", r"status\.members\[2\]"
MALFORMED = {
    "since-not-timestamp": (
        ("members", 2, "since"),
        "yesterday",
        M2 + r"\.since: not a timestamp",
    ),
    "since-a-number": (("members", 0, "since"), 5, M0 + r"\.since: not a timestamp"),
    "unknown-phase": (("members", 1, "phase"), "Bogus", M1 + r"\.phase: unknown value 'Bogus'"),
    "slot-string": (("members", 1, "slot"), "8081", M1 + r"\.slot: expected a whole number"),
    "slot-bool": (("members", 1, "slot"), True, M1 + r"\.slot: expected a whole number"),
    "pod-id-missing": (("members", 0, "podId"), None, M0 + r"\.podId: required"),
    "probe-passed": (
        ("members", 0, "lastProbe", "passed"),
        "yes",
        M0 + r"\.lastProbe\.passed: expected true or false",
    ),
    "breach-start": (
        ("members", 0, "breaches", "Unreachable"),
        "soon",
        M0 + r"\.breaches\.Unreachable: not a timestamp",
    ),
    "updating-without-update": (
        ("members", 0, "update"),
        None,
        M0 + r"\.update: required while phase is Updating",
    ),
    "drain-reason": (("members", 0, "drainReason"), "boredom", M0 + r"\.drainReason: unknown"),
    "condition-status": (
        ("conditions", 0, "status"),
        "Yes",
        r"status\.conditions\[0\]\.status: unknown value 'Yes'",
    ),
    "replacement-time": (
        ("datacenterReplacements", "EU-RO-1", 1),
        "x",
        r"status\.datacenterReplacements\.EU-RO-1\[1\]: not a timestamp",
    ),
    "replacement-list": (
        ("datacenterReplacements", "EU-RO-1"),
        "x",
        r"status\.datacenterReplacements\.EU-RO-1: expected a list",
    ),
    "create-log-object": (
        ("createLog",),
        {},
        r"status\.createLog: expected a list, got an object",
    ),
    "member-not-object": (("members",), [1], M0 + r": expected an object, got a number"),
    "mode": (("mode",), "Chaos", r"status\.mode: unknown value 'Chaos'"),
    "cost-infinite": (
        ("costPerHour",),
        float("inf"),
        r"status\.costPerHour: expected a finite number",
    ),
}


@pytest.mark.parametrize(
    ("path", "value", "message"), list(MALFORMED.values()), ids=list(MALFORMED)
)
def test_malformed_status_names_the_path_and_the_fix(
    path: tuple[Any, ...], value: object, message: str
) -> None:
    stored = _set_path(full_status(3).stored(), path, value)
    with pytest.raises(StatusFormatError, match=message) as raised:
        PoolStatus.from_stored(stored)
    assert "fix or remove this field" in str(raised.value)


def test_a_pod_listed_twice_in_members_is_a_clear_error() -> None:
    stored = full_status(2).stored()
    stored["members"][1]["podId"] = stored["members"][0]["podId"]
    with pytest.raises(StatusFormatError, match=r"members\[1\]\.podId: pod .* listed twice"):
        PoolStatus.from_stored(stored)


def test_an_explicit_null_reads_as_not_set() -> None:
    stored = full_status(1).stored()
    stored["members"][0]["passStreak"] = None
    stored["members"][0]["slot"] = None
    stored["rollout"] = None
    status = PoolStatus.from_stored(stored)
    assert (status.members[0].pass_streak, status.members[0].slot, status.rollout) == (
        0,
        None,
        None,
    )


def test_the_stored_form_matches_the_generated_json_schema() -> None:
    schema = PoolStatus.model_json_schema(by_alias=True)
    jsonschema.validate(full_status(3).stored(), schema)
    member = schema["$defs"]["MemberRecord"]
    assert set(member["properties"]) == set(full_member(0).stored())
    since = member["properties"]["since"]
    assert (since["type"], since["format"]) == ("string", "date-time")


def test_status_that_is_not_an_object_is_a_clear_error() -> None:
    with pytest.raises(StatusFormatError, match="status: expected an object, got a list"):
        PoolStatus.from_stored([])


class TestConditions:
    def test_unchanged_status_keeps_last_transition_time_but_takes_new_reason(self) -> None:
        first = set_condition(
            (), type="Ready", status="True", reason="A", message="a", now=at(0), generation=1
        )
        second = set_condition(
            first, type="Ready", status="True", reason="B", message="b", now=at(60), generation=2
        )
        assert second[0].last_transition_time == at(0)
        assert (second[0].reason, second[0].message, second[0].observed_generation) == (
            "B",
            "b",
            2,
        )

    def test_changed_status_moves_last_transition_time(self) -> None:
        first = set_condition(
            (), type="Ready", status="True", reason="A", message="", now=at(0), generation=1
        )
        second = set_condition(
            first, type="Ready", status="False", reason="A", message="", now=at(60), generation=1
        )
        assert second[0].last_transition_time == at(60)

    def test_new_type_is_appended_and_existing_ones_keep_their_place(self) -> None:
        conditions: tuple[Condition, ...] = ()
        for kind in ("Ready", "NotActing", "Ready"):
            conditions = set_condition(
                conditions, type=kind, status="True", reason="R", message="", now=T0, generation=1
            )
        assert [c.type for c in conditions] == ["Ready", "NotActing"]

    def test_a_type_listed_twice_is_written_once_as_the_crds_map_list_demands(self) -> None:
        """A status stored under an older CRD (or edited by hand) may repeat a type; the
        API server refuses a status write that does (x-kubernetes-list-type: map)."""
        twice = tuple(
            Condition(type=kind, status="True", reason="R", last_transition_time=T0)
            for kind in ("Ready", "HostNotice", "Ready", "HostNotice")
        )
        conditions = set_condition(
            twice, type="Ready", status="False", reason="S", message="", now=at(60), generation=1
        )
        assert [(c.type, c.status) for c in conditions] == [
            ("Ready", "False"),
            ("HostNotice", "True"),
        ]
        stored = PoolStatus(conditions=twice).stored()
        assert any("Duplicate value" in p for p in status_problems(stored))
        fixed = PoolStatus(conditions=conditions).stored()
        assert status_problems(fixed) == []

    def test_condition_status_must_be_true_false_or_unknown(self) -> None:
        with pytest.raises(ValueError, match="'True', 'False' or 'Unknown'"):
            Condition(
                type="Ready",
                status="yes",  # type: ignore[arg-type]  # the wrong value under test
                reason="",
                message="",
                last_transition_time=T0,
            )

    def test_long_messages_are_bounded(self) -> None:
        status = PoolStatus().with_condition(
            type="CapacityUnavailable",
            status="True",
            reason="NoStock",
            message="x" * 5000,
            now=T0,
        )
        message = status.conditions[0].message
        assert len(message) == 1024
        assert message.endswith("...")


class TestHelpers:
    def test_history_keeps_only_the_newest_fifty_entries(self) -> None:
        status = PoolStatus()
        for i in range(HISTORY_LIMIT + 7):
            status = status.with_history(HistoryEntry(time=at(i), action="x", outcome=str(i)))
        assert len(status.history) == HISTORY_LIMIT
        assert [status.history[0].outcome, status.history[-1].outcome] == ["7", "56"]

    def test_plan_lists_each_effect_and_counts_it_for_the_planned_column(self) -> None:
        effects: list[Effect] = [
            CreatePod(pool="p", name="rpp-p-1", reason="below min"),
            TerminatePod(pod_id="a", name="rpp-p-0", reason="drained"),
            Wire(pod_id="b", slot=1),
        ]
        status = PoolStatus().with_plan(effects)
        assert status.planned == 3
        assert [(p.action, p.pod) for p in status.planned_actions] == [
            ("create", "rpp-p-1"),
            ("terminate", "a"),
            ("wire", "b"),
        ]
        assert status.planned_actions[1].detail == "terminate pod a (rpp-p-0): drained"

    def test_create_log_counts_the_last_hour_and_pruning_drops_older_attempts(self) -> None:
        status = PoolStatus()
        for seconds in (0, 1800, 3599):
            status = status.with_create_attempt(at(seconds), "created")
        now = at(3600)
        assert status.creates_in_last_hour(now) == 2
        assert [a.time for a in status.pruned(now).create_log] == [at(1800), at(3599)]

    def test_two_replacements_in_a_day_avoid_a_datacenter_for_24h_from_the_second(
        self,
    ) -> None:
        status = PoolStatus().with_datacenter_replacement("EU-RO-1", at(0))
        assert status.cooldown_datacenters(at(10)) == frozenset()
        status = status.with_datacenter_replacement("EU-RO-1", at(3600))
        assert status.cooldown_datacenters(at(7200)) == {"EU-RO-1"}
        day = 24 * 3600
        assert status.cooldown_until(at(7200)) == {"EU-RO-1": at(day + 3600)}
        assert status.cooldown_datacenters(at(day + 3599)) == {"EU-RO-1"}
        assert status.cooldown_datacenters(at(day + 3600)) == frozenset()
        assert status.pruned(at(2 * day)).datacenter_replacements == {"EU-RO-1": (at(3600),)}
        assert status.pruned(at(2 * day + 3600)).datacenter_replacements == {}

    def test_replacements_more_than_24h_apart_do_not_cool_a_datacenter_down(self) -> None:
        day = 24 * 3600
        status = PoolStatus().with_datacenter_replacement("EU-RO-1", at(0))
        status = status.with_datacenter_replacement("EU-RO-1", at(day + 1))
        assert status.cooldown_datacenters(at(day + 2)) == frozenset()

    def test_with_member_replaces_by_pod_id_or_appends_and_without_member_removes(self) -> None:
        a, b = full_member(0), full_member(1)
        status = PoolStatus().with_member(a).with_member(b)
        moved = a.replace(phase="Ready", update=None)
        status = status.with_member(moved)
        assert status.members == (moved, b)
        assert status.member(b.pod_id) == b
        assert status.without_member(a.pod_id).members == (b,)

    def test_backoff_blocks_until_its_deadline(self) -> None:
        backoff = Backoff(create_until=at(300))
        assert backoff.creates_blocked(at(299))
        assert not backoff.creates_blocked(at(300))
        assert not backoff.updates_blocked(at(0))


EFFECT_TEXTS = [
    pytest.param(
        CreatePod(
            pool="inference",
            name="rpp-inference-3",
            reason="replace x1",
            replacement_for="x1",
            gpu_types=("RTX 4090",),
            datacenters=("EU-RO-1", "US-TX-3"),
            cloud="SECURE",
        ),
        "create pod rpp-inference-3 for pool inference (replace x1), replacing x1; "
        "trying RTX 4090 in EU-RO-1, US-TX-3 (SECURE)",
        id="create",
    ),
    pytest.param(
        UpdatePod(pod_id="x1", name="n", image="img:2", from_image="img:1", reason="roll"),
        "update pod x1 (n) in place from img:1 to img:2: roll",
        id="update",
    ),
    pytest.param(
        UpdatePod(
            pod_id="x1", name="n", image="img:1", from_image="img:2", reason="bad", rollback=True
        ),
        "roll back pod x1 (n) in place from img:2 to img:1: bad",
        id="rollback",
    ),
    pytest.param(
        Unwire(pod_id="x1", slot=2, reason="unreachable"),
        "unwire pod x1 from slot 2: unreachable",
        id="unwire",
    ),
    pytest.param(
        WriteSlots(slots=((2, "b"), (1, "a"))), "write nginx slots: 1=a, 2=b", id="write-slots"
    ),
    pytest.param(
        RecordEvent(type="Warning", reason="PodFlagged", message="m"),
        "event Warning PodFlagged: m",
        id="event",
    ),
]


@pytest.mark.parametrize(("effect", "text"), EFFECT_TEXTS)
def test_effects_describe_themselves_for_would_lines_and_the_plan(effect: Any, text: str) -> None:
    assert effect.describe() == text
    assert PlannedAction.from_effect(effect).action == effect.action
