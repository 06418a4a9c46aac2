"""Total readers for live objects: a field of the wrong shape reads as absent.

Health checks read ``status`` blocks written by many controllers at many versions. A
status that is missing, half-written or of an unexpected type must never crash a
reconcile: it reads as "not reported yet", so every check stays a total function and the
verdict degrades to Progressing (or Unknown) instead of an exception.
"""

from __future__ import annotations

from typing import Any

from gitops_ray.types import Manifest


def mapping(value: object) -> Manifest:
    """``value`` if it is a JSON object, else ``{}``."""
    return value if isinstance(value, dict) else {}


def text(value: object) -> str:
    """``value`` if it is a string, else ``""``."""
    return value if isinstance(value, str) else ""


def number(value: object) -> int | None:
    """``value`` as an integer if it is an integral JSON number, else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def objects(value: object) -> list[Manifest]:
    """The JSON objects in ``value`` if it is a list, else ``[]``."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def dig(obj: object, *keys: str) -> Any:
    """``obj[k1][k2]...``, or ``None`` as soon as a level is not an object."""
    value: Any = obj
    for key in keys:
        value = mapping(value).get(key)
    return value


def status(obj: Manifest) -> Manifest:
    """The object's ``status`` block (``{}`` when absent)."""
    return mapping(obj.get("status"))


def condition(obj: Manifest, kind: str) -> Manifest | None:
    """The first ``status.conditions`` entry of type ``kind``."""
    return next((c for c in objects(status(obj).get("conditions")) if c.get("type") == kind),
                None)


def is_true(cond: Manifest | None) -> bool:
    """Whether a condition exists and has ``status: "True"``."""
    return cond is not None and cond.get("status") == "True"


def describe(cond: Manifest | None) -> str:
    """``"reason: message"`` of a condition, or whichever of the two is set."""
    if cond is None:
        return ""
    return ": ".join(part for part in (text(cond.get("reason")), text(cond.get("message")))
                     if part)
