"""Hypothesis strategies for hostile HTTP requests: JSON of the wrong type and
shape, JSON that is not standard (NaN, lone surrogates, huge numbers, deep
nesting), NUL characters, broken gzip, bad query parameters and headers. Bodies
that look almost right (a valid body with one part replaced) reach deeper than
random ones, so ``mutated`` starts from a template."""

from __future__ import annotations

import copy
import gzip
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from hypothesis import strategies as st

NASTY_TEXT = [
    "", " ", "\x00", "a\x00b", "\ud800", "\udfff", "é", "\u202e", "\uffff", "💥", "..", "../..",
    "%", "%00", "%ff", "null", "true", "-1", "0", "1e3", "NaN", "Infinity", "2147483648",
    "9" * 40, "-" + "9" * 40, "begin", "BEGIN", "latest", "0.0.0", "001-0001--1",
    "001-0001-000000000000000000", "001-9999-000000000000000001", "x" * 300, "x" * 5000,
    "00000000-0000-0000-0000-000000000000", "user_defined", "*",
]
"""Strings that have broken parsers, databases and regular expressions before."""

NASTY_BODIES = [
    b"", b"null", b"NaN", b"[NaN]", b"-Infinity", b'{"a": Infinity}', b"1e999", b"[1e999]",
    b"-1e999", b"123456789012345678901234567890", b"[-9223372036854775809]", b'"\\ud800"',
    b'["\\udc00"]', b'{"\\ud800": 1}', b'"\\u0000"', b'{"a\\u0000": 1}', b"\x00",
    b"\xff\xfe\x00", b"[1,]", b"{'a': 1}", b'{"a": 1, "a": 2}', b"[" * 5000 + b"]" * 5000,
    b'{"a":' * 3000 + b"1" + b"}" * 3000, b"[" * 100_000, b'"' + b"a" * 200_000 + b'"',
    b"\x1f\x8b\x08\x00garbage", gzip.compress(b"[]") + b"trailing", b"[" + b"9" * 5000 + b"]",
]
"""Raw bodies: what ``json.dumps`` cannot produce."""

QUERY_NAMES = [
    "batch_limit", "stream_limit", "batch_flush_timeout", "stream_timeout",
    "stream_keep_alive_limit", "max_uncommitted_events", "commit_timeout", "offset", "limit",
    "owning_application", "event_type", "show_status", "show_time_lag", "cursors",
    "consumed_offset", "name", "partition", "read_from", "consumer_group", "token",
]

CONTENT_TYPES = [
    None, b"application/json", b"application/json; charset=utf-8",
    b"application/json; charset=latin-1", b"text/plain", b"application/problem+json",
    b"application/x-json-stream", b"multipart/form-data", b"application/json\xff", b"", b";;;",
]
CONTENT_ENCODINGS = [None, b"gzip", b"x-gzip", b"deflate", b"br", b"gzip, gzip", b"identity",
                     b"GZIP", b"\xff"]


@dataclass(repr=False)
class HostileRequest:
    method: str
    path: str
    query: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, bytes] = field(default_factory=dict)
    body: bytes | None = None

    def __repr__(self) -> str:
        """Short enough to read in a failure report: long values are cut."""
        def short(value: object) -> str:
            text = repr(value)
            return text if len(text) <= 120 else f"{text[:100]}...<{len(text)} chars>"

        headers = {name: short(value) for name, value in self.headers.items()}
        return (f"HostileRequest({self.method} {short(self.path)}"
                f" query={[(short(n), short(v)) for n, v in self.query]}"
                f" headers={headers} body={short(self.body)})")

    def target(self) -> str:
        """Path and query, percent-encoded byte for byte (lone surrogates as their
        UTF-8-like bytes, which are not UTF-8: also hostile)."""
        query = "&".join(f"{quote_path(name)}={quote_path(value)}" for name, value in self.query)
        return self.path + (f"?{query}" if query else "")


def quote_path(text: str) -> str:
    """Percent-encoded, every byte but letters, digits and ``_.-~``."""
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def text() -> st.SearchStrategy[str]:
    """Short strings of any code point (surrogates and NUL included), or a nasty one."""
    return st.one_of(st.sampled_from(NASTY_TEXT), st.text(max_size=20),
                     st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF),
                             max_size=10))


def scalars() -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), st.booleans(), text(),
                     st.integers(min_value=-(2 ** 80), max_value=2 ** 80),
                     st.sampled_from([0, -1, 2 ** 31, 2 ** 63, -(2 ** 63) - 1, 10 ** 30]),
                     st.floats(allow_nan=False, allow_infinity=False))


def json_values() -> st.SearchStrategy[Any]:
    """JSON values of any type and shape (dumped by ``json.dumps``, so standard JSON
    unless a string holds a lone surrogate)."""
    return st.recursive(scalars(), lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(text(), inner, max_size=4)), max_leaves=12)


