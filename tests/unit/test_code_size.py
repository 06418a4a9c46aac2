"""No product module over ~600 lines, no function over ~50: a house rule, checked.

Why a check: the rooms that grew past these (the controller, the pipeline, the settings)
were where each new feature paid the most to read and change. What is over today is in
:data:`ALLOWED`, each with its size now as a ceiling: an entry may shrink (then lower its
number) or go (then delete it: a stale entry fails too), never grow, and nothing new may
join it. Run by ``make lint`` as well as with the unit tests.
"""

from __future__ import annotations

import ast
from pathlib import Path

import gitops_ray

ROOT = Path(gitops_ray.__file__).parent
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 50

ALLOWED: dict[str, int] = {
    # module (path under gitops_ray/) or function (path:qualified name): lines now
}
"""What is still over, and how big it is (see the module docstring)."""


def _functions(tree: ast.Module) -> list[tuple[str, int]]:
    """(qualified name, lines) of every function, a method as ``Class.name``."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                found.append((name, (child.end_lineno or child.lineno) - child.lineno + 1))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return found


def sizes() -> dict[str, int]:
    """Everything over its limit: module paths and ``path:function`` names, by lines."""
    over: dict[str, int] = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel, text = path.relative_to(ROOT).as_posix(), path.read_text()
        if (lines := len(text.splitlines())) > MAX_MODULE_LINES:
            over[rel] = lines
        for name, length in _functions(ast.parse(text)):
            if length > MAX_FUNCTION_LINES:
                over[f"{rel}:{name}"] = length
    return over


def test_nothing_new_is_over_and_nothing_allowed_grew() -> None:
    over = sizes()
    new = {k: v for k, v in over.items() if k not in ALLOWED}
    grew = {k: (v, ALLOWED[k]) for k, v in over.items() if k in ALLOWED and v > ALLOWED[k]}
    assert not new, f"over {MAX_MODULE_LINES} lines (module) or {MAX_FUNCTION_LINES} " \
                    f"(function): {new}; split it"
    assert not grew, f"grew past its allowed size (now, allowed): {grew}"


def test_the_allow_list_only_names_what_is_still_over() -> None:
    over = sizes()
    stale = sorted(k for k in ALLOWED if k not in over)
    shrunk = {k: (over[k], v) for k, v in ALLOWED.items() if k in over and over[k] < v}
    assert not stale, f"no longer over: remove from ALLOWED: {stale}"
    assert not shrunk, f"smaller now (now, allowed): lower ALLOWED to match: {shrunk}"
