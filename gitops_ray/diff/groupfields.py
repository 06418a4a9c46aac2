"""Fields git does not set inside Ray groups are not ours, even inside atomic lists.

KubeRay's ``workerGroupSpecs`` is an atomic list (no ``x-kubernetes-list-type``): server-side
apply owns it whole, so a plain apply of git's object replaces every field another writer
put in a worker group. Kueue is such a writer: admitting a queued RayCluster it merges the
ResourceFlavor's ``nodeSelector``, ``tolerations``, labels, annotations and scheduling
gates into the head's and every worker group's pod template (``podset.Merge`` in
``sigs.k8s.io/kueue`` v0.17.0 ``pkg/podset``), and restores the templates when it suspends
the cluster again. This module gives the head group and each worker group (matched by
``groupName``) the semantics server-side apply would give if ``workerGroupSpecs`` were a
list keyed by ``groupName``:

* a field git does not set, that live has and that git did not set at our last apply, is
  another writer's: the apply keeps it (:func:`keep_others`), so it is never drift;
* a field git sets is git's; when another writer changed it since our apply, the diff
  says so, naming the writer (:func:`conflicts`);
* a field git stops setting is removed; one another writer removes is not re-added (we
  copy from live, never from a memory of their values).

Maps merge by key (Kueue's ``nodeSelector`` keys beside git's); ``tolerations`` (by whole
element, as ``podset.Merge`` compares them) and ``schedulingGates`` (by ``name``) are
merged element-wise; every other list is one value, git's when git sets it.

What git set at our last apply is kept on the object itself, in the annotation
:data:`GROUP_FIELDS_ANNOTATION` that every apply writes: per group, a short hash of each
field path git set and of its value (no values, no key names: nothing of the document
leaks into it; at most :data:`MAX_FIELDS` fields). Without it (an object applied before
this, or adopted) a field is another writer's when ``managedFields`` says another manager
owns it or an atomic list holding it.

Bounded: only the groups' trees are walked, at most :data:`MAX_DEPTH` levels deep, once
per side; no whole-object three-way merge.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from gitops_ray import FIELD_MANAGER
from gitops_ray.diff.paths import json_equal
from gitops_ray.types import Manifest, split_api_version

GROUP_FIELDS_ANNOTATION = "gitops-ray.io/group-fields"
RAY_GROUP = "ray.io"
CLUSTER_SPEC = {"RayCluster": ("spec",), "RayJob": ("spec", "rayClusterSpec"),
                "RayService": ("spec", "rayClusterConfig")}
"""Where each Ray kind keeps its RayClusterSpec (head and worker groups)."""
SET_LISTS = frozenset({"tolerations", "schedulingGates"})
"""Lists merged element by element (what Kueue adds to); every other list is one value."""
MAX_FIELDS = 4096
"""Field paths remembered per object; beyond, the object is treated as having no memory."""
MAX_DEPTH = 24
MAX_CONFLICTS = 20
HEAD = "head"

Steps = tuple[str, ...]
Memory = dict[str, dict[str, str]]
"""Group id (``head`` or ``w/<groupName>``) -> path hash -> value hash."""


def _cluster_path(obj: Mapping[str, Any] | None) -> tuple[str, ...] | None:
    if not isinstance(obj, Mapping):
        return None
    group, _ = split_api_version(str(obj.get("apiVersion", "")))
    return CLUSTER_SPEC.get(str(obj.get("kind", ""))) if group == RAY_GROUP else None


def applies_to(obj: Mapping[str, Any] | None) -> bool:
    """Whether ``obj`` is a Ray object with a cluster spec (RayCluster, RayJob, RayService)."""
    return _cluster_path(obj) is not None


def _cluster_spec(obj: Mapping[str, Any] | None) -> dict[str, Any] | None:
    path = _cluster_path(obj)
    node: Any = obj
    for key in path or ():
        node = node.get(key) if isinstance(node, dict) else None
    return node if path is not None and isinstance(node, dict) else None


def groups_of(obj: Mapping[str, Any] | None) -> dict[str, tuple[dict[str, Any], Steps]]:
    """Group id -> (the group's dict, its path from the root with worker groups by name)."""
    spec, path = _cluster_spec(obj), _cluster_path(obj) or ()
    if spec is None:
        return {}
    out: dict[str, tuple[dict[str, Any], Steps]] = {}
    if isinstance(spec.get("headGroupSpec"), dict):
        out[HEAD] = (spec["headGroupSpec"], (*path, "headGroupSpec"))
    workers = spec.get("workerGroupSpecs")
    for group in workers if isinstance(workers, list) else ():
        name = group.get("groupName") if isinstance(group, dict) else None
        if isinstance(name, str) and f"w/{name}" not in out:
            out[f"w/{name}"] = (group, (*path, "workerGroupSpecs", name))
    return out


def element_id(list_name: str, element: Any) -> str:
    """How one element of a :data:`SET_LISTS` list is told apart from the others."""
    if list_name == "schedulingGates" and isinstance(element, dict):
        return f"name={element.get('name')}"
    return json.dumps(element, sort_keys=True, separators=(",", ":"), default=str)


def leaves(node: Mapping[str, Any], path: Steps = ()) -> Iterator[tuple[Steps, Any]]:
    """Every field git can own in one group: map keys down to non-map values.

    An element of a :data:`SET_LISTS` list is a field of its own (path ends in its id).
    """
    for key, value in node.items():
        here = (*path, str(key))
        if key in SET_LISTS and isinstance(value, list):
            for element in value:
                yield (*here, element_id(key, element)), element
        elif isinstance(value, dict) and value and len(here) < MAX_DEPTH:
            yield from leaves(value, here)
        else:
            yield here, value


def _hash(text: str, size: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:size]


MAX_REMEMBERED_HASHES = 16_384
"""Path hashes and scalar value hashes remembered, each (they repeat across objects)."""


@functools.lru_cache(maxsize=MAX_REMEMBERED_HASHES)
def _path_hash(path: Steps) -> str:
    return _hash(json.dumps(path, separators=(",", ":")), 12)


def _value_hash(value: Any) -> str:
    """A value's hash, remembered for a string, int, bool or null.

    Remembered by type too (``True`` and ``1`` hash apart); floats are not (``0.0`` and
    ``-0.0`` are equal keys), nor containers (unhashable).
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return _scalar_hash(kind.__name__, value)
    return _hash(json.dumps(value, sort_keys=True, separators=(",", ":"), default=str), 8)


@functools.lru_cache(maxsize=MAX_REMEMBERED_HASHES)
def _scalar_hash(kind: str, value: Any) -> str:
    return _hash(json.dumps(value, sort_keys=True, separators=(",", ":"), default=str), 8)


def memory_of(obj: Mapping[str, Any]) -> Memory | None:
    """What git sets in each group of ``obj`` (``None``: more than :data:`MAX_FIELDS`)."""
    out: Memory = {}
    count = 0
    for gid, (group, _) in groups_of(obj).items():
        fields = out[gid] = {}
        for path, value in leaves(group):
            count += 1
            if count > MAX_FIELDS:
                return None
            fields[_path_hash(path)] = _value_hash(value)
    return out


def encode(memory: Memory | None) -> str:
    """The annotation's value: ``{"<group id>": "<path hash>:<value hash> ..."}``."""
    if memory is None:
        return json.dumps({"overflow": True})
    return json.dumps({gid: " ".join(f"{p}:{v}" for p, v in sorted(fields.items()))
                       for gid, fields in sorted(memory.items())}, separators=(",", ":"))


def recalled(live: Mapping[str, Any] | None) -> Memory | None:
    """The memory our last apply left on ``live`` (``None``: none, or not readable)."""
    annotations = ((live or {}).get("metadata") or {}).get("annotations") or {}
    text = annotations.get(GROUP_FIELDS_ANNOTATION) if isinstance(annotations, dict) else None
    if not isinstance(text, str) or len(text) > 64 * MAX_FIELDS:
        return None
    try:
        raw = json.loads(text)
    except ValueError:
        return None
    if not isinstance(raw, dict) or raw.get("overflow") is True:
        return None
    out: Memory = {}
    for gid, tokens in raw.items():
        if not isinstance(tokens, str):
            return None
        out[str(gid)] = dict(t.partition(":")[::2] for t in tokens.split())
    return out


def with_memory(body: Manifest, git: Mapping[str, Any]) -> Manifest:
    """``body`` carrying the annotation that says what ``git`` sets in its groups.

    Only the top level and ``metadata`` are copied; ``body`` itself is not changed.
    """
    if not applies_to(git):
        return body
    meta = dict(body.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}),
                           GROUP_FIELDS_ANNOTATION: encode(memory_of(git))}
    return {**body, "metadata": meta}


