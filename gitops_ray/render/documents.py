"""Decode YAML/JSON text into Kubernetes objects, remembering where each one came from.

Every renderer (plain files, ``helm template``, ``kubectl kustomize``, the Application
loader) ends in the same place: a stream of documents that must become JSON-shaped
objects. Doing that in one module gives every failure the same shape: the file (relative
to the repo), the line and column of a YAML syntax error, or the document index of an
object that lacks ``apiVersion``/``kind``/``metadata.name``.

Decoding follows Kubernetes rather than YAML 1.1 where they differ in ways that matter:
timestamps and ``!!binary`` stay strings (``sigs.k8s.io/yaml`` turns them into JSON
strings; a ``datetime`` would not survive ``json.dumps`` on the way to the API server).
``kind: List`` (and any ``*List`` with ``items``) is expanded, empty documents dropped.

Every text is measured by :mod:`gitops_ray.render.bounds` before it is built (size,
depth, aliases, expanded node count), so an alias bomb fails its app instead of the
process; the bounds are in :mod:`gitops_ray.limits`.

A text decoded before is not decoded again: :mod:`gitops_ray.render.memo` keeps the
documents of every text that decoded without error, by content, and a hit is rebuilt
here with the caller's origin and its node count charged to the app's budget.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gitops_ray import limits
from gitops_ray.errors import RenderError
from gitops_ray.hooks import is_hook
from gitops_ray.render.bounds import (
    charge_remembered,
    check_and_build_yaml,
    check_text_size,
    check_value,
)
from gitops_ray.render.loader import FastLoader
from gitops_ray.render.memo import PARSES, fresh, memo_key, remembered
from gitops_ray.types import Manifest


class _Loader(FastLoader):
    """Safe loader that keeps timestamps and ``!!binary`` as strings, like Kubernetes.

    Its resolver and constructor take :mod:`gitops_ray.render.loader`'s shortcuts.
    """


def _binary_as_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    return "".join(str(loader.construct_scalar(node)).split())


_Loader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)
_Loader.add_constructor("tag:yaml.org,2002:binary", _binary_as_text)

_MANIFEST_MARKERS = ("apiVersion:", "kind:", "metadata:")


@dataclass(frozen=True)
class Doc:
    """One decoded document and its origin (a file relative to the repo, or a tool)."""

    body: Any
    origin: str
    index: int = 1  # 1-based position in its file or stream
    line: int = 0  # 1-based line where it starts; 0 when unknown

    @property
    def where(self) -> str:
        """``file:line (document n)``, for error messages."""
        line = f":{self.line}" if self.line else ""
        return f"{self.origin}{line} (document {self.index})"


def decode_text(data: bytes, *, origin: str) -> str:
    """File bytes as text: UTF-8 (with or without BOM) or UTF-16 with a BOM."""
    encoding = "utf-16" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig"
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        raise RenderError(f"{origin}: not UTF-8 text (byte {e.start}): {e.reason}") from e


def read_text(path: Path, *, origin: str, limit: int = limits.MAX_FILE_BYTES) -> str:
    """The text of ``path`` (at most ``limit`` bytes); errors name ``origin``."""
    try:
        check_text_size(path.stat().st_size, origin=origin, limit=limit)
        return decode_text(path.read_bytes(), origin=origin)
    except OSError as e:
        raise RenderError(f"{origin}: cannot read: {e.strerror}") from e


def parse_yaml(text: str, *, origin: str, helm_sources: bool = False,
               limit: int = limits.MAX_FILE_BYTES) -> list[Doc]:
    """The documents of a YAML stream; a syntax error names ``origin``, line and column.

    With ``helm_sources``, each document's origin is taken from the ``# Source:`` comment
    that ``helm template`` writes above it. ``limit`` bounds the text's size; the other
    bounds of :mod:`gitops_ray.limits` apply to every stream. A text parsed before is
    unpacked from :mod:`gitops_ray.render.memo` instead of parsed again.
    """
    check_text_size(len(text), origin=origin, limit=limit)
    key = memo_key("yaml+helm" if helm_sources else "yaml", text)
    docs = _recalled(key, origin)
    if docs is not None:
        return docs
    nodes, built = check_and_build_yaml(text, origin=origin, limit=limit,
                                         loader=_Loader)
    lines = text.splitlines() if helm_sources else []
    parsed, tuples = (built, False) if built is not None else _documents(text, origin)
    found = [(index, line, _helm_source(lines, line) if helm_sources else "", body)
             for index, (line, body) in enumerate(parsed, start=1)]
    if not tuples and PARSES.keeps(len(text)):
        PARSES.put(key, remembered(nodes, found), chars=len(text))
    return [Doc(body, _named(origin, source), index, line)
            for index, line, source, body in found]


def _recalled(key: bytes, origin: str) -> list[Doc] | None:
    """The remembered documents of ``key`` named by ``origin``, their nodes charged."""
    parsed = PARSES.get(key)
    if parsed is None or not charge_remembered(parsed.nodes):
        return None
    return [Doc(fresh(d.body), _named(origin, d.source), d.index, d.line) for d in parsed.docs]


def _named(origin: str, source: str) -> str:
    return f"{origin}: {source}" if source else origin


class _Tuples:
    """Marks a loader that built tuples (``!!omap``, ``!!pairs``), which the memo skips."""

    def __init__(self, construct: Any) -> None:
        self.construct = construct

    def __call__(self, loader: Any, node: yaml.Node) -> Iterator[Any]:
        loader.made_tuples = True
        yield from self.construct(loader, node)


_Loader.add_constructor("tag:yaml.org,2002:omap", _Tuples(yaml.SafeLoader.construct_yaml_omap))
_Loader.add_constructor("tag:yaml.org,2002:pairs",
                        _Tuples(yaml.SafeLoader.construct_yaml_pairs))


def _documents(text: str, origin: str) -> tuple[list[tuple[int, Any]], bool]:
    """``(line, body)`` of every document, and whether any body holds tuples."""
    loader = _Loader(text)
    documents = []
    try:
        while loader.check_node():
            node = loader.get_node()
            documents.append((node.start_mark.line + 1, loader.construct_document(node)))
    except yaml.MarkedYAMLError as e:
        raise RenderError(_yaml_message(e, origin)) from e
    except yaml.YAMLError as e:
        raise RenderError(f"{origin}: invalid YAML: {e}") from e
    finally:
        loader.dispose()
    return documents, bool(getattr(loader, "made_tuples", False))


def _yaml_message(error: yaml.MarkedYAMLError, origin: str) -> str:
    mark = error.problem_mark or error.context_mark
    where = f"{origin}:{mark.line + 1}:{mark.column + 1}" if mark else origin
    context = f" ({error.context})" if error.context else ""
    return f"{where}: invalid YAML: {error.problem}{context}"


def _helm_source(lines: Sequence[str], line: int) -> str:
    """The ``# Source: <template>`` comment just above the document starting at ``line``."""
    for text in reversed(lines[:max(line - 1, 0)]):
        stripped = text.strip()
        if stripped.startswith("# Source: "):
            return stripped[len("# Source: "):]
        if stripped and not stripped.startswith("#"):
            return ""
    return ""


