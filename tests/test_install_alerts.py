"""The alerts and the dashboard query metrics the controller really exports, and the alerts
fire when, and only when, the seed says they should.

The metric names come from `rpp.model.metric_names`, the one list the controller registers.
Prometheus' own promtool (Debian's prometheus package) parses every rule and every
dashboard query, and unit-tests the four alerts on synthetic series named from that list.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rpp.adapters.runpod.call_metrics import ApiCallMetrics
from rpp.controller.pool_metrics import PoolMetrics
from rpp.model import metric_names as m
from tests.fixtures_install import ROOT, example, find

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
DASHBOARD = ROOT / "deploy" / "grafana-dashboard.json"
# Grafana's variables, replaced by what Grafana would send, so promtool can parse the query.
GRAFANA_VARIABLES = {"$__rate_interval": "2m", "$pool": ".*"}
METRIC = re.compile(r"\brunpod_[a-z0-9_]+\b")


def rule_groups() -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = find(
        example("examples/prometheus-rules.yaml"), "PrometheusRule"
    )["spec"]["groups"]
    return groups


def rules() -> list[dict[str, Any]]:
    return [rule for group in rule_groups() for rule in group["rules"]]


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=60
    )


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_metric_names_are_what_prometheus_client_exports() -> None:
    registry = CollectorRegistry()
    kinds = {"gauge": Gauge, "counter": Counter, "histogram": Histogram}
    for spec in m.SPECS:
        metric = kinds[spec.kind](spec.name, spec.help, spec.labels, registry=registry)
        child = (
            metric.labels(*(f"x{i}" for i in range(len(spec.labels)))) if spec.labels else metric
        )
        if spec.kind == "histogram":
            child.observe(0.1)
        elif spec.kind == "counter":
            child.inc()
        else:
            child.set(1)
    text = generate_latest(registry).decode()
    exported = {
        sample.name
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.name.endswith("_created")
    }
    assert exported == m.queryable_names()
    names = [spec.name for spec in m.SPECS]
    assert len(set(names)) == len(names) == 13


def test_the_controllers_registries_register_exactly_the_listed_metrics() -> None:
    """What the process will serve on /metrics: the pool metrics and the RunPod API counter."""
    registry = CollectorRegistry()
    PoolMetrics(registry)
    ApiCallMetrics(registry)
    text = generate_latest(registry).decode()
    # The parser names a counter's family without its _total.
    families = {family.name for family in text_string_to_metric_families(text)}
    listed = {s.name.removesuffix("_total") if s.kind == "counter" else s.name for s in m.SPECS}
    assert families == listed


def test_rules_and_dashboard_query_only_exported_metrics() -> None:
    known = m.queryable_names()
    exprs = [rule["expr"] for rule in rules()] + dashboard_queries()
    for expr in exprs:
        used = set(METRIC.findall(expr))
        assert used, expr
        assert used <= known, f"{expr}: {sorted(used - known)} are not exported"


def test_dashboard_shows_every_exported_metric() -> None:
    used = {name for expr in dashboard_queries() for name in METRIC.findall(expr)}
    for spec in m.SPECS:
        assert set(spec.series_names()) & used, f"no panel shows {spec.name}"


def test_dashboard_panels_are_complete() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    titles = {panel["title"] for panel in dashboard["panels"]}
    assert {
        "Ready vs desired",
        "Members by phase",
        "Cost per hour",
        "Conditions",
        "Actions",
        "RunPod API calls and errors",
        "Reconcile time",
        "Release phase",
        "Rollbacks",
    } <= titles
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["description"], panel["title"]
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert variables == {"datasource", "pool"}


def test_promtool_parses_every_rule_and_dashboard_query(tmp_path: Path) -> None:
    recording = []
    for i, expr in enumerate(dashboard_queries()):
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        recording.append({"record": f"dashboard:query_{i}", "expr": expr})
    groups = [*rule_groups(), {"name": "dashboard", "rules": recording}]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    result = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules()) + len(recording)} rules found" in result.stdout


def test_promtool_refuses_a_broken_rule(tmp_path: Path) -> None:
    """Guards the guard: promtool really parses the expressions."""
    broken = {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "max by (pool) ("}]}]}
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(broken))
    assert promtool("check", "rules", "rules.yaml", cwd=tmp_path).returncode != 0


def series(name: str, values: str, **labels: str) -> dict[str, str]:
    # Both controller replicas export the pool gauges: the rules must not double-count.
    text = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{text}}}", "values": values}


def expected(alert: str, value: str, **labels: str) -> dict[str, Any]:
    """The alert as Prometheus renders it: the rule's labels and filled-in annotations."""
    rule = next(r for r in rules() if r["alert"] == alert)
    annotations = {
        key: text.replace("{{ $labels.pool }}", labels["pool"]).replace("{{ $value }}", value)
        for key, text in rule["annotations"].items()
    }
    return {"exp_labels": {**labels, **rule["labels"]}, "exp_annotations": annotations}


