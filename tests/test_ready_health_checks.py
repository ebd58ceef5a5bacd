"""The Argo CD health check docs/operating.md gives for a RunPodPool, run under LuaJIT
(Argo CD runs Lua 5.1) on pools as the controller writes them, so what the doc promises
(Healthy, Progressing, Degraded) is what Argo CD would show."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from lupa import luajit21

ROOT = Path(__file__).parents[1]
KEY = "resource.customizations.health.runpodpool.ownego.com_RunPodPool"


def health_script() -> str:
    doc = (ROOT / "docs" / "operating.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", doc, flags=re.S)
    (config,) = [yaml.safe_load(b) for b in blocks if KEY in b]
    script: str = config["data"][KEY]
    return script


def argo_health(pool: dict[str, Any]) -> tuple[str, str]:
    """What Argo CD would show: the script's `hs`, with `obj` the pool as JSON."""
    lua = luajit21.LuaRuntime(unpack_returned_tuples=True)
    to_lua = lua.eval(
        "function(py) local function conv(v) "
        "  if python.builtins.isinstance(v, python.builtins.dict) then "
        "    local t = {} for k in python.iter(v) do t[k] = conv(v[k]) end return t "
        "  elseif python.builtins.isinstance(v, python.builtins.list) then "
        "    local t = {} for i, x in python.enumerate(v) do t[i + 1] = conv(x) end return t "
        "  end return v end return conv(py) end"
    )
    health = lua.execute(f"return function(obj) {health_script()} end")
    hs = health(to_lua(pool))
    return str(hs["status"]), str(hs["message"])


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
def test_argo_cd_shows_a_pool_by_its_ready_condition(ready: tuple[str, str], shown: str) -> None:
    status, reason = ready
    cond = ("Ready", status, reason)
    assert argo_health(pool(2, ("NotActing", "False", "Acting"), cond)) == (
        shown,
        f"Ready {reason}",
    )


def test_argo_cd_waits_for_the_controller_to_see_the_latest_spec() -> None:
    shown, message = argo_health(pool(3, ("Ready", "True", "PodsReady")))
    assert shown == "Progressing"
    assert "latest spec" in message


def test_argo_cd_waits_for_a_pool_without_status() -> None:
    assert argo_health({"metadata": {"generation": 1}})[0] == "Progressing"
