"""Patterns and uuids matched natively must never accept what Python's semantics refuse."""

import json
import random
import re
import uuid

import jsonschema_rs
import pytest

from app.domain.event_type import EventType, EventTypeSchema
from app.registry import event_validator, formats
from app.registry.effective_schema import effective_schema
from app.registry.event_validator import EventValidator
from app.registry.native_patterns import UUID_PATTERN, native_pattern

SUBSET = [
    r"^ORD-[0-9]+$", r"^\w+$", r"^\d{5}$", r"^\s*$", r"^[\d.-]+$", r"(a|bc)*?x{2,5}",
    r"^[A-Z]{3}\Z", r"\Aé+", r"^$", "", r"^.\.$", r"[\]\[^-]", r"^(?:x|)y$", r"^(?P<n>a)b",
    r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-z]{2,}$", r"^\t|\n$", r"^a{2,}?$", r"^[\u00e0-\u00ff]$",
]
TEXTS = [
    "", "a", "ab", "y", "xy", "xx", "abcxxx", "ORD-1", "ORD-1\n", "ORD-", "12345", "١٢٣٤٥",
    "12.-", "ABC", "ABC\n", "abc", "é", "éé", "José", " ", "\t", "\n", "\u00a0", "\r", "a.",
    "a\n.", "]", "[", "^", "-", "ab\n", "aa", "aaa", "a@b.de", "a@b.de\n", "😀", "\u2028",
    "x\ny", "à", "ÿ", "Ā",
]
OUTSIDE = [
    r"(?i)abc", r"(?i:a)b", r"[^a]", r"\D", r"\W+", r"\S", r"\bword\b", r"(?=a)a", r"(?!a)b",
    r"(?<=a)b", r"(a)\1", r"a++", r"(?>a)", r"😀", r"(?m)^a$", r"(?s).", r"(?a)\w", "[",
]


def natively_matches(native: str, text: str) -> bool:
    validator = jsonschema_rs.Draft4Validator({"pattern": native},
                                              pattern_options=jsonschema_rs.RegexOptions())
    return validator.is_valid(text)


@pytest.mark.parametrize("pattern", SUBSET)
def test_native_patterns_match_nothing_python_does_not(pattern):
    native = native_pattern(pattern)
    assert native is not None
    for text in TEXTS:
        if natively_matches(native, text):
            assert re.search(pattern, text), (native, text)


@pytest.mark.parametrize("pattern", SUBSET)
def test_native_patterns_agree_with_python_on_ascii_lines(pattern):
    native = native_pattern(pattern)
    for text in TEXTS:
        if text.isascii() and "\n" not in text:
            assert natively_matches(native, text) == bool(re.search(pattern, text)), text


@pytest.mark.parametrize("pattern", OUTSIDE)
def test_patterns_outside_the_subset_stay_with_python(pattern):
    assert native_pattern(pattern) is None


def test_random_patterns_match_nothing_python_does_not():
    """Patterns built at random from the subset's pieces, against texts built from characters
    on which the native and Python classes differ."""
    rng = random.Random(20261127)
    atoms = ["a", "b", "é", "-", ".", r"\d", r"\w", r"\s", "[a-c]", "[é0-1]", r"[\d_]", r"\.", "٣"]
    characters = ["a", "b", "c", "é", "-", ".", "0", "1", "٣", "_", " ", "\u00a0", "\n", "\r"]

    def piece(depth):
        choice = rng.random()
        if depth < 3 and choice < 0.15:
            return "(" + "|".join(piece(depth + 1) for _ in range(rng.randint(1, 3))) + ")"
        if depth < 3 and choice < 0.3:
            body = "".join(piece(depth + 1) for _ in range(rng.randint(1, 3)))
            return f"(?:{body})" + rng.choice(["*", "+", "?", "{1,2}", "*?", "{2}"])
        return rng.choice(atoms) + rng.choice(["", "", "*", "+", "?"])

    checked = 0
    for _ in range(300):
        pattern = rng.choice(["", "^"]) + "".join(piece(0) for _ in range(rng.randint(1, 4))) \
            + rng.choice(["", "$", r"\Z"])
        native = native_pattern(pattern)
        assert native is not None, pattern
        validator = jsonschema_rs.Draft4Validator({"pattern": native},
                                                  pattern_options=jsonschema_rs.RegexOptions())
        for _ in range(30):
            text = "".join(rng.choice(characters) for _ in range(rng.randint(0, 6)))
            if validator.is_valid(text):
                checked += 1
                assert re.search(pattern, text), (pattern, native, text)
    assert checked > 1000  # the natively matched texts really were compared


def test_the_native_uuid_pattern_is_is_uuid():
    values = [str(uuid.uuid4()), str(uuid.uuid4()).upper(), "", "d765de34", "x" * 36,
              "{d765de34-09c0-4bbb-8b1e-7160a33a0791}", "d765de34-09c0-4bbb-8b1e-7160a33a0791\n",
              "d765de3409c04bbb8b1e7160a33a0791", "\u0660" * 8 + "-09c0-4bbb-8b1e-7160a33a0791"]
    for value in values:
        assert natively_matches(UUID_PATTERN, value) == formats.is_uuid(value), value


