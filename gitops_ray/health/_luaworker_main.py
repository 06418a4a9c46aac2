"""The child side of the Lua health checks (:mod:`gitops_ray.health.lua`): one per line.

Run as a script (``python -P this_file <parent pid>``) by :class:`gitops_ray.childpool.Pool`,
never imported by the package, so it loads nothing but ``lupa`` and ``orjson``. Whatever a
script does happens here: the parent ends a check that overruns its deadline by killing
this process, the only way to stop Lua stuck inside one C call.

Protocol: the parent writes ``{"s": script, "o": object, "n": instruction budget, "b":
budget error, "m": message length}``; we answer ``{"v": [what, status, message]}``:
``what`` is ``"error"`` (message: the error), ``"none"`` (no table: no verdict),
``"type"`` (message: the Lua type returned) or ``"table"`` (its ``status`` and
``message``, read with ``rawget`` and only when they are strings, numbers or booleans,
so no metamethod of a returned value ever runs), or ``{"x": "memory" | "budget"}``.
The first line, ``{"ready": true}``, says the runtime is up.

The sandbox is Argo CD's (see :mod:`gitops_ray.health.lua`), plus: ``setmetatable``
refuses a metatable with ``__gc`` (a finaliser runs with hooks off, at any later
allocation, in whatever check comes next), and compiled chunks are kept by script text
(compiling is most of a check's cost); each run gets a fresh environment as the
chunk's ``_ENV``, so nothing one run changes is seen by the next.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys
from typing import Any

import lupa.lua54 as lupa
import orjson

PR_SET_PDEATHSIG = 1
MAX_MEMORY = 32 * 1024 * 1024
"""Bytes the Lua state may hold, the object given to a script included."""
KEPT_MEMORY = 8 * 1024 * 1024
"""A state holding more than this after a check is dropped (a new one is ~100 KiB)."""
ADDRESS_SPACE = 128 << 20
"""Address-space cap of this process (~18 MiB of it is the process itself): Lua's own
allocations are bounded by MAX_MEMORY; this bounds the rest (a request decoded)."""

SANDBOX = """
local sethook, load, pcall, error, pairs, type = debug.sethook, load, pcall, error, pairs, type
local rawget, setupvalue, setmetatable, tostring = rawget, debug.setupvalue, setmetatable, tostring
local table, string, math, os = table, string, math, os
local sub = string.sub
getmetatable("").__metatable = false  -- scripts cannot reach the shared string table
local function copy(t) local c = {} for k, v in pairs(t) do c[k] = v end return c end
local function no_gc(t, mt)
  if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
    error("__gc metamethods are not allowed in a health check", 2)
  end
  return setmetatable(t, mt)
end
local function text(value, max)
  local kind = type(value)
  if kind == "string" then return sub(value, 1, max) end
  if kind == "number" or kind == "boolean" then return sub(tostring(value), 1, max) end
  return nil
end
local chunks, count = {}, 0
local function compiled(script)
  local fn, err = chunks[script], nil
  if fn then return fn end
  fn, err = load(script, "=health.lua", "t", {})
  if not fn then return nil, err end
  if count >= 256 then chunks, count = {}, 0 end
  chunks[script], count = fn, count + 1
  return fn
end
local function environment(obj)
  local safe_os = {time = os.time, date = os.date}
  local str = copy(string)
  str.dump = nil
  local env = {
    assert = assert, error = error, ipairs = ipairs, next = next, pairs = pairs,
    pcall = pcall, select = select, tonumber = tonumber, tostring = tostring,
    type = type, unpack = table.unpack, xpcall = xpcall, rawequal = rawequal,
    rawget = rawget, rawset = rawset, rawlen = rawlen, setmetatable = no_gc,
    getmetatable = getmetatable, print = function() end, _VERSION = _VERSION,
    table = copy(table), string = str, math = copy(math), os = safe_os, obj = obj,
  }
  env.require = function(name)
    if name == "os" then return safe_os end
    error("module '" .. tostring(name) .. "' is not available (only os)", 2)
  end
  env._G = env
  return env
end
return function(script, obj, limit, budget_error, max)
  local fn, err = compiled(script)
  if not fn then return "error", nil, text(err, max) end
  setupvalue(fn, 1, environment(obj))
  sethook(function()
    sethook(function() error(budget_error, 0) end, "", 1)
    error(budget_error, 0)
  end, "", limit)
  local ok, result = pcall(fn)
  sethook()  -- past the budget, this raises (the caller clears the hook from outside)
  setupvalue(fn, 1, nil)
  if not ok then return "error", nil, text(result, max) or "the check failed" end
  if result == nil then return "none", nil, nil end
  if type(result) ~= "table" then return "type", nil, type(result) end
  return "table", text(rawget(result, "status"), 64), text(rawget(result, "message"), max)
end
"""


class Runner:
    """The Lua state of this process and the sandbox function in it (anew after OOM)."""

    def __init__(self) -> None:
        self.runtime = lupa.LuaRuntime(register_eval=False, register_builtins=False,
                                       unpack_returned_tuples=True, max_memory=MAX_MEMORY)
        self.sandbox = self.runtime.execute(SANDBOX)
        self.sethook = self.runtime.globals().debug.sethook

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        budget_error = str(request["b"])
        try:
            obj = self.runtime.table_from(request["o"], recursive=True)
            what, status, message = self.sandbox(request["s"], obj, int(request["n"]),
                                                 budget_error, int(request["m"]))
        except lupa.LuaMemoryError:
            return {"x": "memory"}
        except lupa.LuaError as e:  # the budget, past the script's own pcall
            return {"x": "budget"} if budget_error in str(e) else \
                {"v": ["error", None, str(e)[:int(request["m"])]]}
        finally:
            self.sethook()  # a C call from outside: runs no Lua instruction
        return {"v": [str(what), _text(status), _text(message)]}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) or value is None else None


def _die_with_parent(parent: int) -> None:
    """SIGKILL when the parent goes, even while stuck in one C call (``PR_SET_PDEATHSIG``)."""
    with contextlib.suppress(OSError, AttributeError):  # Linux only
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl took effect
        sys.exit(0)


def main() -> None:
    if len(sys.argv) > 1:
        _die_with_parent(int(sys.argv[1]))
    with contextlib.suppress(ValueError, OSError):  # an existing lower cap is fine too
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    runner = Runner()
    out = sys.stdout.buffer
    out.write(b'{"ready": true}\n')
    out.flush()
    for line in sys.stdin.buffer:
        try:
            reply = runner.answer(orjson.loads(line))
        except MemoryError:
            reply = {"x": "memory"}
        except Exception:  # out of protocol: say so, keep serving
            reply = {"v": ["error", None, "the check failed"]}
        if reply.get("x") == "memory" or runner.runtime.get_memory_used() > KEPT_MEMORY:
            runner = Runner()  # start afresh: half-built, or holding what a check left
        out.write(orjson.dumps(reply) + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
