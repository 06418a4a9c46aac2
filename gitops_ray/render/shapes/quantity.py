"""Kubernetes resource quantities (``500m``, ``8Gi``, ``1e3``) as exact decimals.

Pod shapes subtract a sidecar reservation from an instance type and compare the sum of
container requests with it, so quantities must be parsed exactly: floats would turn
``0.1 + 0.2`` CPU into a validation error. The grammar is the one of
``k8s.io/apimachinery/pkg/api/resource`` (binary ``Ki``..``Ei``, decimal ``n``..``E``,
exponents ``e3``/``E-3``), parsed by :mod:`gitops_ray.quantity`. Formatting picks the
shortest exact suffix, so a result reads like something a person would write (``31Gi``, ``7500m``).
"""

from __future__ import annotations

from decimal import ROUND_CEILING, Decimal

from gitops_ray.errors import RenderError
from gitops_ray.quantity import InvalidQuantity, parse_quantity

__all__ = ["MILLI", "InvalidQuantity", "format_quantity", "is_whole", "parse_quantity",
           "resource_amount"]

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_FORMAT_SUFFIXES = sorted(
    [(Decimal(1024) ** p, s) for s, p in _BINARY.items()]
    + [(Decimal(10) ** p, s) for s, p in _DECIMAL.items()],
    reverse=True)
MILLI = Decimal("0.001")


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