def alert_tests() -> list[dict[str, Any]]:
    short = "RunPodPoolShortOfReadyPods"
    notice = "RunPodPoolHostNotice"
    capacity = "RunPodPoolCapacityUnavailable"
    rolled = "RunPodPoolReleaseRolledBack"
    replicas = [{"instance": "a"}, {"instance": "b"}]
    return [
        {  # pool "inference" short of one Ready pod for 30m, pool "ok" never
            "interval": "1m",
            "input_series": [
                *(series(m.DESIRED_MIN, "2x40", pool="inference", **r) for r in replicas),
                *(series(m.READY, "1x40", pool="inference", **r) for r in replicas),
                series(m.DESIRED_MIN, "2x40", pool="ok", instance="a"),
                series(m.READY, "2x40", pool="ok", instance="a"),
            ],
            "alert_rule_test": [
                {"eval_time": "14m", "alertname": short, "exp_alerts": []},
                {"eval_time": "16m", "alertname": short,
                 "exp_alerts": [expected(short, "1", pool="inference")]},
            ],
        },
        {  # a replacement that takes 12m (short from 6m to 18m) does not page
            "interval": "1m",
            "input_series": [
                series(m.DESIRED_MIN, "2x40", pool="inference", instance="a"),
                series(m.READY, "2x5 1x12 2x20", pool="inference", instance="a"),
            ],
            "alert_rule_test": [
                {"eval_time": "17m", "alertname": short, "exp_alerts": []},
                {"eval_time": "30m", "alertname": short, "exp_alerts": []},
            ],
        },
        {  # conditions: 1 while True; other condition types and False do not fire
            "interval": "1m",
            "input_series": [
                *(
                    series(m.CONDITION, "0 0 1x10", pool="inference", type="HostNotice", **r)
                    for r in replicas
                ),
                series(m.CONDITION, "1x10", pool="inference", type="NotActing", instance="a"),
                series(m.CONDITION, "0 1x10", pool="batch", type="CapacityUnavailable",
                       instance="a"),
            ],
            "alert_rule_test": [
                {"eval_time": "1m", "alertname": notice, "exp_alerts": []},
                {"eval_time": "3m", "alertname": notice,
                 "exp_alerts": [expected(notice, "1", pool="inference")]},
                {"eval_time": "0m", "alertname": capacity, "exp_alerts": []},
                {"eval_time": "2m", "alertname": capacity,
                 "exp_alerts": [expected(capacity, "1", pool="batch")]},
            ],
        },
        {  # a release rolled back fires until it leaves RolledBack; other phases never
            "interval": "1m",
            "input_series": [
                *(
                    series(m.ROLLOUT_PHASE, "0 0 1x5 0x5", pool="inference", phase="RolledBack",
                           **r)
                    for r in replicas
                ),
                series(m.ROLLOUT_PHASE, "1x10", pool="inference", phase="Baking", instance="a"),
                series(m.ROLLOUT_PHASE, "0x10", pool="batch", phase="RolledBack", instance="a"),
            ],
            "alert_rule_test": [
                {"eval_time": "1m", "alertname": rolled, "exp_alerts": []},
                {"eval_time": "4m", "alertname": rolled,
                 "exp_alerts": [expected(rolled, "1", pool="inference")]},
                {"eval_time": "9m", "alertname": rolled, "exp_alerts": []},
            ],
        },
    ]  # fmt: skip


def test_alerts_fire_when_and_only_when_the_seed_says(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule_groups()}))
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": alert_tests()}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize("alert", [r["alert"] for r in rules()])
def test_each_alert_has_a_summary_severity_and_the_seeds_expression(alert: str) -> None:
    rule = next(r for r in rules() if r["alert"] == alert)
    assert rule["labels"]["severity"] in {"warning", "critical"}
    assert "{{ $labels.pool }}" in rule["annotations"]["summary"]
    seed = {
        "RunPodPoolShortOfReadyPods": (
            "max by (pool) (runpod_pool_desired_min) - max by (pool) (runpod_pool_ready) > 0"
        ),
        "RunPodPoolHostNotice": 'max by (pool) (runpod_pool_condition{type="HostNotice"}) > 0',
        "RunPodPoolCapacityUnavailable": (
            'max by (pool) (runpod_pool_condition{type="CapacityUnavailable"}) > 0'
        ),
        "RunPodPoolReleaseRolledBack": (
            'max by (pool) (runpod_pool_rollout_phase{phase="RolledBack"}) > 0'
        ),
    }
    assert rule["expr"] == seed[alert]
