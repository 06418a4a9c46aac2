"""Custom health checks in Lua, from ``argocd-cm``, run the way Argo CD runs them.

Argo CD lets an admin replace the health check of a kind with a Lua script,
``resource.customizations.health.<group>_<kind>`` (``<kind>`` alone for the core group).
The script sees the live object as the global ``obj`` and returns a table ``hs`` with
``status`` (one of the six health codes) and ``message`` (``util/lua/lua.go``). Its
verdict comes before the built-in check of that kind (gitops-engine
``GetResourceHealth``: deletion first, then the override, then the built-in), so a
RayCluster check in ``argocd-cm`` replaces ours, as it replaces Argo's. A script that
fails gives Unknown with the error as the message; a status outside the six codes gives
Unknown "Lua returned an invalid health status"; no table, or none with a status, is no
verdict (the object does not count towards the app's health).

Lookup is Argo's: the exact key (``group/Kind``, ``Kind`` for the core group) first, then
the first wildcard key of the legacy ``resource.customizations`` map that matches, in
key order (Argo's order is a map's, so not defined).

The sandbox is Argo's (``runLua``): the base functions without ``load``/``dofile``/
``require`` of files, ``table``, ``string``, ``math``, and an ``os`` with only ``time``
and ``date``; ``require("os")`` returns that. The script is text only (no bytecode).
``useOpenLibs`` (Argo's switch to open every library) is refused: the script runs in the
sandbox regardless, with a warning. Where Argo stops a script after one second, ours
stops after :data:`MAX_INSTRUCTIONS` Lua instructions (a count, so a busy machine does
not change a verdict) and fails when it allocates more than :data:`MAX_MEMORY`; a script
that catches the budget error with ``pcall`` is stopped at its next instruction.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import lupa.lua54 as lupa

from gitops_ray.globs import GlobError, compile_glob
from gitops_ray.health.status import Health, HealthStatus
from gitops_ray.types import Manifest, split_api_version

MAX_INSTRUCTIONS = 10_000_000
"""Lua VM instructions one health check may run (a busy loop takes ~0.1 s to reach it)."""
MAX_MEMORY = 64 * 1024 * 1024
"""Bytes the Lua state of one worker thread may hold, the object given to a script included."""
MAX_MESSAGE = 1000
"""Characters of a script's message or error kept in the verdict."""
BUDGET_ERROR = "health check stopped: it ran more than the instruction budget"
INVALID_STATUS = "Lua returned an invalid health status"

_SANDBOX = """
local sethook, load, pcall, error, pairs, type = debug.sethook, load, pcall, error, pairs, type
local table, string, math, os = table, string, math, os
getmetatable("").__metatable = false  -- scripts cannot reach the shared string table
local function copy(t) local c = {} for k, v in pairs(t) do c[k] = v end return c end
return function(script, obj, limit, budget_error)
  local safe_os = {time = os.time, date = os.date}
  local str = copy(string)
  str.dump = nil
  local env = {
    assert = assert, error = error, ipairs = ipairs, next = next, pairs = pairs,
    pcall = pcall, select = select, tonumber = tonumber, tostring = tostring,
    type = type, unpack = table.unpack, xpcall = xpcall, rawequal = rawequal,
    rawget = rawget, rawset = rawset, rawlen = rawlen, setmetatable = setmetatable,
    getmetatable = getmetatable, print = function() end, _VERSION = _VERSION,
    table = copy(table), string = str, math = copy(math), os = safe_os, obj = obj,
  }
  env.require = function(name)
    if name == "os" then return safe_os end
    error("module '" .. tostring(name) .. "' is not available (only os)", 2)
  end
  env._G = env
  local fn, err = load(script, "=health.lua", "t", env)
  if not fn then return false, err end
  sethook(function()
    sethook(function() error(budget_error, 0) end, "", 1)
    error(budget_error, 0)
  end, "", limit)
  local ok, result = pcall(fn)
  sethook()  -- past the budget, this raises (the caller clears the hook from outside)
  return ok, result
end
"""


@dataclass(frozen=True)
class LuaCheck:
    """One custom health script and the settings key it came from."""

    label: str
    script: str


