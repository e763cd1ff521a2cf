"""Reading JSON from clients: standard JSON only, the same rules whichever parser runs.

orjson is the fast path. It turns integers beyond 64 bits into floats, so text
with a run of 19 digits goes to the standard library's parser, which is told
to be as strict: no ``NaN``/``Infinity``, no number too large for a double, no
integer of more than ``MAX_INTEGER_DIGITS`` digits, no lone UTF-16 surrogate, and
nesting refused past about a thousand levels (orjson stops at 1024, the standard
library at Python's recursion limit). A consumer must be
able to parse every event it is sent, and PostgreSQL refuses what these rules
keep out.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

import orjson

# A run of 19 digits, found by turning every digit into "0": 0.22 ms on a batch of
# 1,000 events (a 250 KB body, which orjson parses in 0.5 ms), RE2 0.36 ms, and
# Python's re, retrying at every digit, 17 ms.
DIGITS_AS_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
NINETEEN_DIGITS = b"0" * 19
# A \uD800-\uDFFF escape: a surrogate, which is fine only as half of a pair.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
MAX_INTEGER_DIGITS = min(sys.get_int_max_str_digits() or 4300, 4300)
"""Python's default limit for turning digits into an integer, whose cost grows with the
square of their number (CVE-2020-10735); past it ``int()`` raises, which was a 500."""


class InvalidJson(ValueError):
    """Not standard JSON; the message says where and why."""


def loads(data: bytes) -> Any:
    """The value of a JSON text (UTF-8 bytes)."""
    if NINETEEN_DIGITS not in data.translate(DIGITS_AS_ZERO):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as error:
            raise InvalidJson(str(error)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidJson(f"the text is not UTF-8: {error}") from None
    value, end = raw_decode(text, _skip_whitespace(text, 0))
    if _skip_whitespace(text, end) != len(text):
        raise InvalidJson(f"extra data at character {end}")
    return value


def raw_decode(text: str, index: int) -> tuple[Any, int]:
    """One JSON value starting at ``index`` and the index after it, by the standard
    library's parser under the rules above."""
    try:
        value, end = _DECODER.raw_decode(text, index)
    except json.JSONDecodeError as error:
        raise InvalidJson(str(error)) from None
    except RecursionError:
        raise InvalidJson("nested too deeply (about 1,000 levels at most)") from None
    if SURROGATE_ESCAPE.search(text, index, end) is not None:
        _check_strings(value)
    return value, end


def nesting(value: Any, limit: int) -> int:
    """How deeply ``value`` nests arrays and objects (0 for a scalar), counted up to one
    past ``limit``; level by level, without recursing."""
    depth, level = 0, [value]
    while level:
        depth += 1
        if depth > limit:
            return depth
        following: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                following.extend(item.values())
            elif isinstance(item, list):
                following.extend(item)
        level = following
    return depth - 1


def find_nul(value: Any) -> str | None:
    """The path of the first string or key holding a NUL character, if any (PostgreSQL
    text and jsonb refuse them). Walks with a stack of its own, not by recursing: the
    values orjson accepts nest up to 1024 levels, past Python's recursion limit."""
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        path, item = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return path or "the value"
        elif isinstance(item, dict):
            for key in item:
                if "\x00" in key:
                    return f"{path or 'the object'} (a key)"
            pending += reversed([(f"{path}.{key}" if path else key, child)
                                 for key, child in item.items()])
        elif isinstance(item, list):
            pending += reversed([(f"{path}[{number}]", child)
                                 for number, child in enumerate(item)])
    return None


def _refuse_constant(name: str) -> Any:
    raise InvalidJson(f"{name} is not a JSON value")


def _bounded_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INTEGER_DIGITS:
        raise InvalidJson(f"the integer {text[:20]}... has {digits} digits; at most "
                          f"{MAX_INTEGER_DIGITS} are accepted")
    return int(text)


def _finite_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise InvalidJson(f"the number {text[:40]} is too large")
    return number


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float,
                            parse_int=_bounded_int)


def _check_strings(value: Any) -> None:
    if isinstance(value, str):
        _check_text(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key)
            _check_strings(item)
    elif isinstance(value, list):
        for item in value:
            _check_strings(item)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidJson("a string holds a lone UTF-16 surrogate (\\uD800-\\uDFFF "
                          "escapes must come in pairs)") from None


def _skip_whitespace(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t\n\r":
        index += 1
    return index
