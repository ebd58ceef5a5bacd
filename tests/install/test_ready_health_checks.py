"""The Argo CD health check shipped in deploy/gitops/argocd-health.lua, run as Argo CD runs
a check from argocd-cm (tests/argo_lua.py: Lua 5.1, without the string and math
libraries), on statuses written by hand for each rule; tests/install/test_gitops_health.py runs it
on pools the controller really produces. docs/operating.md shows the file verbatim."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.argo_lua import KEY, SCRIPT, argo_health

ROOT = Path(__file__).parents[2]


def pool(generation: int, *conditions: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": "inference", "generation": generation},
        "status": {
            "observedGeneration": 2,
            "conditions": [
                {"type": t, "status": s, "reason": r, "message": f"{t} {r}"}
                for t, s, r in conditions
            ],
        },
    }


def doc_snippets() -> list[dict[str, Any]]:
    doc = (ROOT / "docs" / "operating.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", doc, flags=re.S)
    return [yaml.safe_load(b) for b in blocks if KEY in b]


def test_the_argocd_cm_snippet_in_operating_md_is_the_shipped_file_verbatim() -> None:
    (config,) = doc_snippets()
    assert config["data"][KEY] == SCRIPT.read_text()


def test_operating_md_says_where_the_shipped_file_is() -> None:
    assert "deploy/gitops/argocd-health.lua" in (ROOT / "docs" / "operating.md").read_text()


NOT_RECONCILING = ("Reconciling", "False", "Reconciled")
NOT_STALLED = ("Stalled", "False", "NotStalled")


@pytest.mark.parametrize(
    ("conditions", "shown"),
    [
        ((("Ready", "True", "PodsReady"), NOT_RECONCILING, NOT_STALLED), ("Healthy", "Ready")),
        (
            (
                ("Ready", "False", "PodsNotReady"),
                ("Reconciling", "True", "PodsNotReady"),
                NOT_STALLED,
            ),
            ("Progressing", "Reconciling"),
        ),
        (
            (("Ready", "True", "PodsReady"), ("Reconciling", "True", "RollingOut"), NOT_STALLED),
            ("Progressing", "Reconciling"),
        ),
        (
            (
                ("Ready", "False", "InvalidSpec"),
                NOT_RECONCILING,
                ("Stalled", "True", "InvalidSpec"),
            ),
            ("Degraded", "Stalled"),
        ),
        (
            (("Ready", "True", "PodsReady"), NOT_RECONCILING, ("Stalled", "True", "UpdateFailed")),
            ("Degraded", "Stalled"),
        ),
    ],
)
def test_argo_cd_shows_stalled_as_degraded_and_reconciling_as_progressing(
    conditions: tuple[tuple[str, str, str], ...], shown: tuple[str, str]
) -> None:
    status, by = shown
    kind = next(c for c in conditions if c[0] == by)
    assert argo_health(pool(2, *conditions)) == (status, f"{kind[0]} {kind[2]}")


@pytest.mark.parametrize(
    ("ready", "shown"),
    [
        (("True", "PodsReady"), "Healthy"),
        (("True", "DryRun"), "Healthy"),
        (("False", "PodsNotReady"), "Progressing"),
        (("False", "Deleting"), "Progressing"),
        (("False", "NotActing"), "Degraded"),
        (("False", "InvalidSpec"), "Degraded"),
        (("False", "ReconcileFailed"), "Degraded"),
    ],
)
def test_a_status_from_before_reconciling_and_stalled_is_judged_by_ready_alone(
    ready: tuple[str, str], shown: str
) -> None:
    """What a 0.2 controller wrote, until the upgraded one writes the pool again."""
    status, reason = ready
    cond = ("Ready", status, reason)
    assert argo_health(pool(2, ("NotActing", "False", "Acting"), cond)) == (
        shown,
        f"Ready {reason}",
    )


def test_argo_cd_waits_for_the_controller_to_see_the_latest_spec() -> None:
    shown, message = argo_health(pool(3, ("Ready", "True", "PodsReady"), NOT_RECONCILING))
    assert shown == "Progressing"
    assert "latest spec" in message


def test_argo_cd_waits_for_a_pool_without_status() -> None:
    assert argo_health({"metadata": {"generation": 1}})[0] == "Progressing"


def test_the_check_runs_without_the_libraries_argo_cd_leaves_out() -> None:
    """Argo CD gives a check from argocd-cm no string or math library: the runner here
    does the same, so a script that used one would fail this suite, not a cluster."""
    with pytest.raises(Exception, match="string"):
        argo_health(pool(2), script='return {status = string.lower("Healthy")}')
    assert "string." not in SCRIPT.read_text()
    assert "math." not in SCRIPT.read_text()
