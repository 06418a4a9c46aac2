"""gitops_ray.jsonio: the same JSON values as the standard library, and clear refusals."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import struct

import pytest

from gitops_ray import jsonio
from gitops_ray.diff.paths import json_copy, json_equal
from tests.samples import raycluster


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_api_objects_round_trip_as_the_standard_library_reads_them() -> None:
    obj = raycluster("rc", "default")
    obj["metadata"]["annotations"] = {"é": "☃ \u2028 \x00 \"q\" \\", "k": "v"}
    obj["spec"]["numbers"] = [0, -1, 2**63 - 1, -(2**63), 2**64 - 1, 0.1, -0.0, 1e-7, 1e300,
                              5e-324, 1.0, True, False, None]
    for text in (json.dumps(obj).encode(), json.dumps(obj, ensure_ascii=False).encode()):
        got = jsonio.loads(text)
        assert got == json.loads(text)
        assert list(got) == list(obj)  # key order kept
        assert json.loads(jsonio.dumps(got)) == got
    numbers = jsonio.loads(jsonio.dumps(obj))["spec"]["numbers"]
    assert [type(n) for n in numbers] == [type(n) for n in obj["spec"]["numbers"]]
    assert math.copysign(1.0, numbers[6]) == -1.0


def test_floats_read_back_bit_for_bit() -> None:
    rng = random.Random(0)
    for _ in range(2000):
        value = struct.unpack("<d", rng.randbytes(8))[0]
        if not math.isfinite(value):
            continue
        assert jsonio.loads(repr(value).encode()) == value
        assert jsonio.loads(jsonio.dumps(value)) == value


def test_malformed_input_is_a_value_error_naming_a_position_not_the_document() -> None:
    for text in (b'{"token": "s3cret"', b"", b'{"a": NaN}', b"[Infinity]", b'["\\ud800"]',
                 b"\xef\xbb\xbf{}", "{}".encode("utf-16"), b'{"a": s3cret}'):
        with pytest.raises(jsonio.DecodeError) as caught:
            jsonio.loads(text)
        assert isinstance(caught.value, ValueError)
        assert isinstance(caught.value, json.JSONDecodeError)
        assert "s3cret" not in str(caught.value)


def test_decoding_depth_is_bounded_with_a_decode_error_not_a_recursion_error() -> None:
    assert jsonio.loads(_nested(jsonio.MAX_DECODE_DEPTH)) is not None
    with pytest.raises(jsonio.DecodeError):
        jsonio.loads(_nested(jsonio.MAX_DECODE_DEPTH + 1))
    with pytest.raises(jsonio.DecodeError):  # the cost is bounded by the depth, not the size
        jsonio.loads(_nested(1_000_000))


def test_integers_beyond_64_bits_read_as_the_api_server_reads_them() -> None:
    # apimachinery decodes a number that fits no int64 as a float64: so does orjson
    assert jsonio.loads(b"[123456789012345678901234567890]") == [1.2345678901234568e29]
    assert jsonio.loads(str(2**64 - 1).encode()) == 2**64 - 1


@pytest.mark.parametrize("value", [
    {"replicas": 2**64}, {"replicas": -(2**63) - 1}, {"x": [float("nan")]},
    {"x": {"y": float("inf")}}, [-float("inf")], {1: "a"}, {"when": dt.datetime(2026, 1, 1)},
    {"b": b"bytes"}, {"s": {1, 2}}, {"s": "\ud800"},
])
def test_what_json_cannot_hold_exactly_is_refused_on_encode(value: object) -> None:
    with pytest.raises(jsonio.EncodeError) as caught:
        jsonio.dumps(value)
    assert isinstance(caught.value, ValueError)
    assert "not encodable as JSON" in str(caught.value)
    assert jsonio.exact(value) is None


def test_encoding_depth_is_bounded() -> None:
    deep = jsonio.loads(_nested(jsonio.MAX_ENCODE_DEPTH))
    assert jsonio.dumps(deep) == _nested(jsonio.MAX_ENCODE_DEPTH)
    with pytest.raises(jsonio.EncodeError):
        jsonio.dumps([deep])


def test_null_is_encoded_but_never_taken_for_an_exact_round_trip() -> None:
    assert jsonio.dumps({"a": None, "b": "null"}) == b'{"a":null,"b":"null"}'
    assert jsonio.exact({"a": None}) is None  # NaN is written as null too
    assert jsonio.exact({"a": 1}) == b'{"a":1}'


def test_json_copy_and_equality_keep_what_the_fast_path_cannot_hold() -> None:
    odd = {"nan": float("nan"), "big": 2**70, "when": dt.date(2026, 1, 1), "none": None,
           "deep": jsonio.loads(_nested(300)), 1: "int key"}
    copy = json_copy(odd)
    assert copy is not odd and copy["deep"] is not odd["deep"]
    assert math.isnan(copy["nan"]) and copy["big"] == 2**70 and copy["when"] == odd["when"]
    assert copy[1] == "int key" and copy["none"] is None
    obj = raycluster("rc", "default")
    shared = {"a": 1}
    obj["spec"]["x"], obj["spec"]["y"] = shared, shared  # aliased, as YAML anchors are
    copy = json_copy(obj)
    assert copy == obj and copy["spec"]["x"] is not copy["spec"]["y"]
    assert json_equal(obj, copy)
    assert not json_equal({"a": 1}, {"a": True}) and not json_equal({"a": None}, {"a": 0})
    assert not json_equal({"a": float("nan")}, {"a": None})
    assert json_equal({"a": 1}, {"a": 1.0}) and json_equal({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert json_equal({"big": 2**70}, {"big": 2**70})


@pytest.mark.parametrize("text", ["plain", "é ☃ \U0001f600", "a\x85b\u2028c\u2029d",
                                  "\x7f\x80\x9f\ufeff\ufffe\uffff", "\u00a0\ue000\ufffd"])
def test_a_yaml_safe_body_reads_back_exactly_with_nothing_yaml_misreads(text: str) -> None:
    out = jsonio.dumps_yaml_safe({"v": text, "n": [1, 2.5, True, None]})
    assert json.loads(out) == {"v": text, "n": [1, 2.5, True, None]}
    for raw in ("\x7f", "\x85", "\u2028", "\u2029", "\ufeff", "\ufffe", "\uffff", "\x80"):
        assert raw.encode() not in out
    assert "\U0001f600".encode() in out or "\U0001f600" not in text  # raw, never a pair
