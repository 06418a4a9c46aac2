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
sandbox regardless, with a warning.

Where it runs: in a worker process (:mod:`gitops_ray.health._luaworker_main`, a
:class:`gitops_ray.childpool.Pool`), never in the controller. Lua can run where no
instruction hook fires (one ``string.find`` whose pattern backtracks for hours, a
``__gc`` finaliser) and holds the GIL meanwhile: in-process, one such check froze the
whole controller. So a check has a wall-clock deadline (:data:`TIMEOUT`, Argo's one
second); one that overruns is Unknown with :data:`TIMEOUT_ERROR`, the worker is killed
and the next check gets a new one. Inside, a check also stops after
:data:`MAX_INSTRUCTIONS` Lua instructions (a count, so a busy machine does not change a
verdict: a plain endless loop ends the same way every time), and fails when it allocates
more than its memory budget (:data:`gitops_ray.health._luaworker_main.MAX_MEMORY`, 32
MiB); a script that catches the budget error with ``pcall`` is stopped at its next
instruction. At most :data:`WORKERS` workers run at once (a check waits for a free one),
so Lua can hold at most that many budgets of the pod's memory. Only strings come back:
the verdict's ``status`` and ``message`` are read with ``rawget`` inside the sandbox, so
no metamethod of what a script returns (``__index``, ``__tostring``) runs, there or
here, and ``setmetatable`` refuses ``__gc``. Workers are reused (compiled scripts are
kept there), so a check costs a round trip, not a process.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitops_ray.childpool import Pool, WorkerError, WorkerTimeout
from gitops_ray.globs import GlobError, compile_glob
from gitops_ray.health.status import Health, HealthStatus
from gitops_ray.types import Manifest, split_api_version

MAX_INSTRUCTIONS = 10_000_000
"""Lua VM instructions one health check may run (a busy loop takes ~0.1 s to reach it)."""
MAX_MESSAGE = 1000
"""Characters of a script's message or error kept in the verdict."""
TIMEOUT = 1.0
"""Seconds one check may take, wall clock, as Argo CD's Lua VM (then the worker is killed)."""
BUDGET_ERROR = "health check stopped: it ran more than the instruction budget"
MEMORY_ERROR = "health check stopped: it used more than its memory budget"
TIMEOUT_ERROR = "health check stopped: it ran longer than {timeout:g}s"
INVALID_STATUS = "Lua returned an invalid health status"
WORKERS = 4
"""Lua worker processes at most (each holds at most its memory budget)."""
POOL = Pool(Path(__file__).with_name("_luaworker_main.py"), "Lua health",
            max_idle=WORKERS, max_workers=WORKERS)


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


def run_lua_health(check: LuaCheck, obj: Manifest, *, timeout: float = TIMEOUT
                   ) -> Health | None:
    """The script's verdict on ``obj`` (None: the script gave no status).

    ``timeout``: the wall-clock deadline (tests on a busy machine give the instruction
    budget room to be what stops a loop).
    """
    request = {"s": check.script, "o": obj, "n": MAX_INSTRUCTIONS, "b": BUDGET_ERROR,
               "m": MAX_MESSAGE}
    try:
        reply = POOL.run(request, timeout)
    except WorkerTimeout:
        return _unknown(TIMEOUT_ERROR.format(timeout=timeout))
    except WorkerError as e:  # it crashed (its memory cap), or could not start
        return _unknown(f"health check failed: {e}")
    if "x" in reply:
        return _unknown(MEMORY_ERROR if reply["x"] == "memory" else BUDGET_ERROR)
    return _verdict(reply.get("v"))


def _verdict(reply: Any) -> Health | None:
    what, status, message = reply if isinstance(reply, list) and len(reply) == 3 else \
        ("error", None, "the check failed")
    if what == "none":
        return None
    if what == "type":
        return _unknown(f"expect table output from Lua script, not {message}")
    if what != "table":
        return _unknown(str(message) if message else "the check failed")
    if status is None or status == "":
        return None
    if not isinstance(status, str) or status not in set(HealthStatus):
        return Health(HealthStatus.UNKNOWN, INVALID_STATUS)
    text = "" if message is None else str(message)
    return Health(HealthStatus(status), text[:MAX_MESSAGE])


def _unknown(message: str) -> Health:
    return Health(HealthStatus.UNKNOWN, message[:MAX_MESSAGE])
