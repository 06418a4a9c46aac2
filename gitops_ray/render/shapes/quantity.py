"""Kubernetes resource quantities (``500m``, ``8Gi``, ``1e3``) as exact decimals.

Pod shapes subtract a sidecar reservation from an instance type and compare the sum of
container requests with it, so quantities must be parsed exactly: floats would turn
``0.1 + 0.2`` CPU into a validation error. The grammar is the one of
``k8s.io/apimachinery/pkg/api/resource`` (binary ``Ki``..``Ei``, decimal ``n``..``E``,
exponents ``e3``/``E-3``). Formatting picks the shortest exact suffix, so a result reads
like something a person would write (``31Gi``, ``7500m``).
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

from gitops_ray.errors import RenderError

_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
            "E": 18}
_FORMAT_SUFFIXES = sorted(
    [(Decimal(1024) ** p, s) for s, p in _BINARY.items()]
    + [(Decimal(10) ** p, s) for s, p in _DECIMAL.items() if p > 0],
    reverse=True)
MILLI = Decimal("0.001")


class InvalidQuantity(ValueError):
    """A value that is not a Kubernetes quantity."""


def parse_quantity(value: object) -> Decimal:
    """The exact value of a quantity given as YAML gives it: a string, int or float."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidQuantity(f"{value!r} is not a quantity (expected e.g. 2, 500m or 8Gi)")
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        raise InvalidQuantity(f"{text!r} is not a quantity (expected e.g. 2, 500m or 8Gi)")
    try:
        number = Decimal(match["number"])
    except InvalidOperation as e:  # pragma: no cover - the regex admits only numbers
        raise InvalidQuantity(f"{text!r} is not a quantity") from e
    return number * _multiplier(match["suffix"] or "")


def _multiplier(suffix: str) -> Decimal:
    if suffix in _BINARY:
        return Decimal(1024) ** _BINARY[suffix]
    if suffix in _DECIMAL:
        return Decimal(10) ** _DECIMAL[suffix]
    return Decimal(10) ** int(suffix[1:])


def format_quantity(value: Decimal, *, scale: bool = True) -> str:
    """The shortest exact spelling, rounded up to milli-units like the API server does.

    ``scale=False`` keeps whole numbers plain, as people write CPU counts (``1000``, not ``1k``);
    memory and extended resources use the largest exact suffix.
    """
    value = value.quantize(MILLI, rounding=ROUND_CEILING) if value % MILLI else value
    if value != value.to_integral_value():
        return f"{int(value * 1000)}m"
    whole = int(value)
    if not scale:
        return str(whole)
    for multiplier, suffix in _FORMAT_SUFFIXES:
        if whole and abs(whole) >= multiplier and whole % multiplier == 0:
            return f"{whole // int(multiplier)}{suffix}"
    return str(whole)


def is_whole(value: Decimal) -> bool:
    return value == value.to_integral_value()


def resource_amount(value: object, where: str) -> Decimal:
    """A non-negative quantity from a catalog or settings file.

    Raises ``RenderError`` naming ``where`` for anything else.
    """
    try:
        amount = parse_quantity(value)
    except InvalidQuantity as e:
        raise RenderError(f"{where}: {e}") from e
    if amount < 0:
        raise RenderError(f"{where}: must not be negative")
    return amount
