import re

import pytest

from app.registry.event_validator import EventValidator
from app.registry.json_schema import meta_schema_problem
from app.registry.linear_regex import (
    PatternNotLinear,
    compiled,
    matches_bytes,
    pattern_problem,
    search,
)

CATASTROPHIC = r"^(a+)+$"
ATTACK = "a" * 40 + "!"


@pytest.mark.parametrize(("pattern", "text"), [
    (r"^\w+$", "José"), (r"^\d+$", "٣٤"), (r"^\s$", "\u00a0"), (r"^a$", "a\n"),
    (r"^[\w.]+$", "é.x"), (r"[]a]", "]"), (r"^\W$", "!"), (r"x\Z", "x"),
    (r"(?i)abc", "ABC"), (r"^(?P<n>a)b", "ab"), (r"^\D$", "x"),
])
def test_matches_as_python_re_does(pattern, text):
    expected = re.search(pattern, text) is not None
    assert search(pattern, text) == expected
    assert matches_bytes(compiled(pattern), text.encode()) == expected
    assert EventValidator({"properties": {"s": {"pattern": pattern}}}).is_valid({"s": text}) \
        == expected


@pytest.mark.parametrize(("pattern", "text"), [
    (r"^\w+$", "a b"), (r"^a$", "a\nb"), (r"x\Z", "x\n"), (r"^\d$", "x"),
])
def test_refuses_what_python_re_refuses(pattern, text):
    assert not search(pattern, text)
    assert not matches_bytes(compiled(pattern), text.encode())
    assert re.search(pattern, text) is None


def test_catastrophic_pattern_is_matched_without_backtracking():
    assert not search(CATASTROPHIC, ATTACK)
    validator = EventValidator({"properties": {"s": {"pattern": CATASTROPHIC}},
                                "patternProperties": {CATASTROPHIC: {}},
                                "additionalProperties": False})
    assert validator.engine == "jsonschema"
    assert validator.error_for({"s": "aaa"}) is None
    assert "does not match" in validator.error_for({"s": ATTACK})
    assert validator.error_for({ATTACK: 1}) is not None


@pytest.mark.parametrize("pattern", ["a{4294967296}", "(" * 1000 + "a" + ")" * 1000])
def test_patterns_too_large_for_python_re_are_refused_not_a_crash(pattern):
    problem = pattern_problem({"patternProperties": {pattern: {}}})
    assert "is not a valid regular expression" in problem
    schema = {"properties": {"x": {"pattern": pattern}}}
    assert "#/properties/x/pattern" in meta_schema_problem(schema)


@pytest.mark.parametrize("pattern", [r"(a)\1", r"a(?=b)", r"(?<!x)y"])
def test_backreferences_and_lookarounds_are_refused_at_registration(pattern):
    with pytest.raises(PatternNotLinear):
        search(pattern, "ab")
    problem = pattern_problem({"properties": {"x": {"pattern": pattern}}})
    assert "#/properties/x/pattern" in problem and "linear time" in problem
    assert "patternProperties" in pattern_problem({"patternProperties": {pattern: {}}})
