"""The install and operating docs: both install paths end to end, every condition and every
alert explained, and every link between the docs and the repository resolving."""

from __future__ import annotations

import re

import pytest

from rpp.decide.state.conditions import ALL_CONDITIONS
from tests.fixtures_install import ROOT, example, find
from tests.install.test_install_manifests import SEED_INSTALL_FILES

# The reasons a CreateBlocked condition can carry, read from the safeguards themselves.
CREATE_BLOCKED_REASONS = sorted(
    set(
        re.findall(
            r'Block\(\s*"([A-Za-z]+)"', (ROOT / "rpp/decide/capacity/safeguards.py").read_text()
        )
    )
)


def doc(name: str) -> str:
    return (ROOT / "docs" / name).read_text()


def relative_links(markdown: str) -> list[str]:
    return [
        target.split("#")[0]
        for target in re.findall(r"\]\(([^)\s]+)\)", markdown)
        if not target.startswith(("http://", "https://", "#"))
    ]


def test_install_doc_walks_both_paths_through_every_file() -> None:
    text = doc("install.md")
    for name in SEED_INSTALL_FILES:
        assert name in text, name
    for step in (
        "kubectl create namespace runpod",
        "--from-literal=RUNPOD_API_KEY=",
        "helm install rpp oci://ghcr.io/ownego/charts/runpod-pool-controller",
        "kubectl -n runpod get rpp -o wide",
        "grep 'would:'",
        "dryRun: false",
        "helm/runpod-pool-controller/values.yaml",
    ):
        assert step in text, step


def test_install_doc_says_the_resources_await_a_measurement() -> None:
    text = doc("install.md")
    assert "## Resources" in text
    assert "5 and 50 pools of 20 members" in text
    deployment = find(example("deploy/controller.yaml"), "Deployment")
    limits = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert f"cpu: {limits['cpu']}" in text
    assert f"memory: {limits['memory']}" in text


def section(text: str, heading: str) -> str:
    """The text under a Markdown heading, up to the next heading of its level or above."""
    level = heading.split(" ")[0]
    assert f"\n{heading}\n" in text, f"no heading {heading!r}"
    body = text.split(f"\n{heading}\n", 1)[1]
    ends = [body.find(f"\n{'#' * n} ") for n in range(1, len(level) + 1)]
    return body[: min([e for e in ends if e >= 0], default=len(body))]


@pytest.mark.parametrize("condition", ALL_CONDITIONS)
def test_operating_doc_explains_each_condition(condition: str) -> None:
    body = section(doc("operating.md"), f"### {condition}")
    # What it means, and what a human should do.
    assert "**Means:**" in body, condition
    assert "**Do:**" in body, condition


def test_operating_doc_explains_each_reason_a_create_is_blocked() -> None:
    assert set(CREATE_BLOCKED_REASONS) >= {"MaxPodsReached", "CostCapReached"}
    text = doc("operating.md")
    blocked = text.split("\n### CreateBlocked\n", 1)[1].split("\n### ", 1)[0]
    for reason in CREATE_BLOCKED_REASONS:
        body = section(blocked, f"#### {reason}")
        assert "**Means:**" in body, reason
        assert "**Do:**" in body, reason


def test_runbooks_have_a_section_per_alert_that_the_rule_links_to() -> None:
    runbooks = doc("runbooks.md")
    rules = find(example("examples/prometheus-rules.yaml"), "PrometheusRule")
    for rule in rules["spec"]["groups"][0]["rules"]:
        # GitHub's anchor for a heading "## RunPodPoolHostNotice" is its lowercase text.
        anchor = rule["alert"].lower()
        assert f"\n## {rule['alert']}\n" in runbooks
        assert rule["annotations"]["runbook_url"].endswith(f"docs/runbooks.md#{anchor}")
        assert rule["annotations"]["summary"]


def test_runbooks_say_how_long_each_alert_waits_as_the_rule_does() -> None:
    table = {
        row[0]: row
        for row in (
            [cell.strip() for cell in line.strip("|").split("|")]
            for line in doc("runbooks.md").splitlines()
            if line.startswith("| RunPodPool")
        )
    }
    rules = find(example("examples/prometheus-rules.yaml"), "PrometheusRule")["spec"]["groups"]
    for rule in rules[0]["rules"]:
        name, severity, wait, why = table[rule["alert"]]
        assert severity == rule["labels"]["severity"], name
        assert wait == rule.get("for", "none"), name
        assert len(why) > 40, name
    assert set(table) == {r["alert"] for r in rules[0]["rules"]}


@pytest.mark.parametrize("name", ["install.md", "operating.md", "runbooks.md"])
def test_doc_links_resolve(name: str) -> None:
    for link in relative_links(doc(name)):
        assert (ROOT / "docs" / link).resolve().exists(), f"{name}: {link}"