@dataclass(frozen=True)
class LuaChecks:
    """The health part of an ``argocd-cm``: scripts by override key."""

    exact: Mapping[str, LuaCheck] = field(default_factory=dict)
    wildcards: tuple[tuple[Callable[[str], bool], LuaCheck], ...] = ()
    warnings: tuple[str, ...] = ()

    def for_object(self, obj: Manifest) -> LuaCheck | None:
        """The script for the object's group and kind, if any (see the module docstring)."""
        group, _ = split_api_version(str(obj.get("apiVersion", "")))
        kind = str(obj.get("kind", ""))
        key = f"{group}/{kind}" if group else kind
        found = self.exact.get(key)
        if found is not None:
            return found
        return next((check for match, check in self.wildcards if match(key)), None)

    def __bool__(self) -> bool:
        return bool(self.exact or self.wildcards)


NO_CHECKS = LuaChecks()


def lua_checks(scripts: Mapping[str, tuple[str, object]],
               open_libs: Mapping[str, tuple[str, object]]) -> LuaChecks:
    """Checks from override key → (label, script) and → (label, ``useOpenLibs`` value)."""
    exact, wildcards, warnings = {}, [], []
    for key, (label, script) in sorted(scripts.items()):
        if not isinstance(script, str) or not script.strip():
            continue
        check = LuaCheck(label, script)
        if any(c in key for c in "*?[{\\"):
            try:
                wildcards.append((compile_glob(key), check))
            except GlobError:
                warnings.append(f"{label}: the key is not a valid glob: the check is not used")
            continue
        exact[key] = check
    for _, (label, value) in sorted(open_libs.items()):
        if str(value).lower() == "true":
            warnings.append(f"{label}: useOpenLibs is not supported (scripts always run "
                            "sandboxed, as Argo CD runs them by default)")
    return LuaChecks(exact, tuple(wildcards), tuple(warnings))


_local = threading.local()


def _runner() -> Any:
    """The Lua state of this thread and its sandbox function (a state is not shared by threads)."""
    runner = getattr(_local, "runner", None)
    if runner is None:
        runtime = lupa.LuaRuntime(register_eval=False, register_builtins=False,
                                  unpack_returned_tuples=True, max_memory=MAX_MEMORY)
        sethook = runtime.globals().debug.sethook
        runner = _local.runner = (runtime, runtime.execute(_SANDBOX), sethook)
    return runner


def run_lua_health(check: LuaCheck, obj: Manifest) -> Health | None:
    """The script's verdict on ``obj`` (None: the script gave no status)."""
    runtime, sandbox, sethook = _runner()
    try:
        ok, result = sandbox(check.script, runtime.table_from(obj, recursive=True),
                             MAX_INSTRUCTIONS, BUDGET_ERROR)
    except lupa.LuaMemoryError:  # e.g. while converting the object: start afresh
        _local.runner = None
        return _unknown("health check stopped: it used more than its memory budget")
    except lupa.LuaError as e:  # the budget, past the script's own pcall
        return _unknown(BUDGET_ERROR if BUDGET_ERROR in str(e) else str(e))
    finally:
        sethook()  # a C call from outside: runs no Lua instruction, so no hook fires
    if not ok:
        return _unknown(str(result) if result is not None else "the check failed")
    return _verdict(result)


def _verdict(result: Any) -> Health | None:
    if result is None:
        return None
    kind = lupa.lua_type(result) or _LUA_TYPES.get(type(result), "userdata")
    if kind != "table":
        return _unknown(f"expect table output from Lua script, not {kind}")
    status, message = result["status"], result["message"]
    if status is None or status == "":
        return None
    if not isinstance(status, str) or status not in set(HealthStatus):
        return Health(HealthStatus.UNKNOWN, INVALID_STATUS)
    text = "" if message is None else str(message)
    return Health(HealthStatus(status), text[:MAX_MESSAGE])


_LUA_TYPES = {bool: "boolean", int: "number", float: "number", str: "string", bytes: "string"}


def _unknown(message: str) -> Health:
    return Health(HealthStatus.UNKNOWN, message[:MAX_MESSAGE])
