"""Structured logs: every record made inside a pool's reconcile names the pool as a field,
and both formats carry the fields (JSON as keys, text as key=value) without secrets.

The reconciles run the real controller loop against the simulated world on virtual
time, with something failing in every layer: a RunPod listing rate-limited (the client
retries), creates answered 5xx (act reports an unknown result), Prometheus queries with
no PROMETHEUS_URL (observe reports them off), and one pool whose reconcile raises (the
loop writes ReconcileFailed).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from rpp.adapters.logs import (
    FIELDS,
    JsonFormatter,
    TextFormatter,
    fields,
    layer_logger,
    pool_context,
)
from rpp.sim import faults
from rpp.sim.virtual_time import VirtualClock, run_virtual
from rpp.sim.world import API_KEY
from tests.controller.test_controller import break_pool
from tests.controller_kit import manifest, world

LAYERS = ("rpp.controller", "rpp.act", "rpp.observe", "rpp.adapters.runpod")


def ours(records: list[logging.LogRecord]) -> list[logging.LogRecord]:
    """Records of the controller's own layers (not the simulator, not httpx)."""
    return [r for r in records if r.name.startswith(LAYERS)]


def reconcile_with_failures(
    caplog: pytest.LogCaptureFixture, *, periodic: bool = False
) -> dict[str, list[Any]]:
    """Reconcile two pools once each; the records each reconcile made, by pool.

    `periodic`: through the periodic loop (both pools concurrently, after the listing
    shared by every pool, at INFO); otherwise one at a time as a spec change triggers it
    (the listing is the pool's own, rate-limited once, at DEBUG).
    """
    by_pool: dict[str, list[Any]] = {}

    async def body(clock: VirtualClock) -> None:
        queries = {"job": "x", "latencyQuery": 'avg by (runpod_pod) (x{job="$job"})'}
        w = world(
            clock,
            manifest("inference", prometheus=queries),
            manifest("batch", prometheus=queries),
        )
        break_pool(w, "inference", how="raise")
        w.cloud.faults.next("createPod", faults.ServerError(500), times=10)
        if periodic:
            caplog.clear()
            await w.loop()
            for record in ours(caplog.records):
                by_pool.setdefault(getattr(record, "pool", "(none)"), []).append(record)
        else:
            w.cloud.faults.next("listPods", faults.RateLimited(retry_after=1))
            for pool in ("inference", "batch"):
                caplog.clear()
                await w.controller.loop.reconcile_now(pool)
                by_pool[pool] = ours(caplog.records)
        await w.close()

    with caplog.at_level(logging.INFO if periodic else logging.DEBUG):
        run_virtual(body)
    return by_pool


@pytest.mark.parametrize("periodic", [True, False], ids=["periodic-loop", "spec-change"])
def test_every_record_inside_a_reconcile_carries_its_pool(
    caplog: pytest.LogCaptureFixture, periodic: bool
) -> None:
    by_pool = reconcile_with_failures(caplog, periodic=periodic)

    assert set(by_pool) == {"inference", "batch"}, {k: len(v) for k, v in by_pool.items()}
    for pool, records in by_pool.items():
        for record in records:
            assert getattr(record, "pool", None) == pool, (record.name, record.getMessage())
            assert not record.getMessage().startswith("pool ")  # a field, not a text prefix
    layers = {r.name for records in by_pool.values() for r in records}
    expected = set(LAYERS) - {"rpp.adapters.runpod"} if periodic else set(LAYERS)
    assert layers == expected, "every layer logged something during the reconciles"
    failed = [r for r in by_pool["inference"] if "the reconcile failed" in r.getMessage()]
    assert failed, "the broken pool's failure was logged"


def test_an_act_record_names_pod_effect_and_outcome_as_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    by_pool = reconcile_with_failures(caplog)

    created = [r for r in by_pool["batch"] if getattr(r, "effect", None) == "create"]
    assert created
    record = next(r for r in created if r.name == "rpp.act")
    assert record.levelno == logging.WARNING
    assert record.outcome == "unknown"
    assert record.pod.startswith("rpp-batch-")
    retried = [r for r in by_pool["inference"] + by_pool["batch"] if "retrying" in r.getMessage()]
    assert [getattr(r, "outcome", None) for r in retried] == ["rate_limited"]


def test_no_record_of_a_reconcile_shows_a_secret_in_either_format(
    caplog: pytest.LogCaptureFixture,
) -> None:
    by_pool = reconcile_with_failures(caplog)

    for formatter in (JsonFormatter(), TextFormatter()):
        text = "\n".join(formatter.format(r) for records in by_pool.values() for r in records)
        assert API_KEY not in text
        assert "sim-hf-token" not in text  # the pools' envFromSecret data


def record_for(**extra: str) -> logging.LogRecord:
    logger = layer_logger("rpp.act")
    captured: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            captured.append(record)

    handler = Keep()
    logger.addHandler(handler)
    try:
        with pool_context("inference"):
            logger.warning("create pod x: no GPU", extra=fields(**extra))
    finally:
        logger.removeHandler(handler)
    (record,) = captured
    return record


def test_json_format_writes_the_fields_as_keys() -> None:
    record = record_for(pod="rpp-inference-ab1", effect="create", outcome="refused")
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "create pod x: no GPU"
    assert entry["logger"] == "rpp.act"
    assert {key: entry[key] for key in FIELDS} == {
        "pool": "inference",
        "pod": "rpp-inference-ab1",
        "effect": "create",
        "outcome": "refused",
    }


def test_text_format_writes_the_fields_as_key_value_after_the_message() -> None:
    line = TextFormatter().format(record_for(pod="rpp-inference-ab1", effect="create"))
    assert line.endswith(
        "WARNING rpp.act: create pod x: no GPU pool=inference pod=rpp-inference-ab1 effect=create"
    )


def test_a_field_the_call_names_wins_over_the_bound_pool_and_unknown_fields_are_left_out() -> None:
    record = record_for(pool="batch")
    assert record.pool == "batch"  # type: ignore[attr-defined]
    assert not hasattr(record, "pod")
    assert json.loads(JsonFormatter().format(record)).keys() == {
        "time",
        "level",
        "logger",
        "message",
        "pool",
    }
