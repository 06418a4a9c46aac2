"""Set-based selectors: Kubernetes semantics for in, notin, exists, !, =, != and errors."""

from __future__ import annotations

import pytest

from gitops_ray.render.shapes.selector import SelectorError, parse_selector

SPOT_GPU = {"gitops-ray.io/market-type": "SPOT", "gitops-ray.io/accelerator-type": "T4"}
ON_DEMAND_CPU = {"gitops-ray.io/market-type": "ON_DEMAND"}
NOTHING: dict[str, str] = {}


@pytest.mark.parametrize(("selector", "spot_gpu", "on_demand_cpu", "nothing"), [
    ("", True, True, True),
    ("gitops-ray.io/market-type in (SPOT)", True, False, False),
    ("gitops-ray.io/market-type in (SPOT, ON_DEMAND)", True, True, False),
    # notin matches objects without the key, as in Kubernetes
    ("gitops-ray.io/market-type notin (SPOT)", False, True, True),
    ("gitops-ray.io/accelerator-type", True, False, False),  # exists
    ("!gitops-ray.io/accelerator-type", False, True, True),
    ("gitops-ray.io/market-type=SPOT", True, False, False),
    ("gitops-ray.io/market-type==SPOT", True, False, False),
    ("gitops-ray.io/market-type!=SPOT", False, True, True),
    # requirements are ANDed
    ("gitops-ray.io/market-type in (SPOT),gitops-ray.io/accelerator-type notin (T4)",
     False, False, False),
    ("gitops-ray.io/market-type in (SPOT), gitops-ray.io/accelerator-type in (T4, L4)",
     True, False, False),
])
def test_semantics(selector: str, spot_gpu: bool, on_demand_cpu: bool, nothing: bool) -> None:
    parsed = parse_selector(selector)
    assert (parsed.matches(SPOT_GPU), parsed.matches(ON_DEMAND_CPU),
            parsed.matches(NOTHING)) == (spot_gpu, on_demand_cpu, nothing)


def test_integer_comparisons() -> None:
    assert parse_selector("gpus>2").matches({"gpus": "4"})
    assert not parse_selector("gpus>2").matches({"gpus": "2"})
    assert parse_selector("gpus<2").matches({"gpus": "1"})
    assert not parse_selector("gpus<2").matches({"gpus": "x"})
    assert not parse_selector("gpus<2").matches({})


def test_empty_value_equality() -> None:
    assert parse_selector("a=").matches({"a": ""})
    assert not parse_selector("a=").matches({})


def test_canonical_string() -> None:
    text = "a in (x,y),!b,c!=d,e,f=g"
    assert str(parse_selector("a in ( x , y ) , !b, c != d, e, f==g")) == text


@pytest.mark.parametrize(("selector", "message"), [
    ("a in (x", "expected ')' at column 8"),
    ("a in ()", "expected a value at column 7"),
    ("a in x", "expected '(' at column 6"),
    ("a b", "expected an operator (=, ==, !=, in, notin, >, <) after 'a' at column 3"),
    ("a,,b", "expected a key at column 3"),
    ("a,", "expected a key at column 3"),
    ("a=@", "unexpected character at column 3"),
    ("Bad_/x", "invalid key 'Bad_/x'"),
    ("a=-x", "invalid value '-x' at column 3"),
    ("a>x", "expected an integer, got 'x' at column 3"),
    ("a in (x) b", "expected ',' at column 10"),
])
def test_syntax_errors_name_the_column(selector: str, message: str) -> None:
    with pytest.raises(SelectorError) as error:
        parse_selector(selector)
    assert str(error.value).startswith(f"selector {selector!r}: ")
    assert message in str(error.value)
