"""Kubernetes resource quantities (``500m``, ``8Gi``, ``1e3``): their grammar and canonical form.

Two stages read quantities and neither may import the other: ``render`` adds up pod
shapes (:mod:`gitops_ray.render.shapes.quantity`), ``diff`` re-formats the fields an
``argocd-cm`` ``knownTypeFields`` entry names (:mod:`gitops_ray.diff.knowntypes`). The
grammar lives here once.

:func:`canonical_quantity` is what ``resource.Quantity`` marshals to in
``k8s.io/apimachinery/pkg/api/resource`` (``CanonicalizeBytes``), the form the API server
stores and Argo CD's known-types normaliser compares: the *format* follows the suffix the
value was written with (binary ``Ki``..``Ei``, decimal ``n``..``E`` or none, exponent
``e3``), the value is rounded up to nano units, and the mantissa is the smallest integer
whose exponent is a multiple of 3 (``2000m`` → ``2``, ``0.5`` → ``500m``, ``1024Mi`` →
``1Gi``, ``1000`` → ``1k``). Like the API server, ``1Gi`` and ``1073741824`` stay
different spellings: the format is part of a quantity's canonical form.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation, localcontext

_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
            "E": 18}
_DECIMAL_SUFFIX = {p: s for s, p in _DECIMAL.items()}
_BINARY_SUFFIX = {p: s for s, p in _BINARY.items()} | {0: ""}
_NANO = Decimal("1e-9")
MAX_TEXT = 64
"""Longer text is not canonicalised (the API server refuses such quantities anyway)."""
MAX_EXPONENT = 64
"""An exponent past this (``1e999999``) is not canonicalised: it would build huge numbers."""


class InvalidQuantity(ValueError):
    """A value that is not a Kubernetes quantity."""


def parse_quantity(value: object) -> Decimal:
    """The exact value of a quantity given as YAML gives it: a string, int or float."""
    return _parse(value)[0]


def _parse(value: object) -> tuple[Decimal, str]:
    """(exact value, suffix written)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidQuantity(f"{value!r} is not a quantity (expected e.g. 2, 500m or 8Gi)")
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        raise InvalidQuantity(f"{text!r} is not a quantity (expected e.g. 2, 500m or 8Gi)")
    suffix = match["suffix"] or ""
    try:
        number = Decimal(match["number"])
    except InvalidOperation as e:  # pragma: no cover - the regex admits only numbers
        raise InvalidQuantity(f"{text!r} is not a quantity") from e
    return number * _multiplier(suffix), suffix


def _multiplier(suffix: str) -> Decimal:
    if suffix in _BINARY:
        return Decimal(1024) ** _BINARY[suffix]
    if suffix in _DECIMAL:
        return Decimal(10) ** _DECIMAL[suffix]
    return Decimal(10) ** int(suffix[1:])


def canonical_quantity(value: object) -> str | None:
    """The API server's spelling of a quantity, or None when ``value`` is not one."""
    text = str(value).strip() if isinstance(value, str | int | float) else ""
    if not text or len(text) > MAX_TEXT or isinstance(value, bool):
        return None
    exponent = re.search(r"[eE]([+-]?\d+)$", text)
    if exponent is not None and abs(int(exponent[1])) > MAX_EXPONENT:
        return None
    try:
        with localcontext() as ctx:
            ctx.prec = 200
            amount, suffix = _parse(value)
            return _canonical(amount.quantize(_NANO, rounding=ROUND_CEILING), suffix)
    except (InvalidQuantity, InvalidOperation):
        return None


def _canonical(amount: Decimal, suffix: str) -> str:
    if amount == 0:
        return "0"
    if suffix in _BINARY and abs(amount) >= 1024 and amount == amount.to_integral_value():
        return _base1024(int(amount))
    fmt = "exponent" if len(suffix) > 1 and suffix[0] in "eE" else "si"
    return _base10(amount, fmt)


def _base1024(whole: int) -> str:
    exponent = 0
    while whole % 1024 == 0 and exponent < max(_BINARY.values()):
        whole //= 1024
        exponent += 1
    return f"{whole}{_BINARY_SUFFIX[exponent]}"


def _base10(amount: Decimal, fmt: str) -> str:
    sign, digits, exp = amount.normalize().as_tuple()
    mantissa = int("".join(map(str, digits)) or "0")
    exponent = int(exp)
    while exponent % 3:
        mantissa, exponent = mantissa * 10, exponent - 1
    if fmt == "si":
        while exponent > max(_DECIMAL.values()):
            mantissa, exponent = mantissa * 1000, exponent - 3
        suffix = _DECIMAL_SUFFIX[exponent]
    else:
        suffix = f"e{exponent}" if exponent else ""
    return f"{'-' if sign else ''}{mantissa}{suffix}"
