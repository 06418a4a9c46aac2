"""Render comparisons for people (a unified diff, like ``kubectl diff``) and machines.

Both renderings mask Secret values. Every value under a Secret's ``data`` and
``stringData`` is replaced by a run of ``+`` whose length identifies the value within that
key, as Argo CD does (``++++++++``, then ``++++++++++++``, ...): equal values get equal
masks, so the diff still shows *whether* a value changed, never *what* it is. (The
comparison masked them already, before any ignore rule ran: :mod:`gitops_ray.secretmask`;
masking here again keeps any side handed in, from anywhere, masked.)

The YAML is dumped with sorted keys, so key order (which differs between git, the dry-run
prediction and the watch cache) never shows up as a change.
"""

from __future__ import annotations

import difflib
from typing import Any

import yaml

from gitops_ray.diff.compare import AppDiff, ResourceDiff
from gitops_ray.diff.groups import has_worker_groups, worker_group_changes
from gitops_ray.diff.patch import make_patch
from gitops_ray.secretmask import MASK, MASK_STEP, is_secret
from gitops_ray.secretmask import SECTIONS as SECRET_SECTIONS
from gitops_ray.types import Manifest

__all__ = ["MASK", "mask_secret_values", "masked", "patch", "to_json", "to_yaml", "unified"]
_RED, _GREEN, _CYAN, _BOLD, _RESET = "\x1b[31m", "\x1b[32m", "\x1b[36m", "\x1b[1m", "\x1b[0m"
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def masked(rd: ResourceDiff) -> tuple[Manifest | None, Manifest | None]:
    """The (desired, live) sides to show, with Secret values masked."""
    if not is_secret(rd.key):
        return rd.desired_normalized, rd.live_normalized
    return mask_secret_values(rd.desired_normalized, rd.live_normalized)


def mask_secret_values(desired: Manifest | None,
                       live: Manifest | None) -> tuple[Manifest | None, Manifest | None]:
    """Copies of two Secrets with every data value replaced by a consistent mask."""
    sides = [_with_own_sections(obj) for obj in (desired, live)]
    for section in SECRET_SECTIONS:
        maps = [obj[section] for obj in sides
                if obj is not None and isinstance(obj.get(section), dict)]
        for name in {k for m in maps for k in m}:
            masks: dict[str, str] = {}
            for values in maps:
                if name in values:
                    value = str(values[name])
                    values[name] = masks.setdefault(value, MASK + MASK_STEP * len(masks))
    return sides[0], sides[1]


def _with_own_sections(obj: Manifest | None) -> Manifest | None:
    if obj is None:
        return None
    out = dict(obj)
    for section in SECRET_SECTIONS:
        if isinstance(out.get(section), dict):
            out[section] = dict(out[section])
    return out


def to_yaml(obj: Manifest | None) -> str:
    if obj is None:
        return ""
    text: str = yaml.dump(obj, Dumper=_Dumper, sort_keys=True, default_flow_style=False,
                          allow_unicode=True)
    return text


def unified(rd: ResourceDiff, *, color: bool = False) -> str:
    """A unified diff from live to desired, ``""`` when the sides are equal."""
    desired, live = masked(rd)
    lines = list(difflib.unified_diff(
        to_yaml(live).splitlines(keepends=True), to_yaml(desired).splitlines(keepends=True),
        fromfile=f"live/{rd.key}", tofile=f"desired/{rd.key}"))
    if not lines:
        return ""
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return _colorize(text) if color else text


def _colorize(text: str) -> str:
    out = []
    for line in text.splitlines(keepends=True):
        if line.startswith(("---", "+++")):
            out.append(f"{_BOLD}{line.rstrip(chr(10))}{_RESET}\n")
        elif line[:1] in "-+@":
            shade = {"-": _RED, "+": _GREEN, "@": _CYAN}[line[0]]
            out.append(f"{shade}{line.rstrip(chr(10))}{_RESET}\n")
        else:
            out.append(line)
    return "".join(out)


def to_json(app_diff: AppDiff) -> list[dict[str, Any]]:
    """One record per resource for ``-o json``, with a JSON Patch from live to desired.

    A missing resource's patch adds the whole object at ``""``; an extraneous one's
    removes ``""``. Ray objects also get ``workerGroups``: the changes keyed by group name
    (:func:`gitops_ray.diff.groups.worker_group_changes`).
    """
    return [_record(rd) for rd in app_diff.resources]


def _record(rd: ResourceDiff) -> dict[str, Any]:
    record: dict[str, Any] = {
        "key": str(rd.key), "group": rd.key.group, "kind": rd.key.kind,
        "namespace": rd.key.namespace, "name": rd.key.name, "status": rd.status,
        "reason": rd.reason, "patch": patch(rd), "warnings": list(rd.warnings),
        "conflicts": list(rd.conflicts), "refused": [r.as_dict() for r in rd.refused]}
    if has_worker_groups(rd.key.group, rd.key.kind):
        record["workerGroups"] = worker_group_changes(rd.desired_normalized,
                                                      rd.live_normalized)
    return record


def patch(rd: ResourceDiff) -> list[dict[str, Any]]:
    """RFC 6902 operations turning the (masked) live side into the desired side.

    Lists are walked by index, as Argo CD's patch library does (:mod:`gitops_ray.diff.patch`).
    """
    desired, live = masked(rd)
    if live is None:
        return [{"op": "add", "path": "", "value": desired}] if desired is not None else []
    if desired is None:
        return [{"op": "remove", "path": ""}]
    return make_patch(live, desired)
