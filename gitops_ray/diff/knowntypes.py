"""``knownTypeFields``: compare the Kubernetes types a custom resource embeds, canonically.

A RayCluster embeds ``PodTemplateSpec``s, but the API server does not canonicalise
anything inside a custom resource: git's ``cpu: 2000m`` stays ``2000m`` while the operator
(or another tool) may write ``"2"``; a ``meta/v1/Duration`` of ``8760h`` in git may come
back ``8760h0m0s``. Argo CD's ``resource.customizations.knownTypeFields.<group>_<kind>``
names such sub-trees and their Kubernetes type; its normaliser
(``util/argo/normalizers/knowntypes_normalizer.go``) re-marshals them through the Go type
(``json.Unmarshal`` into it, ``json.Marshal`` back) on both sides. This module does the
same round trip, for every type the Argo CD in tests (v3.6.1) registers: ``core/Quantity``,
``meta/v1/Duration`` and the 248 ``core/v1/...`` types of its generated
``corev1_known_types.go`` (k8s.io/api v0.37.0).

What encoding/json does to a value, and so what happens here: fields the Go type does not
have are dropped (keys match exactly, else case-insensitively); ``omitempty`` fields
that are empty (``""``, ``0``, ``false``, an empty list or map, a nil pointer) and
``omitzero`` fields that are zero are dropped; a missing field without them comes back
as its zero value (``""``, ``0``, ``false``, ``null``); quantities take the API server's
spelling (:func:`gitops_ray.quantity.canonical_quantity`), ``metav1.Time`` becomes UTC
RFC 3339 in whole seconds, ``MicroTime`` in microseconds, a ``Duration`` Go's
``Duration.String()`` (:mod:`gitops_ray.godur`), ``[]byte`` standard base64. The Go
types' shapes (field names, options, types) are data: ``knowntypes.json``, written by
``hack/knowntypes`` with reflection over the same k8s.io/api version.

Paths are Argo's: dot-separated field names, and a list met on the way is iterated
(``spec.workerGroupSpecs.template.spec`` reaches every worker group's pod spec). A type
Argo CD does not register is a warning naming the key and the type, and the entry is
skipped (Argo logs the same and skips it). A value Go would refuse to decode (a string
where the type has a number, a quantity that does not parse) is left as it is (Argo logs
"Failed to normalize" and compares it unnormalised).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from gitops_ray.godur import InvalidDuration, format_duration, parse_duration
from gitops_ray.quantity import InvalidQuantity, canonical_quantity, parse_quantity

Walker = Callable[[Any], Any]
Ref = str | dict[str, Any]
Shaped = tuple[Any, bool, bool]  # (the value as Go marshals it, empty, zero)
_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "int": 64}
_UINTS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64, "uint": 64}
_RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
_RFC3339_MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")
_ZERO_TIME = "0001-01-01T00:00:00Z"


class _Refused(ValueError):
    """encoding/json would refuse to decode the value into the type."""


@functools.cache
def _schema() -> dict[str, Any]:
    text = resources.files("gitops_ray.diff").joinpath("knowntypes.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


@functools.cache
def _fields(struct: str) -> tuple[tuple[tuple[str, bool, bool, Ref], ...],
                                  dict[str, int], dict[str, int]]:
    """A struct's fields, and their index by exact and by case-folded name."""
    fields = tuple((str(n), bool(e), bool(z), r) for n, e, z, r in _schema()["structs"][struct])
    exact = {f[0]: i for i, f in enumerate(fields)}
    folded: dict[str, int] = {}
    for i, f in enumerate(fields):
        folded.setdefault(f[0].casefold(), i)
    return fields, exact, folded


def _shape(value: Any, ref: Ref, *, absent: bool = False) -> Shaped:
    """``value`` (``None``: JSON null; ``absent``: no such key) decoded into ``ref`` and back."""
    if isinstance(ref, dict):
        (kind, inner), = ref.items()
        return _COMPOSITES[kind](value, inner)
    return _SCALARS[ref](value, absent)


