"""Argo CD's verdict on a RunPodPool: the shipped health check run the way Argo CD runs a
check registered in argocd-cm, for the GitOps tests.

What it follows (github.com/argoproj/argo-cd):

- util/lua/lua.go `runLuaWithResourceActionParameters`: Lua 5.1 (gopher-lua); a script from
  argocd-cm runs without the standard libraries (`resource.customizations.useOpenLibs` is
  off by default) except base, table, package and a safe os (`time`, `date`): here the
  script runs under lupa's Lua 5.1 in an environment holding only those, so a call to
  `string.*` or `math.*` fails here as it would there. `obj` is the resource decoded from
  JSON (numbers are Lua numbers, arrays 1-based tables, null is nil).
- `ExecuteHealthLua`: the returned table is the health; a status that is not one of
  Healthy, Progressing, Degraded, Suspended, Missing, Unknown becomes Unknown with
  "Lua returned an invalid health status".
- gitops-engine pkg/health `GetResourceHealth` answers "Pending deletion" (Progressing)
  for an object with a deletionTimestamp before any script runs.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lupa import lua51

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "deploy" / "gitops" / "argocd-health.lua"
KEY = "resource.customizations.health.runpodpool.ownego.com_RunPodPool"
CODES = frozenset({"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"})
# Lua 5.1's base library, as gopher-lua's OpenBase registers it.
BASE = [
    "assert",
    "collectgarbage",
    "dofile",
    "error",
    "getfenv",
    "getmetatable",
    "ipairs",
    "load",
    "loadfile",
    "loadstring",
    "next",
    "pairs",
    "pcall",
    "print",
    "rawequal",
    "rawget",
    "rawset",
    "select",
    "setfenv",
    "setmetatable",
    "tonumber",
    "tostring",
    "type",
    "unpack",
    "xpcall",
    "_VERSION",
]

_RUN = """
function(source, obj, base)
  local env = {table = table, os = {time = os.time, date = os.date}}
  for _, name in ipairs(base) do env[name] = _G[name] end
  env._G = env
  env.obj = obj
  local fn = assert(loadstring(source, "=argocd-health.lua"))
  setfenv(fn, env)
  return fn()
end
"""


@functools.cache
def _runtime() -> tuple[Any, Any]:
    lua = lua51.LuaRuntime(unpack_returned_tuples=True, register_eval=False)
    return lua, lua.eval(_RUN)


def argo_health(obj: Mapping[str, Any], script: str | None = None) -> tuple[str, str]:
    """(status, message) Argo CD shows for `obj` with the shipped script (or `script`)."""
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return "Progressing", "Pending deletion"
    lua, run = _runtime()
    source = SCRIPT.read_text() if script is None else script
    # Lua tables built from Python, recursively: arrays 1-based, as Argo CD decodes JSON.
    hs = run(source, lua.table_from(_plain(obj), recursive=True), lua.table_from(BASE))
    if hs is None:
        return "", ""  # Argo CD: no health at all
    status, message = hs["status"], hs["message"]
    if status not in CODES:
        return "Unknown", "Lua returned an invalid health status"
    return str(status), "" if message is None else str(message)


def _plain(value: Any) -> Any:
    """JSON as Argo CD decodes it: mappings and sequences become dicts and lists."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
