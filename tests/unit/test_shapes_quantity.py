"""Kubernetes quantities: exact parsing and the shortest exact formatting."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gitops_ray.render.shapes.quantity import InvalidQuantity, format_quantity, parse_quantity


@pytest.mark.parametrize(("text", "value"), [
    ("2", Decimal(2)), (2, Decimal(2)), (0.5, Decimal("0.5")), ("500m", Decimal("0.5")),
    ("8Gi", Decimal(8 * 1024**3)), ("1.5Gi", Decimal(1536 * 1024**2)), ("8G", Decimal(8 * 10**9)),
    ("1e3", Decimal(1000)), ("1E-3", Decimal("0.001")), (".5", Decimal("0.5")),
    ("+1k", Decimal(1000)), ("100u", Decimal("0.0001")), ("1Ei", Decimal(1024**6)),
    ("2000m", Decimal(2)),
])
def test_parses_kubernetes_grammar(text: object, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "Gi", "8gi", "8 Gi", "1.2.3", "8KiB", "e3", True, None,
                                  [1], "0x10"])
def test_rejects_non_quantities(text: object) -> None:
    with pytest.raises(InvalidQuantity):
        parse_quantity(text)


def test_sums_exactly() -> None:
    assert parse_quantity("0.1") + parse_quantity("0.2") == parse_quantity("300m")


@pytest.mark.parametrize(("value", "scale", "text"), [
    (Decimal(8), False, "8"), (Decimal("7.5"), False, "7500m"), (Decimal(1000), False, "1000"),
    (Decimal(32 * 1024**3 - 512 * 1024**2), True, "32256Mi"), (Decimal(8 * 10**9), True, "8G"),
    (Decimal(1000), True, "1k"), (Decimal(0), True, "0"), (Decimal(5), True, "5"),
    (Decimal("0.0001"), False, "1m"),  # rounded up to milli-units, like the API server
])
def test_formats_shortest_exact(value: Decimal, scale: bool, text: str) -> None:
    assert format_quantity(value, scale=scale) == text
    assert parse_quantity(text) >= value


def test_round_trips() -> None:
    for text in ("8Gi", "31Gi", "7500m", "1536Mi", "8G"):
        assert format_quantity(parse_quantity(text)) == text