def _struct(value: Any, struct: str) -> Shaped:
    if value is not None and not isinstance(value, dict):
        raise _Refused(struct)
    fields, exact, folded = _fields(struct)
    given: dict[int, Any] = {}
    for key, item in (value or {}).items():
        index = exact.get(key) if isinstance(key, str) else None
        if index is None and isinstance(key, str):
            index = folded.get(key.casefold())
        if index is not None:
            given[index] = item  # a later key for the same field wins, as in Go
    out, zero = {}, True
    for index, (name, omitempty, omitzero, ref) in enumerate(fields):
        shaped, empty, is_zero = (_shape(given[index], ref) if index in given
                                  else _shape(None, ref, absent=True))
        zero = zero and is_zero
        if not (omitempty and empty) and not (omitzero and is_zero):
            out[name] = shaped
    return out, False, zero


def _pointer(value: Any, ref: Ref) -> Shaped:
    if value is None:
        return None, True, True
    return _shape(value, ref)[0], False, False


def _list(value: Any, ref: Ref) -> Shaped:
    if value is None:
        return None, True, True
    if not isinstance(value, list):
        raise _Refused("list")
    return [_shape(item, ref)[0] for item in value], not value, False


def _map(value: Any, ref: Ref) -> Shaped:
    if value is None:
        return None, True, True
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise _Refused("map")
    return {k: _shape(v, ref)[0] for k, v in value.items()}, not value, False


_COMPOSITES: dict[str, Callable[[Any, Any], Shaped]] = {
    "struct": _struct, "ptr": _pointer, "list": _list, "map": _map}


def _string(value: Any, _absent: bool) -> Shaped:
    if value is None:
        return "", True, True
    if not isinstance(value, str):
        raise _Refused("string")
    return value, not value, not value


def _bool(value: Any, _absent: bool) -> Shaped:
    if value is None:
        return False, True, True
    if not isinstance(value, bool):
        raise _Refused("bool")
    return value, not value, not value


def _integer(bits: int, signed: bool) -> Callable[[Any, bool], Shaped]:
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)

    def shape(value: Any, _absent: bool) -> Shaped:
        if value is None:
            return 0, True, True
        if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
            value = int(value)  # Go marshals a float64 80.0 as 80, which an int32 takes
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise _Refused("integer")  # e.g. 1.5, or 1e21 (Go writes it with an exponent)
        return value, value == 0, value == 0
    return shape


def _float(value: Any, _absent: bool) -> Shaped:
    if value is None:
        return 0, True, True
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Refused("number")
    return value, value == 0, value == 0


def _bytes(value: Any, _absent: bool) -> Shaped:
    if value is None:
        return None, True, True
    if not isinstance(value, str):
        raise _Refused("bytes")
    try:
        raw = base64.b64decode(value.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError) as e:
        raise _Refused("bytes") from e
    return base64.b64encode(raw).decode(), not raw, not raw


def _quantity(value: Any, _absent: bool) -> Shaped:
    if value is None:  # Quantity.UnmarshalJSON(null): zero, marshalled "0"
        return "0", False, True
    canonical = canonical_quantity(value)
    if canonical is None:
        raise _Refused("quantity")
    try:
        zero = parse_quantity(canonical) == 0
    except InvalidQuantity as e:  # pragma: no cover - canonical_quantity parsed it
        raise _Refused("quantity") from e
    return canonical, False, zero


def _time(pattern: re.Pattern[str], layout: str) -> Callable[[Any, bool], Shaped]:
    def shape(value: Any, _absent: bool) -> Shaped:
        if value is None:  # the zero time marshals null
            return None, False, True
        if not isinstance(value, str) or not pattern.match(value):
            raise _Refused("time")
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as e:
            raise _Refused("time") from e
        text = parsed.astimezone(UTC).strftime(layout)
        return text, False, text.startswith(_ZERO_TIME[:19])
    return shape