def count_python_checks(monkeypatch):
    calls = []
    is_uuid, validate = formats.is_uuid, event_validator._PythonPattern.validate
    monkeypatch.setitem(formats.NATIVE_FORMATS, "uuid",
                        lambda value: calls.append(value) or is_uuid(value))
    monkeypatch.setattr(event_validator._PythonPattern, "validate",
                        lambda self, value: calls.append(value) or validate(self, value))
    return calls


SCHEMA = {"properties": {
    "id": {"type": "string", "format": "uuid"},
    "code": {"type": "string", "format": "uuid", "pattern": "^[0-9a-f-]+$"},
    "name": {"type": "string", "pattern": r"^\w+$"},
    "tag": {"type": "string", "pattern": r"^\D+$"},
}}


def test_valid_events_are_checked_without_calling_python(monkeypatch):
    calls = count_python_checks(monkeypatch)
    validator = EventValidator(SCHEMA)
    event = {"id": str(uuid.uuid4()), "code": str(uuid.uuid4()), "name": "Jose"}
    assert validator.error_for(event) is None
    assert calls == []
    assert validator.error_for({**event, "tag": "x"}) is None
    assert calls == ["x"]  # \D has no native form: only that one is Python's


@pytest.mark.parametrize(("change", "error"), [
    ({"name": "José"}, None),  # \w is Unicode for Python: the quick check refuses, Python not
    ({"name": "Jose\n"}, None),  # $ before a final newline
    ({"id": "D765DE34-09C0-4BBB-8B1E-7160A33A0791"}, None),
    ({"id": "{d765de34-09c0-4bbb-8b1e-7160a33a0791}"},
     "#/id: '{d765de34-09c0-4bbb-8b1e-7160a33a0791}' is not a 'uuid'"),
    ({"code": "D765DE34-09C0-4BBB-8B1E-7160A33A0791"},
     "#/code: 'D765DE34-09C0-4BBB-8B1E-7160A33A0791' does not match '^[0-9a-f-]+$'"),
    ({"code": "0-0"}, "#/code: '0-0' is not a 'uuid'"),
    ({"name": "a b"}, "#/name: 'a b' does not match '^\\\\w+$'"),
    ({"tag": "٣"}, "#/tag: '٣' does not match '^\\\\D+$'"),
])
def test_what_the_quick_check_refuses_is_decided_as_before(change, error):
    event = {"id": str(uuid.uuid4()), "code": "d765de34-09c0-4bbb-8b1e-7160a33a0791",
             "name": "Jose", **change}
    assert EventValidator(SCHEMA).error_for(event) == error


def test_a_pattern_the_walk_does_not_reach_keeps_python_semantics():
    """A `$ref` may point anywhere in the document: a pattern there is not rewritten, and
    jsonschema-rs would read it as ECMA 262 (\\D as not [0-9]), so no quick check is made."""
    schema = {"x-definitions": {"not-a-digit": {"pattern": r"^\D$"}},
              "properties": {"a": {"$ref": "#/x-definitions/not-a-digit"},
                             "id": {"format": "uuid"}}}
    validator = EventValidator(schema)
    assert validator.error_for({"a": "٣"}) == "#/a: '٣' does not match '^\\\\D$'"
    assert validator.error_for({"a": "x", "id": str(uuid.uuid4())}) is None


def test_a_catastrophic_pattern_is_matched_natively_in_linear_time():
    """`^(a+)+$` would backtrack for ages on 40 a's and a `!` in a backtracking engine."""
    validator = EventValidator({"properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}})
    assert native_pattern("^(a+)+$") is not None
    assert validator.error_for({"s": "a" * 40}) is None
    assert validator.error_for({"s": "a" * 40 + "!"}) == \
        f"#/s: '{'a' * 40}!' does not match '^(a+)+$'"


def test_an_error_of_the_quick_check_leaves_the_answer_to_the_full_one():
    class Failing:
        def is_valid(self, event):
            raise ValueError("the quick check failed")

    validator = EventValidator(SCHEMA)
    validator._quick = Failing()
    assert validator.error_for({"name": "Jose"}) is None
    assert validator.all_valid([{"name": "Jose"}]) is False  # only: look at each
    assert validator.error_for({"name": "a b"}) == "#/name: 'a b' does not match '^\\\\w+$'"


@pytest.mark.parametrize(("category", "mode"), [
    ("business", "forward"), ("business", "compatible"), ("data", "none"),
])
def test_business_and_data_events_are_checked_without_calling_python(monkeypatch, category,
                                                                     mode):
    """Every business and data event carries `metadata.eid` (`format: uuid`)."""
    calls = count_python_checks(monkeypatch)
    order = {"type": "object", "properties": {"number": {"type": "string",
                                                         "pattern": "^[0-9]{8}$"}}}
    event_type = EventType("shop.order", "shop", category,
                           EventTypeSchema("json_schema", json.dumps(order), "1.0.0"),
                           compatibility_mode=mode)
    validator = EventValidator(effective_schema(event_type))
    metadata = {"eid": str(uuid.uuid4()), "occurred_at": "2026-11-27T02:00:00Z"}
    order_event = {"number": "00000042"}
    event = {"metadata": metadata, **order_event} if category == "business" else \
        {"metadata": metadata, "data_type": "order", "data_op": "C", "data": order_event}
    assert validator.error_for(event) is None
    assert calls == []
    metadata["eid"] = "not-a-uuid"
    assert validator.error_for(event) == "#/metadata/eid: 'not-a-uuid' is not a 'uuid'"
