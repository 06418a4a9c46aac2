"""Only :mod:`gitops_ray.sync.statuswrites` changes an app record's status.

Any other product module that assigns into ``<x>.status[...]`` or calls a mutating method
of ``<x>.status`` (``update``, ``pop``, ``setdefault``, ...) fails this test: a record's
shape is decided in one place.
"""

from __future__ import annotations

import ast
from pathlib import Path

import gitops_ray

ROOT = Path(gitops_ray.__file__).parent
WRITER = ROOT / "sync" / "statuswrites.py"
MUTATORS = {"update", "pop", "setdefault", "clear", "popitem", "__setitem__", "__delitem__"}


def _is_status(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "status"


def _changes(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
            targets = list(node.targets) if isinstance(node, ast.Assign | ast.Delete) \
                else [node.target]
        if any(isinstance(t, ast.Subscript) and _is_status(t.value) for t in targets):
            lines.append(node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in MUTATORS and _is_status(node.func.value):
            lines.append(node.lineno)
    return lines


def test_no_module_but_the_writer_changes_a_record_status() -> None:
    found = {f"{path.relative_to(ROOT)}:{line}"
             for path in ROOT.rglob("*.py") if path != WRITER
             for line in _changes(ast.parse(path.read_text()))}
    assert not found, f"status changed outside sync/statuswrites.py: {sorted(found)}"


def test_the_check_sees_a_change() -> None:
    assert _changes(ast.parse("record.status['x'] = 1\nr.status.update({})\n")) == [1, 2]
