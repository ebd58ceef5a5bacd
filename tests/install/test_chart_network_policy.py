"""The chart's NetworkPolicy, judged as Kubernetes judges one: who may reach which port of
the controller's pods once it is on.

`helm test`'s pod asks /healthz through the Service, whose one port leads to the pods' http
port, the port `networkPolicy.metricsFrom` guards; with metricsFrom set it must still be let
in, and nobody else but the named peers. `admits` follows the NetworkPolicy API
(networking.k8s.io/v1): a policy isolates the pods its podSelector selects in its own
namespace; an ingress rule lets a connection in when one of its ports matches (none listed:
every port; a named port is the target container's port of that name; protocol TCP unless
given; endPort for ranges) and one of its peers matches (no `from`: every source); a peer
with a podSelector alone means pods of the policy's namespace, a namespaceSelector alone
every pod of the selected namespaces, both together the selected pods of those
namespaces; an ipBlock names addresses, never a pod by its labels, so it matches none here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.fixtures_install import NAMESPACE, find, objects, render


@dataclass(frozen=True)
class Source:
    """A pod that opens a connection: its labels, namespace and that namespace's labels."""

    labels: dict[str, str]
    namespace: str
    namespace_labels: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Every namespace carries its name as a label (Kubernetes 1.21+).
        self.namespace_labels.setdefault("kubernetes.io/metadata.name", self.namespace)


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector: matchLabels and matchExpressions all hold; empty selects all."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or []
        held = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not held:
            return False
    return True


def peer_matches(peer: dict[str, Any], source: Source, policy_namespace: str) -> bool:
    if "ipBlock" in peer:
        return False
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], source.namespace_labels):
            return False
    elif source.namespace != policy_namespace:
        return False
    return selects(peer.get("podSelector") or {}, source.labels)


def port_matches(rule_port: dict[str, Any], number: int, container: dict[str, Any]) -> bool:
    if rule_port.get("protocol", "TCP") != "TCP":
        return False
    port = rule_port.get("port")
    if port is None:
        return True
    if isinstance(port, str):
        named = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
        return named.get(port) == number
    return bool(port <= number <= rule_port.get("endPort", port))


def admits(
    policy: dict[str, Any],
    *,
    source: Source,
    target_labels: dict[str, str],
    container: dict[str, Any],
    port: int,
) -> bool:
    """Whether `policy` lets `source` open a TCP connection to `port` of the target pod."""
    namespace = policy["metadata"]["namespace"]
    spec = policy["spec"]
    if not selects(spec["podSelector"], target_labels) or "Ingress" not in spec["policyTypes"]:
        return True  # the policy does not isolate this pod's ingress
    for rule in spec.get("ingress") or []:
        ports = rule.get("ports")
        if ports and not any(port_matches(p, port, container) for p in ports):
            continue
        peers = rule.get("from")
        if not peers or any(peer_matches(p, source, namespace) for p in peers):
            return True
    return False


PROMETHEUS = Source({"app.kubernetes.io/name": "prometheus"}, "monitoring", {"name": "monitoring"})
METRICS_FROM: dict[str, list[dict[str, Any]]] = {
    "a namespace": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}],
    "pods of a namespace": [
        {
            "namespaceSelector": {"matchLabels": {"name": "monitoring"}},
            "podSelector": {
                "matchExpressions": [
                    {"key": "app.kubernetes.io/name", "operator": "In", "values": ["prometheus"]}
                ]
            },
        }
    ],
    "addresses": [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
}


class Chart:
    """The rendered objects `helm test` involves: the policy, the pods, the Service."""

    def __init__(self, metrics_from: list[dict[str, Any]]) -> None:
        values = {"networkPolicy": {"enabled": True, "metricsFrom": metrics_from}}
        objs = objects(render(values))
        self.policy = find(objs, "NetworkPolicy")
        template = find(objs, "Deployment")["spec"]["template"]
        self.controller_labels: dict[str, str] = template["metadata"]["labels"]
        [self.container] = template["spec"]["containers"]
        [self.test_pod] = [o for o in objs if o["kind"] == "Pod"]
        self.service = find(objs, "Service")

    def port_called_by_the_test(self) -> int:
        """The URL's Service port, followed to the container port it targets."""
        url = urlsplit(self.test_pod["spec"]["containers"][0]["command"][-1])
        assert url.hostname == f"{self.service['metadata']['name']}.{NAMESPACE}.svc"
        [service_port] = [p for p in self.service["spec"]["ports"] if p["port"] == url.port]
        target = service_port["targetPort"]
        named = {p["name"]: p["containerPort"] for p in self.container["ports"]}
        return int(named[target] if isinstance(target, str) else target)

    def admits(self, source: Source, port: int) -> bool:
        return admits(
            self.policy,
            source=source,
            target_labels=self.controller_labels,
            container=self.container,
            port=port,
        )


@pytest.mark.parametrize("peers", list(METRICS_FROM), ids=list(METRICS_FROM))
def test_helm_test_reaches_healthz_through_the_service_with_metrics_from_set(peers: str) -> None:
    chart = Chart(METRICS_FROM[peers])
    port = chart.port_called_by_the_test()
    assert port == 8080  # the guarded http port, not the open probe port
    test_pod = Source(chart.test_pod["metadata"]["labels"], NAMESPACE)
    assert chart.admits(test_pod, port)


@pytest.mark.parametrize("peers", list(METRICS_FROM), ids=list(METRICS_FROM))
def test_only_the_named_peers_and_the_test_pod_reach_the_metrics_port(peers: str) -> None:
    chart = Chart(METRICS_FROM[peers])
    port = chart.port_called_by_the_test()
    test_labels = chart.test_pod["metadata"]["labels"]
    neighbour = Source({"app": "batch-worker"}, NAMESPACE)
    assert not chart.admits(neighbour, port)
    # The test's labels let a pod in from the release's namespace only.
    assert not chart.admits(Source(test_labels, "elsewhere"), port)
    # Another release's test pod in the same namespace is not this one's.
    other = {**test_labels, "app.kubernetes.io/instance": "other"}
    assert not chart.admits(Source(other, NAMESPACE), port)
    # The kubelet's probes (and anyone) still reach the probe port.
    assert chart.admits(neighbour, 8081)
    assert chart.admits(PROMETHEUS, port) == (peers != "addresses")


def test_without_metrics_from_everyone_reaches_both_ports() -> None:
    chart = Chart([])
    anyone = Source({"app": "anything"}, "elsewhere")
    assert chart.admits(anyone, chart.port_called_by_the_test())
    assert chart.admits(anyone, 8081)


def test_the_judge_applies_label_selectors_and_ports_as_kubernetes_does() -> None:
    """Guards the guard: each clause of the API's semantics refuses what it should."""
    labels = {"app": "web", "tier": "front"}
    assert selects({}, labels)
    assert selects({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, labels)
    assert not selects({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, labels)
    assert not selects(
        {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, labels
    )
    assert not selects({"matchLabels": {"app": "db"}}, labels)
    source = Source(labels, "shop")
    assert not peer_matches({"podSelector": {}}, source, "other")
    assert peer_matches({"namespaceSelector": {}}, source, "other")
    named = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "shop"}}}
    assert peer_matches(named, source, "other")
    container = {"ports": [{"name": "http", "containerPort": 8080}]}
    assert port_matches({"port": "http"}, 8080, container)
    assert not port_matches({"port": "http", "protocol": "UDP"}, 8080, container)
    assert not port_matches({"port": "health"}, 8080, container)
    assert port_matches({"port": 8000, "endPort": 8100}, 8080, container)
