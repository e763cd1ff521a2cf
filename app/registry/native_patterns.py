"""Python regexes re-expressed for jsonschema-rs's own linear matcher, where that is safe.

Events are validated with Python's regex semantics (`linear_regex`), which costs jsonschema-rs a
call back into Python per patterned value (~0.5 us, more than the rest of a small event's
validation). `native_pattern` rewrites a pattern for jsonschema-rs's `RegexOptions` engine when
the native regex is sure to match no string that Python's `re.search` would not: the pattern is
parsed by Python's own parser, and only a monotone subset is taken (characters, ranges, `.`,
groups, alternation, repetition, `^`, `$`, `\\A`, `\\Z`, and `\\d`, `\\w`, `\\s` written as their
ASCII part), each piece matching a subset of what Python's does. `$` is end-of-text natively,
where Python's also matches before a final newline: stricter, never looser. Everything else (flags,
negations, word boundaries, lookarounds, backreferences) gives None.

The result is a quick check, never the last word: a value it refuses is checked as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
"""`format: uuid` as `formats.is_uuid` reads it, for the native matcher (`$` is end of text)."""

_ANCHORS = {
    sre.AT_BEGINNING: "^",
    sre.AT_BEGINNING_STRING: "^",
    sre.AT_END: "$",  # Python's also matches before a final newline: natively stricter
    sre.AT_END_STRING: "$",
}
# The ASCII part of Python's Unicode classes.
_CATEGORIES = {
    sre.CATEGORY_DIGIT: "0-9",
    sre.CATEGORY_WORD: "A-Za-z0-9_",
    sre.CATEGORY_SPACE: "".join(f"\\u{ord(c):04X}" for c in " \t\n\r\f\v"),
}
_SURROGATES = range(0xD800, 0xE000)


class _Unsupported(Exception):
    """The pattern uses something outside the subset."""


def native_pattern(pattern: str) -> str | None:
    """A jsonschema-rs (`RegexOptions`) regex matching a subset of what `re.search(pattern)`
    matches, as much of it as the subset allows; None when `pattern` is outside the subset."""
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    if parsed.state.flags & ~re.UNICODE:
        return None
    try:
        return _sequence(parsed)
    except (_Unsupported, RecursionError):
        return None


def _sequence(items: Iterable[tuple[Any, Any]]) -> str:
    return "".join(_item(op, argument) for op, argument in items)


def _item(op: Any, argument: Any) -> str:
    if op is sre.LITERAL:
        return _character(argument)
    if op is sre.ANY:
        return "."  # natively not \n either, like Python's without DOTALL
    if op is sre.IN:
        return _class(argument)
    if op is sre.MAX_REPEAT or op is sre.MIN_REPEAT:
        low, high, body = argument
        bound = f"{{{low},}}" if high is sre.MAXREPEAT else f"{{{low},{high}}}"
        return f"(?:{_sequence(body)}){bound}" + ("?" if op is sre.MIN_REPEAT else "")
    if op is sre.SUBPATTERN:
        _group, added_flags, removed_flags, body = argument
        if added_flags or removed_flags:
            raise _Unsupported
        return f"(?:{_sequence(body)})"
    if op is sre.BRANCH:
        return "(?:" + "|".join(_sequence(branch) for branch in argument[1]) + ")"
    if op is sre.AT and argument in _ANCHORS:
        return _ANCHORS[argument]
    raise _Unsupported


def _class(items: Iterable[tuple[Any, Any]]) -> str:
    parts = []
    for op, argument in items:
        if op is sre.LITERAL:
            parts.append(_character(argument))
        elif op is sre.RANGE:
            parts.append(f"{_character(argument[0])}-{_character(argument[1])}")
        elif op is sre.CATEGORY and argument in _CATEGORIES:
            parts.append(_CATEGORIES[argument])
        else:  # NEGATE, \D, \W, \S
            raise _Unsupported
    return "[" + "".join(parts) + "]"


def _character(code: int) -> str:
    """A literal character: ASCII letters and digits as they are, others as `\\uXXXX`, which
    means the character itself in and out of classes (no character is special that way)."""
    if code < 0x80 and chr(code).isalnum():
        return chr(code)
    if code > 0xFFFF or code in _SURROGATES:
        raise _Unsupported
    return f"\\u{code:04X}"
