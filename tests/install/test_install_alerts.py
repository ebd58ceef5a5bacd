"""The alerts and the dashboard query metrics the controller really exports, and the alerts
fire when, and only when, the seed says they should.

The metric names come from `rpp.model.metric_names`, the one list the controller registers.
Prometheus' own promtool (Debian's prometheus package) parses every rule and every
dashboard query, and unit-tests every alert on synthetic series named from that list: each
is seen firing and seen quiet, and keeps the namespace and the pool it is about.
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
GRAFANA_VARIABLES = {"$__rate_interval": "2m", "$namespace": ".*", "$pool": ".*"}
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
    assert len(set(names)) == len(names) == 16


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
    assert variables == {"datasource", "namespace", "pool"}
    # Every pool panel keeps the pool's namespace apart: one controller may serve pools of
    # one name in several namespaces, and `max by (pool)` would merge them.
    for expr in dashboard_queries():
        for grouping in re.findall(r"\bby \(([^)]*)\)", expr):
            labels = {label.strip() for label in grouping.split(",")}
            assert "pool" not in labels or "pool_namespace" in labels, expr
        if 'pool=~"$pool"' in expr:
            assert 'pool_namespace=~"$namespace"' in expr, expr


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
    text = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{text}}}", "values": values}


def expected(alert: str, value: str, **labels: str) -> dict[str, Any]:
    """The alert as Prometheus renders it: the rule's labels and filled-in annotations."""
    rule = next(r for r in rules() if r["alert"] == alert)
    annotations = {}
    for key, text in rule["annotations"].items():
        for label, label_value in labels.items():
            text = text.replace(f"{{{{ $labels.{label} }}}}", label_value)
        # Prometheus renders a label the alert does not carry as empty.
        text = re.sub(r"\{\{ \$labels\.\w+ \}\}", "", text)
        annotations[key] = text.replace("{{ $value }}", value)
    return {"exp_labels": {**labels, **rule["labels"]}, "exp_annotations": annotations}


SHORT = "RunPodPoolShortOfReadyPods"
NOTICE = "RunPodPoolHostNotice"
CAPACITY = "RunPodPoolCapacityUnavailable"
KEPT = "RunPodPoolReplacementBlocked"
ROLLED = "RunPodPoolReleaseRolledBack"
DELETION = "RunPodPoolDeletionBlocked"
WRITES = "RunPodPoolStatusWriteFailing"
NO_LEADER = "RunPodPoolControllerNoLeader"
SPEND = "RunPodPoolSpendAboveCatalog"
# During a handover both replicas may export a pool's gauges for a loop (a standby exports
# none otherwise): the rules must not double-count, hence two instances in some series.
REPLICAS = [{"instance": "a"}, {"instance": "b"}]
NS = {"namespace": "runpod"}
# A pool's series: the controller's namespace (the scrape's) and the pool's own.
PNS = {**NS, "pool_namespace": "team-a"}


def at(minute: str, alert: str, *alerts: dict[str, Any]) -> dict[str, Any]:
    return {"eval_time": minute, "alertname": alert, "exp_alerts": list(alerts)}


