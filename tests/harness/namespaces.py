"""A namespace of its own for each test: what it creates cannot meet another test's."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

from gitops_ray.kube import Kube


def fresh_namespace(kube: Kube, prefix: str) -> Iterator[str]:
    """A new namespace named ``<prefix>-<random>`` for one test, deleted after it."""
    name = f"{prefix}-{secrets.token_hex(4)}"
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                field_manager="tests")
    yield name
    kube.delete("v1", "Namespace", name=name)