def parse_json(text: str, *, origin: str) -> list[Doc]:
    """A JSON file: exactly one value, as Argo CD requires of ``.json`` manifests.

    Remembered by :mod:`gitops_ray.render.memo` like YAML.
    """
    check_text_size(len(text), origin=origin)
    key = memo_key("json", text)
    docs = _recalled(key, origin)
    if docs is not None:
        return docs
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise RenderError(f"{origin}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from e
    except RecursionError as e:  # nested deeper than the interpreter's stack
        raise RenderError(f"{origin}: invalid JSON: nested too deeply") from e
    nodes = check_value(value, origin=origin)
    if PARSES.keeps(len(text)):
        PARSES.put(key, remembered(nodes, [(1, 1, "", value)]), chars=len(text))
    return [Doc(value, origin, 1, 1)]


def looks_like_manifest(text: str) -> bool:
    """Argo CD's test for "this YAML was meant to hold Kubernetes objects"."""
    return all(marker in text for marker in _MANIFEST_MARKERS)


def is_object(body: object) -> bool:
    """A mapping with a non-empty string ``apiVersion`` and ``kind``."""
    return isinstance(body, dict) and all(
        isinstance(body.get(k), str) and body[k] for k in ("apiVersion", "kind"))


def to_manifests(docs: Sequence[Doc]) -> list[Manifest]:
    """Validated objects: empty documents dropped, lists expanded, names required."""
    return [obj for _, obj in located_manifests(docs)]


def located_manifests(docs: Sequence[Doc]) -> list[tuple[str, Manifest]]:
    """Like :func:`to_manifests`, each object paired with where it was defined."""
    out: list[tuple[str, Manifest]] = []
    for doc in docs:
        if doc.body is not None:
            out += _objects(doc.body, doc.where)
    return out


def _objects(body: object, where: str) -> list[tuple[str, Manifest]]:
    if not isinstance(body, dict):
        raise RenderError(f"{where}: expected a Kubernetes object (a mapping), "
                          f"got {_type_name(body)}")
    _require_type(body, where)
    if is_list(body):
        items = body.get("items") or []
        return [found for i, item in enumerate(items)
                for found in _objects(item, f"{where} items[{i}]")]
    _require_name(body, where)
    return [(where, body)]


def is_list(obj: Manifest) -> bool:
    """``kind: List`` or ``FooList`` with an ``items`` array (or null), as kubectl reads it."""
    return str(obj.get("kind", "")).endswith("List") and \
        isinstance(obj.get("items", []), list | None)


def _require_type(obj: Manifest, where: str) -> None:
    for key in ("apiVersion", "kind"):
        if not isinstance(obj.get(key), str) or not obj[key]:
            raise RenderError(f"{where}: object has no {key} (a mapping with metadata or "
                              f"spec is read as a Kubernetes object: add {key}, or exclude "
                              "the file with spec.source.directory.exclude)")


def _require_name(obj: Manifest, where: str) -> None:
    meta = obj.get("metadata")
    label = f"{obj['kind']}"
    if not isinstance(meta, dict):
        raise RenderError(f"{where}: {label} has no metadata")
    name = meta.get("name")
    if isinstance(name, str) and name:
        return
    if meta.get("generateName") and is_hook(obj):
        return  # a resource hook: created under a name of its operation (sync.hooks)
    if meta.get("generateName"):
        raise RenderError(f"{where}: {label} uses metadata.generateName, which is not "
                          "supported but for resource hooks (server-side apply needs a "
                          "fixed metadata.name)")
    raise RenderError(f"{where}: {label} has no metadata.name")


def _type_name(value: object) -> str:
    return {list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)