def pool_alert_tests() -> list[dict[str, Any]]:
    return [
        {  # pool "inference" short of one Ready pod for 30m, pool "ok" never
            "interval": "1m",
            "input_series": [
                *(series(m.DESIRED_MIN, "2x40", pool="inference", **PNS, **r) for r in REPLICAS),
                *(series(m.READY, "1x40", pool="inference", **PNS, **r) for r in REPLICAS),
                series(m.DESIRED_MIN, "2x40", pool="ok", **PNS, instance="a"),
                series(m.READY, "2x40", pool="ok", **PNS, instance="a"),
            ],
            "alert_rule_test": [
                at("14m", SHORT),
                at("16m", SHORT, expected(SHORT, "1", pool="inference", **PNS)),
            ],
        },
        {  # a replacement that takes 12m (short from 6m to 18m) does not page
            "interval": "1m",
            "input_series": [
                series(m.DESIRED_MIN, "2x40", pool="inference", **PNS, instance="a"),
                series(m.READY, "2x5 1x12 2x20", pool="inference", **PNS, instance="a"),
            ],
            "alert_rule_test": [at("17m", SHORT), at("30m", SHORT)],
        },
        {  # two installs (namespaces a and b), each with a pool "inference" in its own
           # namespace: two alerts, each with its namespace
            "interval": "1m",
            "input_series": [
                series(m.DESIRED_MIN, "3x40", pool="inference", namespace="a",
                       pool_namespace="a", instance="x"),
                series(m.READY, "1x40", pool="inference", namespace="a", pool_namespace="a",
                       instance="x"),
                series(m.DESIRED_MIN, "2x40", pool="inference", namespace="b",
                       pool_namespace="b", instance="y"),
                series(m.READY, "1x40", pool="inference", namespace="b", pool_namespace="b",
                       instance="y"),
            ],
            "alert_rule_test": [
                at(
                    "16m",
                    SHORT,
                    expected(SHORT, "2", pool="inference", namespace="a", pool_namespace="a"),
                    expected(SHORT, "1", pool="inference", namespace="b", pool_namespace="b"),
                ),
            ],
        },
        {  # one controller serving pools named "inference" in team-a and team-b (both
           # replicas exporting during a handover): two alerts, each naming its namespace
            "interval": "1m",
            "input_series": [
                *(series(m.DESIRED_MIN, "3x40", pool="inference", **NS,
                         pool_namespace="team-a", **r) for r in REPLICAS),
                *(series(m.READY, "1x40", pool="inference", **NS, pool_namespace="team-a", **r)
                  for r in REPLICAS),
                series(m.DESIRED_MIN, "2x40", pool="inference", **NS, pool_namespace="team-b",
                       instance="a"),
                series(m.READY, "1x40", pool="inference", **NS, pool_namespace="team-b",
                       instance="a"),
            ],
            "alert_rule_test": [
                at(
                    "16m",
                    SHORT,
                    expected(SHORT, "2", pool="inference", **NS, pool_namespace="team-a"),
                    expected(SHORT, "1", pool="inference", **NS, pool_namespace="team-b"),
                ),
            ],
        },
        {  # conditions: 1 while True, for as long as each rule's `for:`; others never fire
            "interval": "1m",
            "input_series": [
                *(
                    series(m.CONDITION, "0 0 1x20", pool="inference", type="HostNotice",
                           **PNS, **r)
                    for r in REPLICAS
                ),
                series(m.CONDITION, "1x20", pool="inference", type="NotActing", **PNS,
                       instance="a"),
                series(m.CONDITION, "0 1x20", pool="batch", type="CapacityUnavailable", **PNS,
                       instance="a"),
                series(m.CONDITION, "0 1x3 0x17", pool="blip", type="CapacityUnavailable", **PNS,
                       instance="a"),
                series(m.CONDITION, "0 1x20", pool="gone", type="DeletionBlocked", **PNS,
                       instance="a"),
                series(m.CONDITION, "0 1x20", pool="kept", type="ReplacementBlocked", **PNS,
                       instance="a"),
                # a create backoff keeps a flagged pod 5m, then its replacement comes
                series(m.CONDITION, "0 1x5 0x15", pool="backoff", type="ReplacementBlocked",
                       **PNS, instance="a"),
                # a deletion that progresses: DeletionBlocked False, listing what is left
                series(m.CONDITION, "0x20", pool="going", type="DeletionBlocked", **PNS,
                       instance="a"),
            ],
            "alert_rule_test": [
                at("6m", NOTICE),
                at("8m", NOTICE, expected(NOTICE, "1", pool="inference", **PNS)),
                at("10m", CAPACITY),  # "blip" was refused for 3m, then a create succeeded
                at("12m", CAPACITY, expected(CAPACITY, "1", pool="batch", **PNS)),
                at("10m", DELETION),
                at("12m", DELETION, expected(DELETION, "1", pool="gone", **PNS)),
                at("15m", KEPT),
                at("17m", KEPT, expected(KEPT, "1", pool="kept", **PNS)),
            ],
        },
        {  # status writes refused from 1m on fire after 5m, once (two replicas in a handover);
           # a write refused for 2m (a spec edit racing it) and then landing never fires
            "interval": "1m",
            "input_series": [
                *(
                    series(m.STATUS_WRITE_FAILING, "0 1x20", pool="inference", **PNS, **r)
                    for r in REPLICAS
                ),
                series(m.STATUS_WRITE_FAILING, "0 1x2 0x18", pool="blip", **PNS, instance="a"),
                series(m.STATUS_WRITE_FAILING, "0x20", pool="ok", **PNS, instance="a"),
            ],
            "alert_rule_test": [
                at("5m", WRITES),
                at("7m", WRITES, expected(WRITES, "1", pool="inference", **PNS)),
                at("20m", WRITES, expected(WRITES, "1", pool="inference", **PNS)),
            ],
        },
        {  # a release rolled back fires at once, until it leaves RolledBack; other phases never
            "interval": "1m",
            "input_series": [
                *(
                    series(m.ROLLOUT_PHASE, "0 0 1x5 0x5", pool="inference", phase="RolledBack",
                           **PNS, **r)
                    for r in REPLICAS
                ),
                series(m.ROLLOUT_PHASE, "1x10", pool="inference", phase="Baking", **PNS,
                       instance="a"),
                series(m.ROLLOUT_PHASE, "0x10", pool="batch", phase="RolledBack", **PNS,
                       instance="a"),
            ],
            "alert_rule_test": [
                at("1m", ROLLED),
                at("2m", ROLLED, expected(ROLLED, "1", pool="inference", **PNS)),
                at("9m", ROLLED),
            ],
        },
        {  # the catalog priced each pool at $1.25/h for over a day; RunPod billed "inference"
           # $1.875/h (50 % above: fires after 1h), "ok" $1.375/h (10 %: never); "young" was
           # billed $6/h but has been priced for 10h only, so it has no day to compare yet
            "interval": "1m",
            "input_series": [
                *(series(m.COST_PER_HOUR, "1.25x1800", pool="inference", **PNS, **r)
                  for r in REPLICAS),
                series(m.SPEND_USD_TOTAL, "0+0.03125x1800", pool="inference", **PNS, instance="a"),
                series(m.SPEND_USD_TOTAL, "0x1800", pool="inference", **PNS, instance="b"),
                series(m.COST_PER_HOUR, "1.25x1800", pool="ok", **PNS, instance="a"),
                series(m.SPEND_USD_TOTAL, "0+0.02291666x1800", pool="ok", **PNS, instance="a"),
                series(m.COST_PER_HOUR, "_x1199 1.25x600", pool="young", **PNS, instance="a"),
                series(m.SPEND_USD_TOTAL, "_x1199 0+0.1x600", pool="young", **PNS, instance="a"),
            ],
            "alert_rule_test": [
                at("24h50m", SPEND),
                at("25h10m", SPEND, expected(SPEND, "1.5", pool="inference", **PNS)),
                at("29h", SPEND, expected(SPEND, "1.5", pool="inference", **PNS)),
            ],
        },
    ]  # fmt: skip


