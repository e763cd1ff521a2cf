"""Standard JSON only, by either parser (orjson, or the standard library for long numbers)."""

from __future__ import annotations

import pytest

from app.strict_json import InvalidJson, find_nul, loads

LONG = b"1234567890123456789012"  # sends the text to the standard library's parser


@pytest.mark.parametrize("body", [b"[NaN]", b"[-Infinity]", b"[Infinity]",
                                  b"[NaN, " + LONG + b"]", b"[-Infinity, " + LONG + b"]"])
def test_non_standard_constants_are_refused(body):
    with pytest.raises(InvalidJson):
        loads(body)


@pytest.mark.parametrize("body", [b"[1e400]", b"[1e400, " + LONG + b"]"])
def test_numbers_beyond_a_double_are_refused(body):
    with pytest.raises(InvalidJson):
        loads(body)


@pytest.mark.parametrize("body", [b'["\\ud800"]', b'["\\udc00 x"]', b'{"\\ud83d": 1}',
                                  b'["\\ud800", ' + LONG + b"]",
                                  b'{"\\udfff": ' + LONG + b"}"])
def test_lone_surrogates_are_refused(body):
    with pytest.raises(InvalidJson, match="surrogate"):
        loads(body)


@pytest.mark.parametrize("body", [b"[" + b"9" * 4301 + b"]", b'{"a": -' + b"9" * 4301 + b"}",
                                  b"[" + b"1" * 100_000 + b"]"])
def test_integers_longer_than_python_converts_are_refused_not_a_crash(body):
    with pytest.raises(InvalidJson, match="digits; at most 4300"):
        loads(body)


def test_integers_of_up_to_4300_digits_are_kept():
    assert loads(b"[" + b"9" * 4300 + b", -" + b"8" * 4300 + b"]") == [int("9" * 4300),
                                                                     -int("8" * 4300)]


def test_surrogate_pairs_and_long_integers_are_kept():
    assert loads(b'["\\ud83d\\ude00", ' + LONG + b"]") == ["\U0001F600", int(LONG)]


@pytest.mark.parametrize("depth", [1100, 5000])
@pytest.mark.parametrize("tail", [b"", b"," + LONG])
def test_deep_nesting_is_refused_not_a_crash(depth, tail):
    with pytest.raises(InvalidJson, match=r"depth|deep"):
        loads(b"[" * depth + b"1" + tail + b"]" * depth)


def test_extra_data_after_the_value_is_refused():
    with pytest.raises(InvalidJson):
        loads(LONG + b" 1")


def test_nul_characters_are_found_with_their_path():
    assert find_nul({"a": [1, {"b": "x\x00"}]}) == "a[1].b"
    assert find_nul({"k\x00": 1}) == "the object (a key)"
    assert find_nul({"a": ["fine"]}) is None


def test_nul_characters_are_found_as_deep_as_bodies_nest():
    """Bodies nest up to 1024 levels, past Python's recursion limit."""
    depth = 1020
    assert find_nul(loads(b"[" * depth + b'"a\\u0000"' + b"]" * depth)) == "[0]" * depth
    assert find_nul(loads(b'{"k":' * depth + b'"fine"' + b"}" * depth)) is None
