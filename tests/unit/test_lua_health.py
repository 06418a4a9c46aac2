"""The Argo CD Lua health checks (argocd/health/) give exactly gitops-ray's verdicts.

Every ray.io fixture runs through ``ray.io_<Kind>.lua`` in a real Lua interpreter (lupa):
Lua 5.1, the dialect of the gopher-lua inside Argo CD, and Lua 5.4 for portability. Both
are cut down to what Argo CD gives a custom check by default (base and table libraries,
no string metatable), and objects are converted the way Argo CD converts them: objects
become tables, arrays 1-based tables, null nothing.
"""

from __future__ import annotations

import copy
import importlib
from pathlib import Path
from typing import Any

import pytest

from gitops_ray.health import assess
from tests.harness.data import load_yaml

ROOT = Path(__file__).parent.parent.parent
LUA_DIR = ROOT / "argocd" / "health"
RAY_DATA = ROOT / "tests" / "testdata" / "health" / "ray.io"
KINDS = ("RayCluster", "RayJob", "RayService", "RayCronJob")
DIALECTS = ("lupa.lua51", "lupa.lua54")

SANDBOX = """
debug.setmetatable("", nil)
for _, name in ipairs({"string", "math", "io", "os", "debug", "coroutine", "utf8", "bit32",
                       "package", "require", "dofile", "loadfile", "load", "loadstring"}) do
  _G[name] = nil
end
"""


def script(kind: str) -> str:
    return (LUA_DIR / f"ray.io_{kind}.lua").read_text()


def to_lua(lua: Any, value: Any) -> Any:
    """Python JSON value -> Lua value, as Argo CD's ``decodeValue`` does it."""
    if isinstance(value, dict):
        return lua.table_from({k: to_lua(lua, v) for k, v in value.items() if v is not None})
    if isinstance(value, list):
        return lua.table_from([to_lua(lua, v) for v in value])
    return value


def run_lua(dialect: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Run one check the way Argo CD does: global ``obj``, the chunk returns ``hs``."""
    lua = importlib.import_module(dialect).LuaRuntime(unpack_returned_tuples=False)
    lua.execute(SANDBOX)
    lua.globals().obj = to_lua(lua, obj)
    return dict(lua.execute(script(kind)).items())


def python_verdict(obj: dict[str, Any]) -> dict[str, str]:
    health = assess(obj)
    assert health is not None
    return {"status": health.status.value, "message": health.message}


def ray_cases() -> list[Any]:
    cases = []
    for kind in KINDS:
        for case in load_yaml(RAY_DATA / kind / "health_test.yaml")["tests"]:
            path = RAY_DATA / kind / case["inputPath"]
            cases.append(pytest.param(kind, load_yaml(path),
                                      case["healthStatus"], id=f"{kind}/{path.stem}"))
    return cases


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(("kind", "obj", "expected"), ray_cases())
def test_lua_verdicts(dialect: str, kind: str, obj: dict[str, Any],
                      expected: dict[str, str]) -> None:
    assert run_lua(dialect, kind, obj) == expected


@pytest.mark.parametrize(("kind", "obj", "expected"), ray_cases())
def test_python_verdicts(kind: str, obj: dict[str, Any], expected: dict[str, str]) -> None:
    assert python_verdict(obj) == expected


ODD_STATUSES: tuple[dict[str, Any], ...] = (
    {}, {"conditions": []}, {"conditions": ["x", 7]}, {"observedGeneration": 0.5},
    {"desiredWorkerReplicas": 2.0, "readyWorkerReplicas": True, "state": "ready"},
    {"jobDeploymentStatus": 7}, {"serviceStatus": "Restarting"},
    {"conditions": [{"type": "Ready", "status": "True"}], "numServeEndpoints": 1.0},
)


def odd_variants(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Half-written or oddly typed versions of a fixture that both sides must read alike."""
    variants = [{**copy.deepcopy(obj), "status": copy.deepcopy(s)} for s in ODD_STATUSES]
    without_meta = copy.deepcopy(obj)
    del without_meta["metadata"]
    return [*variants, without_meta]


@pytest.mark.parametrize(("kind", "obj", "expected"), ray_cases()[::4])
def test_lua_and_python_agree_on_odd_objects(kind: str, obj: dict[str, Any],
                                              expected: dict[str, str]) -> None:
    """Lua 5.1 only: like gopher-lua it prints 2.0 as "2"; Lua 5.4 would print "2.0"."""
    for variant in odd_variants(obj):
        assert run_lua("lupa.lua51", kind, variant) == python_verdict(variant), variant["status"]


def test_configmap_values_are_the_lua_files_byte_for_byte() -> None:
    config_map = load_yaml(LUA_DIR / "argocd-cm-ray-health.yaml")
    assert (config_map["apiVersion"], config_map["kind"]) == ("v1", "ConfigMap")
    assert config_map["metadata"]["name"] == "argocd-cm"
    assert config_map["data"] == {
        f"resource.customizations.health.ray.io_{kind}": script(kind) for kind in KINDS}


def test_every_ray_kind_has_a_lua_check_and_fixtures() -> None:
    assert {p.name for p in LUA_DIR.glob("*.lua")} == {f"ray.io_{k}.lua" for k in KINDS}
    assert {p.name for p in RAY_DATA.iterdir()} == set(KINDS)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_sandbox_has_only_argo_cds_default_libraries(dialect: str) -> None:
    lua = importlib.import_module(dialect).LuaRuntime(unpack_returned_tuples=False)
    lua.execute(SANDBOX)
    assert lua.eval("string == nil and math == nil and os == nil and table ~= nil")
    with pytest.raises(importlib.import_module(dialect).LuaError):
        lua.execute('return ("x"):upper()')