def leader(values: str, *, instance: str, namespace: str = "runpod") -> dict[str, str]:
    return series(m.LEADER, values, namespace=namespace, instance=instance)


def controller_alert_tests() -> list[dict[str, Any]]:
    return [
        {  # a leader and a standby: quiet; a 3m handover with no leader: quiet
            "interval": "1m",
            "input_series": [
                leader("1x10 0x3 0x20", instance="a"),
                leader("0x10 0x3 1x20", instance="b"),
            ],
            "alert_rule_test": [at("9m", NO_LEADER), at("15m", NO_LEADER), at("30m", NO_LEADER)],
        },
        {  # both replicas up, none leads (the Lease cannot be renewed) for 5m: pages
            "interval": "1m",
            "input_series": [leader("1x4 0x30", instance="a"), leader("0x34", instance="b")],
            "alert_rule_test": [
                at("8m", NO_LEADER),
                at("10m", NO_LEADER, expected(NO_LEADER, "0", **NS)),
            ],
        },
        {  # every replica of namespace "runpod" stops being scraped; "other" keeps its leader
            "interval": "1m",
            "input_series": [
                leader("1x4 stale", instance="a"),
                leader("0x4 stale", instance="b"),
                leader("1x40", instance="c", namespace="other"),
            ],
            "alert_rule_test": [
                at("8m", NO_LEADER),
                at("11m", NO_LEADER, expected(NO_LEADER, "1", **NS)),
            ],
        },
        {  # Prometheus has never scraped a controller (or not for a day): pages, no namespace
            "interval": "1m",
            "input_series": [series("up", "1x20", job="something-else")],
            "alert_rule_test": [
                at("4m", NO_LEADER), at("6m", NO_LEADER, expected(NO_LEADER, "1"))
            ],
        },
    ]  # fmt: skip


def alert_tests() -> list[dict[str, Any]]:
    return pool_alert_tests() + controller_alert_tests()


def test_every_alert_has_a_unit_test_that_fires_it_and_one_that_does_not() -> None:
    checks = [check for case in alert_tests() for check in case["alert_rule_test"]]
    for rule in rules():
        mine = [c for c in checks if c["alertname"] == rule["alert"]]
        assert any(c["exp_alerts"] for c in mine), f"{rule['alert']} is never seen firing"
        assert any(not c["exp_alerts"] for c in mine), f"{rule['alert']} is never seen quiet"


def test_alerts_fire_when_and_only_when_the_seed_says(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule_groups()}))
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": alert_tests()}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize("alert", [r["alert"] for r in rules()])
def test_each_alert_keeps_namespace_and_pool_and_says_where_to_look(alert: str) -> None:
    rule = next(r for r in rules() if r["alert"] == alert)
    assert rule["labels"]["severity"] in {"warning", "critical"}
    groupings = re.findall(r"\bby \(([^)]*)\)", rule["expr"])
    assert groupings, rule["expr"]
    pool_alert = "runpod_pool_leader" not in rule["expr"]
    keep = "namespace, pool_namespace, pool" if pool_alert else "namespace"
    assert set(groupings) == {keep}, rule["expr"]
    # A pool is named by its own namespace, the controller by the scrape's.
    where = "pool_namespace" if pool_alert else "namespace"
    assert f"{{{{ $labels.{where} }}}}" in rule["annotations"]["summary"]
    if pool_alert:
        assert "{{ $labels.pool_namespace }}/{{ $labels.pool }}" in rule["annotations"]["summary"]
    # Every kubectl hint names the namespace of what it looks at.
    hints = re.findall(
        rf"kubectl\s+(-n\s+\{{\{{ \$labels\.{where} \}}\}}\s+)?",
        rule["annotations"]["description"],
    )
    assert hints, alert
    assert all(hints), f"{alert}: a kubectl hint without -n {{{{ $labels.{where} }}}}"