# -- keeping others' fields -------------------------------------------------------------


def keep_others(body: Manifest, live: Manifest | None) -> Manifest:
    """``body`` (a private copy of git's object) with others' fields of live's groups in it.

    Changed in place and returned. Groups new in git stay as written; groups gone from
    git stay gone.
    """
    if live is None or not applies_to(body):
        return body
    memory = recalled(live)
    live_groups = groups_of(live)
    for gid, (group, _) in groups_of(body).items():
        if gid in live_groups:
            have, path = live_groups[gid]
            judge = _Judge(memory.get(gid, {}) if memory is not None else None,
                           _Owners(live, path))
            judge.merge(group, have, ())
    return body


class _Owners:
    """Who owns what under one group, by ``managedFields`` (for objects with no memory)."""

    def __init__(self, live: Mapping[str, Any], group_path: Steps) -> None:
        self.trees = [(str(e.get("manager", "")), e["fieldsV1"])
                      for e in (live.get("metadata") or {}).get("managedFields") or ()
                      if isinstance(e, dict) and isinstance(e.get("fieldsV1"), dict)]
        self.group_path = group_path

    def other(self, path: Steps) -> str:
        """The manager other than us owning ``path`` (or an atomic list holding it), or ""."""
        full = (*self.group_path, *path)
        for manager, tree in self.trees:
            if manager != FIELD_MANAGER and _covers(tree, full):
                return manager
        return ""


