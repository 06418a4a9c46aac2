"""Inputs for every type Argo CD's known-types normaliser registers, built from its shape.

Each field gets a value that encoding/json changes, or drops, when it re-marshals: a key
written in another case, an unknown key, quantities and durations in a non-canonical
spelling, a time with an offset and a fraction, empty values under ``omitempty``, and
some values Go refuses. The Go program next to it re-marshals them with Argo CD's own code
path into ``tests/testdata/knowntypes_golden.json``::

    cd hack/knowntypes && PYTHONPATH=../.. python samples.py \
        | go run . -golden > ../../tests/testdata/knowntypes_golden.json
"""

from __future__ import annotations

from typing import Any

from gitops_ray.diff.knowntypes import _schema

_SCALARS: dict[str, Any] = {
    "string": "x", "bool": True, "float32": 1.5, "float64": 2.5, "bytes": "QR==",
    "quantity": "2000m", "duration": "90m", "intorstring": "http", "raw": {"a": [1]},
    "time": "2026-12-01T10:00:00.5+01:00", "microtime": "2026-12-01T10:00:00.123456+01:00",
    "int8": 7, "int16": 7, "int32": 7, "int64": 7, "int": 7,
    "uint8": 7, "uint16": 7, "uint32": 7, "uint64": 7, "uint": 7,
}
_EMPTY: dict[str, Any] = {
    "string": "", "bool": False, "float32": 0, "float64": 0, "bytes": "", "quantity": "0",
    "duration": "0s", "intorstring": 0, "raw": None, "time": None, "microtime": None,
    **{k: 0 for k in ("int8", "int16", "int32", "int64", "int", "uint8", "uint16", "uint32",
                      "uint64", "uint")},
}
MAX_DEPTH = 2


def full(ref: Any, depth: int = 0) -> Any:
    """A value for every field (nested structs to :data:`MAX_DEPTH`), keys partly upper-cased."""
    if isinstance(ref, str):
        return _SCALARS[ref]
    (kind, inner), = ref.items()
    if kind == "struct":
        if depth >= MAX_DEPTH:
            return {}
        fields = _schema()["structs"][inner]
        out: dict[str, Any] = {"bogusUnknownField": 1}
        for i, (name, _, _, sub) in enumerate(fields):
            key = name[:1].upper() + name[1:] if i % 3 == 1 else name
            out[key] = full(sub, depth + 1)
        return out
    if kind == "list":
        return [full(inner, depth + 1)]
    if kind == "map":
        return {"k": full(inner, depth + 1)}
    return full(inner, depth)  # ptr


def empty(ref: Any) -> Any:
    """Every field of a struct present and empty (what omitempty drops)."""
    if isinstance(ref, str):
        return _EMPTY[ref]
    (kind, inner), = ref.items()
    if kind == "struct":
        return {name: (_EMPTY[sub] if isinstance(sub, str) else
                       [] if "list" in sub else {} if "map" in sub else None)
                for name, _, _, sub in _schema()["structs"][inner]}
    return [] if kind == "list" else {} if kind == "map" else None


def samples() -> list[dict[str, Any]]:
    """``{type, value}`` for every registered type: full, empty, ``{}``, and refused ones."""
    out = []
    for name, ref in sorted(_schema()["types"].items()):
        for value in (full(ref), empty(ref), {} if not isinstance(ref, str) else None):
            out.append({"type": name, "value": value})
    refused: list[tuple[str, Any]] = [
        ("core/Quantity", "2 cpus"), ("core/Quantity", 2), ("core/Quantity", "1Gi"),
        ("meta/v1/Duration", "8760h"), ("meta/v1/Duration", 5), ("meta/v1/Duration", "1 day"),
        ("core/v1/ContainerPort", {"containerPort": "80"}),
        ("core/v1/ContainerPort", {"containerPort": 80.0}),
        ("core/v1/ContainerPort", {"containerPort": 1 << 40}),
        ("core/v1/Container", {"name": 5}), ("core/v1/Container", ["not", "a", "map"]),
        ("core/v1/Probe", {"httpGet": {"port": 8080.5}}),
        ("core/v1/Secret", {"data": {"k": "not base64!"}}),
        ("core/v1/ContainerStateRunning", {"startedAt": "2026-12-01"}),
        ("core/v1/ResourceRequirements", {"limits": {"cpu": "1.5", "memory": "1024Mi"}}),
        ("core/v1/EmptyDirVolumeSource", {"sizeLimit": "1e3"}),
    ]
    out.extend({"type": t, "value": v} for t, v in refused)
    return out


if __name__ == "__main__":
    import json
    import sys

    json.dump(samples(), sys.stdout)