def _places(value: Any, at: tuple = ()) -> list[tuple]:
    """Every path into a JSON value, the root included."""
    found = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _places(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _places(item, (*at, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, template: Any) -> Any:
    """The template with one to three of its parts replaced, removed or wrapped."""
    value = copy.deepcopy(template)
    for _ in range(draw(st.integers(1, 3))):
        place = draw(st.sampled_from(_places(value)))
        action = draw(st.sampled_from(["replace", "remove", "wrap", "add"]))
        if not place:
            value = draw(json_values()) if action == "replace" else [value]
            continue
        parent = value
        for key in place[:-1]:
            parent = parent[key]
        key = place[-1]
        if action == "replace":
            parent[key] = draw(json_values())
        elif action == "remove":
            del parent[key]
        elif action == "wrap":
            parent[key] = [parent[key]]
        elif isinstance(parent[key], dict):
            parent[key][draw(text())] = draw(json_values())
        else:
            parent[key] = {"value": parent[key]}
    return value


def _dumped(value: Any) -> bytes:
    return json.dumps(value).encode()  # escapes lone surrogates as \ud800: still sent


def weighted(draw: st.DrawFn, *choices: tuple[int, st.SearchStrategy[Any]]) -> Any:
    """A value of one of the strategies, chosen in proportion to its weight: the
    fuzzer spends most requests on almost valid input, which reaches deeper."""
    pick = draw(st.integers(0, sum(weight for weight, _ in choices) - 1))
    for weight, strategy in choices:
        if pick < weight:
            return draw(strategy)
        pick -= weight
    raise AssertionError("unreachable")


@st.composite
def bodies(draw: st.DrawFn, templates: list[Any]) -> bytes | None:
    """A request body: mostly a template with parts broken, else the template as it
    is, a raw nasty body, random JSON or none."""
    raw = (1, st.sampled_from(NASTY_BODIES))
    random_json = (1, json_values().map(_dumped))
    if not templates:
        return weighted(draw, (1, st.none()), raw, random_json)
    template = st.sampled_from(templates)
    return weighted(draw, (6, template.flatmap(mutated).map(_dumped)),
                    (2, template.map(_dumped)), raw, random_json)


@st.composite
def query(draw: st.DrawFn, values: list[str]) -> list[tuple[str, str]]:
    """Query parameters: often none; else known names with hostile or real values,
    and random names."""
    value = st.one_of(text(), st.sampled_from(values) if values else text(),
                      json_values().map(json.dumps))
    name = st.one_of(st.sampled_from(QUERY_NAMES), text())
    return weighted(draw, (1, st.just([])), (1, st.lists(st.tuples(name, value), max_size=3)))


@st.composite
def header_values(draw: st.DrawFn, real: list[str]) -> bytes:
    """Header values: mostly printable text (gunicorn itself refuses control
    characters, so those reach only it), some raw bytes; never CR or LF, which
    http.client does not send."""
    printable = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF,
                                      blacklist_characters="\x7f"), max_size=40)
    value = weighted(
        draw, (3, printable.map(lambda t: t.encode("latin-1"))),
        (2, st.sampled_from([r.encode() for r in real] or [b"x"])),
        (1, json_values().map(lambda v: json.dumps(v).encode())),
        (1, st.binary(max_size=40)), (1, st.just(b"Bearer " + b"A" * 5000)))
    return value.replace(b"\r", b"").replace(b"\n", b"")


@st.composite
def headers(draw: st.DrawFn, real: list[str], with_body: bool) -> dict[str, bytes]:
    """Some of the headers the broker reads, each hostile or real; a body is mostly
    declared as JSON, plainly or gzipped."""
    chosen: dict[str, bytes] = {}
    for name in ("X-Flow-Id", "Authorization", "X-Nakadi-StreamId", "X-Nakadi-Cursors"):
        if draw(st.integers(0, 3)) == 0:
            chosen[name] = draw(header_values(real))
    json_type = b"application/json"
    content_type = weighted(draw, (6 if with_body else 0, st.just(json_type)),
                            (2, st.sampled_from(CONTENT_TYPES)))
    if content_type is not None:
        chosen["Content-Type"] = content_type
    encoding = weighted(draw, (6, st.none()), (1, st.just(b"gzip")),
                        (1, st.sampled_from(CONTENT_ENCODINGS)))
    if encoding is not None:
        chosen["Content-Encoding"] = encoding
    return chosen


def maybe_gzipped(request: HostileRequest) -> HostileRequest:
    """A body declared gzip is sent compressed (the nasty bodies keep broken ones)."""
    encoding = request.headers.get("Content-Encoding", b"").lower()
    if request.body is not None and encoding in (b"gzip", b"x-gzip") \
            and not request.body.startswith(b"\x1f\x8b"):
        request.body = gzip.compress(request.body)
    return request


def plain(request: HostileRequest) -> bytes:
    """The request's body as the server reads it, gunzipped when it was sent gzipped."""
    body = request.body or b""
    return gzip.decompress(body) if body.startswith(b"\x1f\x8b") else body