def _duration(value: Any, absent: bool) -> Shaped:
    if absent:
        return "0s", False, True
    if not isinstance(value, str):  # Duration.UnmarshalJSON wants a string, even for null
        raise _Refused("duration")
    try:
        nanos = parse_duration(value)
    except InvalidDuration as e:
        raise _Refused("duration") from e
    return format_duration(nanos), False, nanos == 0


def _int_or_string(value: Any, _absent: bool) -> Shaped:
    if value is None:
        return 0, False, True
    if isinstance(value, str):
        return value, False, False
    return _integer(32, True)(value, False)[0], False, value == 0


def _raw(value: Any, _absent: bool) -> Shaped:
    return value, False, value is None  # RawExtension, FieldsV1: the JSON as it was


_SCALARS: dict[str, Callable[[Any, bool], Shaped]] = {
    "string": _string, "bool": _bool, "float32": _float, "float64": _float, "bytes": _bytes,
    "quantity": _quantity, "duration": _duration, "intorstring": _int_or_string, "raw": _raw,
    "time": _time(_RFC3339, "%Y-%m-%dT%H:%M:%SZ"),
    "microtime": _time(_RFC3339_MICRO, "%Y-%m-%dT%H:%M:%S.%fZ"),
    **{name: _integer(bits, True) for name, bits in _INTS.items()},
    **{name: _integer(bits, False) for name, bits in _UINTS.items()},
}


def known_types() -> frozenset[str]:
    """The type names Argo CD's normaliser registers (``core/v1/PodSpec``, ...)."""
    return frozenset(_schema()["types"])


def walker(type_name: str) -> Walker | None:
    """The re-marshal of ``type_name``; ``None`` when Argo CD does not register it."""
    ref = _schema()["types"].get(type_name)
    if ref is None:
        return None

    def walk(value: Any) -> Any:
        try:
            return _shape(value, ref)[0]
        except _Refused:  # Argo CD logs it and compares the value as it is
            return value
    return walk


@dataclass(frozen=True)
class KnownTypeField:
    """One ``{field, type}`` entry, compiled."""

    path: tuple[str, ...]
    type: str
    walker: Walker


def compile_known_fields(entries: Any, *, label: str) -> tuple[list[KnownTypeField], list[str]]:
    """The usable entries of one ``knownTypeFields`` value, and a warning per skipped one."""
    if not isinstance(entries, list):
        return [], [f"{label}: expected a list of {{field, type}} entries"]
    fields, warnings = [], []
    for index, entry in enumerate(entries):
        where = f"{label}[{index}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("field"), str) \
                or not isinstance(entry.get("type"), str) or not entry["field"]:
            warnings.append(f"{where}: expected a mapping with string 'field' and 'type'")
            continue
        walk = walker(entry["type"])
        if walk is None:
            warnings.append(f"{where}: type {entry['type'][:100]!r} is not supported (not a "
                            f"type Argo CD {_schema()['argocd']} registers, e.g. "
                            "core/v1/PodSpec, core/Quantity, meta/v1/Duration); entry skipped")
            continue
        fields.append(KnownTypeField(tuple(entry["field"].split(".")), entry["type"], walk))
    return fields, warnings


def normalize_known_types(obj: dict[str, Any], fields: tuple[KnownTypeField, ...]) -> None:
    """Re-format every field of ``obj`` (a private copy) that ``fields`` name, in place."""
    for field in fields:
        _apply(obj, field.path, field.walker)


def _apply(node: dict[str, Any], path: tuple[str, ...], walk: Walker) -> None:
    head, rest = path[0], path[1:]
    if head not in node:
        return
    value = node[head]
    if isinstance(value, list):  # Argo iterates a list met anywhere on the path
        for index, item in enumerate(value):
            if isinstance(item, dict):
                if rest:
                    _apply(item, rest, walk)
                else:
                    value[index] = walk(item)
    elif not rest:
        node[head] = walk(value)
    elif isinstance(value, dict):
        _apply(value, rest, walk)
