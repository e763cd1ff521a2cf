"""Schema regexes (`pattern`, `patternProperties`) matched in linear time, with RE2.

Python's `re` backtracks: `^(a+)+$` against 26 a's and a `!` holds a worker for
seconds, and any producer could send that. RE2 never backtracks. It reads
Python's regex syntax except backreferences and lookarounds, which cannot be
matched in linear time: such patterns are refused when a schema is registered
(`pattern_problem`).

Where the two engines read the same text differently, the pattern is rewritten
so RE2 matches what `re` matched: `\\d`, `\\w` and `\\s` are Unicode in `re`
(ASCII in RE2), and `$` also matches before a final newline in `re`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]

_WORD = r"\p{L}\p{N}_"
_SPACE = (r"\t\n\x{0b}\f\r \x{1c}-\x{1f}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}"
          r"\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}")
_OUTSIDE = {"d": r"\p{Nd}", "D": r"\P{Nd}", "w": f"[{_WORD}]", "W": f"[^{_WORD}]",
            "s": f"[{_SPACE}]", "S": f"[^{_SPACE}]", "Z": r"\z"}
_INSIDE = {"d": r"\p{Nd}", "D": r"\P{Nd}", "w": _WORD, "s": _SPACE}

_UNANCHORED = re2._Anchor.UNANCHORED
_NO_MATCH = (-1, -1)

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is an answer, not a log line


class PatternNotLinear(ValueError):
    """The pattern cannot be matched in linear time (or is no regex at all)."""


def _rewritten(pattern: str) -> str:
    """The pattern in RE2's reading of what Python's `re` means by it."""
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            escaped = pattern[i + 1]
            table = _INSIDE if in_class else _OUTSIDE
            out.append(table.get(escaped, "\\" + escaped))
            i += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
        elif char == "[":
            in_class = True
            out.append(char)
            i += 1
            # A `]` right after `[` or `[^` is a literal, not the end of the class.
            if pattern[i:i + 1] == "^":
                out.append("^")
                i += 1
            if pattern[i:i + 1] == "]":
                out.append("\\]")
                i += 1
            continue
        elif char == "$":
            out.append(r"(?:\n?\z)")
            i += 1
            continue
        out.append(char)
        i += 1
    return "".join(out)


@lru_cache(maxsize=4096)
def compiled(pattern: str) -> Any:
    """The pattern compiled by RE2; `PatternNotLinear` when it cannot be."""
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as error:
        raise PatternNotLinear(f"is not a valid regular expression: {error}") from None
    try:
        return re2.compile(_rewritten(pattern), _OPTIONS)
    except re2.error as error:
        reason = error.args[0].decode() if error.args and isinstance(error.args[0], bytes) \
            else str(error)
        raise PatternNotLinear(
            f"cannot be matched in linear time ({reason}); backreferences and lookarounds"
            " are not supported") from None


def matches_bytes(regex: Any, data: bytes) -> bool:
    """Whether a pattern ``compiled`` here matches anywhere in UTF-8 ``data``.

    Calls RE2's match directly: the wrapper's ``search`` spends twice as long as the
    match itself building a match object that a yes or no does not need (0.56 against
    1.42 us for a short value), and publishing asks once per patterned field of every
    event. ``_regexp`` and ``_Anchor`` are google-re2's own names, pinned in setup.cfg."""
    return regex._regexp.Match(_UNANCHORED, data, 0, len(data))[0] != _NO_MATCH


def search(pattern: str, text: str) -> bool:
    """Whether the pattern matches anywhere in the text, as `re.search` would say."""
    return matches_bytes(compiled(pattern), text.encode())


def pattern_problem(schema: Mapping[str, Any]) -> str | None:
    """Why a pattern of the schema cannot be used, naming where it is; None when all can."""
    from app.registry.json_schema import pointer, walk

    for path, node in walk(schema):
        patterns = []
        if isinstance(node.get("pattern"), str):
            patterns.append(((*path, "pattern"), node["pattern"]))
        if isinstance(node.get("patternProperties"), dict):
            patterns += [((*path, "patternProperties", key), key)
                         for key in node["patternProperties"]]
        for where, pattern in patterns:
            try:
                compiled(pattern)
            except PatternNotLinear as error:
                return f"the pattern at {pointer(where)} ({pattern!r}) {error}"
    return None