def _covers(tree: Mapping[str, Any], path: Steps) -> bool:
    """Whether a ``fieldsV1`` tree owns ``path``: it reaches it, or a leaf on the way."""
    node: Any = tree
    for index, step in enumerate(path):
        if not isinstance(node, dict):
            return False
        if not (set(node) - {"."}) and index:
            return True  # an atomic value (a list, ``f:workerGroupSpecs: {}``) holds it all
        after = path[index - 1] if index else ""
        if after == "workerGroupSpecs":
            key = f'k:{json.dumps({"groupName": step}, separators=(",", ":"))}'
        else:
            key = f"f:{step}"
        if key not in node:
            return False
        node = node[key]
    return True


class _Judge:
    """Decides, for one group, which of live's fields are another writer's."""

    def __init__(self, ours: Mapping[str, str] | None, owners: _Owners) -> None:
        self.ours = ours  # what git set at our last apply; None: not known
        self.owners = owners

    def theirs(self, path: Steps) -> bool:
        if self.ours is not None:
            return _path_hash(path) not in self.ours
        return bool(self.owners.other(path))

    def merge(self, git: dict[str, Any], live: Mapping[str, Any], path: Steps) -> None:
        """Copy into ``git`` the fields of ``live`` at and under ``path`` not git's."""
        for key, have in live.items():
            here = (*path, str(key))
            if key in SET_LISTS and isinstance(have, list):
                self.merge_set(git, key, have, here)
            elif key not in git:
                if isinstance(have, dict) and have and len(here) < MAX_DEPTH:
                    sub: dict[str, Any] = {}
                    self.merge(sub, have, here)
                    if sub:
                        git[key] = sub
                elif self.theirs(here):
                    git[key] = copy.deepcopy(have)
            elif isinstance(have, dict) and isinstance(git[key], dict) \
                    and len(here) < MAX_DEPTH:
                git[key] = dict(git[key])
                self.merge(git[key], have, here)

    def merge_set(self, git: dict[str, Any], key: str, have: list[Any], here: Steps) -> None:
        """Elements of a :data:`SET_LISTS` list not git's go after git's own."""
        wanted = git.get(key, [])
        if not isinstance(wanted, list):
            return  # git set it to something else: git's
        ids = {element_id(key, e) for e in wanted}
        extra = [copy.deepcopy(e) for e in have if element_id(key, e) not in ids
                 and self.theirs((*here, element_id(key, e)))]
        if extra:
            git[key] = [*wanted, *extra]


# -- conflicts --------------------------------------------------------------------------


def conflicts(desired: Manifest | None, predicted: Manifest | None,
              live: Manifest | None) -> list[str]:
    """Fields git sets that another writer changed on live since our apply, named.

    A field counts when git's value is the one it had at our last apply (so the change
    is not git's) and live differs from what the apply would leave (the prediction).
    """
    memory = recalled(live)
    if desired is None or predicted is None or live is None or memory is None:
        return []
    out: list[str] = []
    live_groups, predicted_groups = groups_of(live), groups_of(predicted)
    for gid, (group, path) in groups_of(desired).items():
        then = memory.get(gid)
        if then is None or gid not in live_groups or gid not in predicted_groups:
            continue
        owners = _Owners(live, path)
        for steps, value in leaves(group):
            if then.get(_path_hash(steps)) != _value_hash(value):
                continue
            have = _at(live_groups[gid][0], steps)
            if json_equal(have, _at(predicted_groups[gid][0], steps)):
                continue
            writer = owners.other(steps) or "another writer"
            out.append(f"{where(path, steps)}: git sets it; {writer} changed it on live "
                       f"(a sync makes it git's again)")
            if len(out) >= MAX_CONFLICTS:
                return out
    return out


_ABSENT = object()


def _at(node: Any, steps: Steps) -> Any:
    for index, step in enumerate(steps):
        if isinstance(node, list) and index and steps[index - 1] in SET_LISTS:
            node = next((e for e in node if element_id(steps[index - 1], e) == step), _ABSENT)
        elif isinstance(node, dict):
            node = node.get(step, _ABSENT)
        else:
            return _ABSENT
    return node


def where(group_path: Steps, steps: Steps) -> str:
    """``spec.workerGroupSpecs[gpu].template.spec.nodeSelector["cloud.io/zone"]``."""
    out = ""
    for index, step in enumerate((*group_path, *steps)):
        before = (*group_path, *steps)[index - 1] if index else ""
        if before == "workerGroupSpecs":
            out += f"[{step}]"
        elif before in SET_LISTS:
            out += "[" + (step if step.startswith("name=") else "…") + "]"
        elif step.replace("_", "").replace("-", "").isalnum():
            out += f".{step}" if out else step
        else:
            out += f'["{step}"]'
    return out
