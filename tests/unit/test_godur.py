"""Go's ``time.ParseDuration`` and ``Duration.String`` (values checked against Go 1.24)."""

from __future__ import annotations

import pytest

from gitops_ray.godur import InvalidDuration, format_duration, parse_duration


@pytest.mark.parametrize(("text", "canonical"), [
    ("8760h", "8760h0m0s"), ("1h30m", "1h30m0s"), ("90m", "1h30m0s"), ("1.5h", "1h30m0s"),
    ("300ms", "300ms"), ("0", "0s"), ("-1h", "-1h0m0s"), ("+5s", "5s"), ("1.5s", "1.5s"),
    ("2ns", "2ns"), ("1us", "1µs"), ("1µs", "1µs"), (".5s", "500ms"), ("1m0.25s", "1m0.25s"),
    ("2h45m30.5s", "2h45m30.5s"), ("1000ms", "1s"), ("9223372036854775807ns",
                                                      "2562047h47m16.854775807s"),
])
def test_parse_and_format(text: str, canonical: str) -> None:
    assert format_duration(parse_duration(text)) == canonical


@pytest.mark.parametrize(("text", "message"), [
    ("1", 'time: missing unit in duration "1"'),
    ("1x", 'time: unknown unit "x" in duration "1x"'),
    ("", 'time: invalid duration ""'),
    ("h", 'time: invalid duration "h"'),
    ("-", 'time: invalid duration "-"'),
    ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
])
def test_invalid(text: str, message: str) -> None:
    with pytest.raises(InvalidDuration) as e:
        parse_duration(text)
    assert str(e.value) == message
