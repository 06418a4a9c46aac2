"""Value objects shared by every stage.

Kept tiny and dependency-free so that pure stages (``diff``, ``health``, ``render``) can
share vocabulary without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Manifest = dict[str, Any]
"""A Kubernetes object as decoded JSON."""


def split_api_version(api_version: str) -> tuple[str, str]:
    """Return ``(group, version)``; the core group is ``""``."""
    group, _, version = api_version.rpartition("/")
    return group, version


@dataclass(frozen=True, order=True)
class ResourceKey:
    """Identity of an object across git and the cluster: group, kind, namespace, name.

    The version is left out on purpose: the same object served at two versions is one object.
    """

    group: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Manifest) -> ResourceKey:
        """Key of a manifest (missing fields become empty strings)."""
        meta = obj.get("metadata") or {}
        group, _ = split_api_version(str(obj.get("apiVersion", "")))
        return cls(group, str(obj.get("kind", "")), str(meta.get("namespace") or ""),
                   str(meta.get("name", "")))

    def __str__(self) -> str:
        ns = f"{self.namespace}/" if self.namespace else ""
        return f"{self.group}/{self.kind}:{ns}{self.name}" if self.group else \
            f"{self.kind}:{ns}{self.name}"
