"""Effective schemas per category and mode, event validation with formats, and the cache."""

import copy
import json
from dataclasses import replace

import pytest
from jsonschema import Draft4Validator
from jsonschema.exceptions import best_match

from app.domain.event_type import EventType, EventTypeSchema
from app.registry.effective_schema import DATA_SCHEMA_ID, SchemaNotComposable, effective_schema
from app.registry.event_validator import MAX_ERROR_LENGTH, MAX_NATIVE_DEPTH, EventValidator
from app.registry.formats import EVENT_FORMAT_CHECKER
from app.registry.json_schema import pointer, walk
from app.registry.validator_cache import ValidatorCache

EID = "d765de34-09c0-4bbb-8b1e-7160a33a0791"
OCCURRED_AT = "2016-03-15T23:47:15+01:00"
METADATA = {"eid": EID, "occurred_at": OCCURRED_AT}
ORDER_SCHEMA = {
    "properties": {
        "order_number": {"type": "string"},
        "customer": {"type": "object", "properties": {"id": {"type": "string"}}},
        "lines": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
    },
    "required": ["order_number"],
}


def event_type(category="business", mode="forward", schema=None, name="acme.order-received",
               **changes):
    document = ORDER_SCHEMA if schema is None else schema
    return EventType(
        name,
        "acme",
        category,
        EventTypeSchema("json_schema", json.dumps(document), "1.0.0"),
        compatibility_mode=mode,
        **changes,
    )


def error_for(et, event):
    validator = EventValidator(effective_schema(et))
    error = validator.error_for(event)
    assert validator.is_valid(event) is (error is None)
    return error


def nested(depth):
    event: dict = {}
    for _ in range(depth):
        event = {"child": event}
    return event


TOO_DEEP = "#: the event is nested too deeply to be validated"
TREE_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "children": {"type": "array", "items": {"$ref": "#"}},
    },
}


def test_business_effective_schema_adds_metadata_to_the_custom_properties():
    schema = effective_schema(event_type())
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"order_number", "customer", "lines", "metadata"}
    assert schema["required"] == ["order_number", "metadata"]
    metadata = schema["properties"]["metadata"]
    assert metadata["required"] == ["eid", "occurred_at"]
    assert metadata["properties"]["eid"] == {"type": "string", "format": "uuid"}
    assert metadata["properties"]["occurred_at"] == {"type": "string", "format": "date-time"}


@pytest.mark.parametrize(
    ("event", "error"),
    [
        ({"order_number": "1", "metadata": METADATA}, None),
        ({"order_number": "1", "metadata": METADATA, "extra": 1}, None),
        ({"order_number": "1"}, "#: 'metadata' is a required property"),
        (
            {"order_number": "1", "metadata": {"eid": EID}},
            "#/metadata: 'occurred_at' is a required",
        ),
        (
            {"order_number": "1", "metadata": {**METADATA, "eid": "not-a-uuid"}},
            "#/metadata/eid: 'not-a-uuid' is not a 'uuid'",
        ),
        (
            {"order_number": "1", "metadata": {**METADATA, "occurred_at": "yesterday"}},
            "#/metadata/occurred_at: 'yesterday' is not a 'date-time'",
        ),
        (
            {"order_number": "1", "metadata": {**METADATA, "event_type": "acme.other"}},
            "#/metadata/event_type: 'acme.other' is not one of ['acme.order-received']",
        ),
        (
            {"order_number": "1", "metadata": {**METADATA, "parent_eids": ["nope"]}},
            "#/metadata/parent_eids/0: 'nope' is not a 'uuid'",
        ),
        ({"order_number": 1, "metadata": METADATA}, "#/order_number: 1 is not of type 'string'"),
        ([], "#: [] is not of type 'object'"),
    ],
)
def test_business_events_are_validated_with_formats(event, error):
    found = error_for(event_type(), event)
    assert found == error if error is None else found.startswith(error), found


def test_data_effective_schema_wraps_the_custom_schema_in_data():
    schema = effective_schema(event_type("data"))
    assert schema["required"] == ["data", "metadata", "data_type", "data_op"]
    assert schema["properties"]["data_op"] == {"type": "string", "enum": ["C", "U", "D", "S"]}
    data = schema["properties"]["data"]
    assert data["type"] == "object"
    assert data["properties"] == ORDER_SCHEMA["properties"]


@pytest.mark.parametrize(
    ("event", "error"),
    [
        (
            {
                "metadata": METADATA,
                "data_type": "order",
                "data_op": "C",
                "data": {"order_number": "1"},
            },
            None,
        ),
        (
            {
                "metadata": METADATA,
                "data_type": "order",
                "data_op": "X",
                "data": {"order_number": "1"},
            },
            "#/data_op: 'X' is not one of ['C', 'U', 'D', 'S']",
        ),
        (
            {"metadata": METADATA, "data_type": "order", "data_op": "C", "data": {}},
            "#/data: 'order_number' is a required property",
        ),
        (
            {"metadata": METADATA, "data_type": "order", "data_op": "C", "data": "x"},
            "#/data: 'x' is not of type 'object'",
        ),
        ({"metadata": METADATA, "data_op": "C", "data": {"order_number": "1"}}, "#: 'data_type'"),
    ],
)
def test_data_events_are_validated(event, error):
    found = error_for(event_type("data"), event)
    assert found == error if error is None else found.startswith(error), found


def test_references_inside_a_data_schema_keep_pointing_at_its_own_root():
    document = {
        "definitions": {"positive": {"type": "integer", "minimum": 1}},
        "properties": {"quantity": {"$ref": "#/definitions/positive"}},
    }
    et = event_type("data", schema=document)
    assert effective_schema(et)["properties"]["data"]["id"] == DATA_SCHEMA_ID
    base = {"metadata": METADATA, "data_type": "order", "data_op": "U"}
    assert error_for(et, {**base, "data": {"quantity": 2}}) is None
    assert error_for(et, {**base, "data": {"quantity": 0}}) == (
        "#/data/quantity: 0 is less than the minimum of 1"
    )


def test_undefined_effective_schema_is_the_custom_schema():
    assert effective_schema(event_type("undefined")) == ORDER_SCHEMA
    assert error_for(event_type("undefined"), {"order_number": "1"}) is None
    assert error_for(event_type("undefined"), {}) == "#: 'order_number' is a required property"


@pytest.mark.parametrize("mode", ["compatible", "none"])
@pytest.mark.parametrize("category", ["business", "data", "undefined"])
def test_compatible_and_none_modes_accept_no_undeclared_properties(category, mode):
    et = event_type(category, mode=mode)
    order = {"order_number": "1", "customer": {"id": "c"}, "lines": ["a", 1]}
    if category == "business":
        event = {**order, "metadata": METADATA}
    elif category == "data":
        event = {"metadata": METADATA, "data_type": "o", "data_op": "C", "data": order}
    else:
        event = order
    assert error_for(et, event) is None
    prefix = "#/data" if category == "data" else "#"

    def changed(change):
        broken = copy.deepcopy(event)
        change(broken["data"] if category == "data" else broken)
        return broken

    assert "('surprise' was unexpected)" in error_for(et, changed(lambda e: e.update(surprise=1)))
    nested = error_for(et, changed(lambda e: e["customer"].update(surprise=1)))
    assert nested.startswith(f"{prefix}/customer: Additional properties are not allowed")
    extra_item = error_for(et, changed(lambda e: e["lines"].append(2)))
    assert extra_item.startswith(f"{prefix}/lines: Additional items are not allowed")
    if category != "undefined":
        envelope = {**event, "metadata": {**METADATA, "span_ctx": {"trace": "1"}}}
        assert error_for(et, envelope) is None
        # The spec's EventMetadata is the whole of metadata in these modes, as in Nakadi.
        typo = {**event, "metadata": {**METADATA, "occured_at": "2024-01-01T00:00:00Z"}}
        assert error_for(et, typo) == ("#/metadata: Additional properties are not allowed "
                                       "('occured_at' was unexpected)")


@pytest.mark.parametrize("category", ["business", "data", "undefined"])
def test_forward_mode_accepts_undeclared_properties(category):
    schema = json.dumps(effective_schema(event_type(category, mode="forward")))
    assert 'additionalProperties": false' not in schema
    if category != "undefined":
        event = {"order_number": "1", "metadata": {**METADATA, "trace": "t"}}
        if category == "data":
            event = {"metadata": event.pop("metadata"), "data_type": "o", "data_op": "C",
                     "data": event}
        assert error_for(event_type(category, mode="forward"), event) is None


def test_none_mode_keeps_what_the_schema_states_about_undeclared_properties():
    document = {
        "properties": {
            "tags": {"type": "object", "additionalProperties": {"type": "string"}},
            "open": {"type": "object", "additionalProperties": True},
            "pair": {"type": "array", "items": [{}, {}], "additionalItems": {"type": "integer"}},
            "nothing": {"not": {"type": "object", "properties": {"x": {}}}},
        },
        "patternProperties": {"^x-": {"type": "string"}},
    }
    et = event_type("undefined", mode="none", schema=document)
    assert error_for(et, {"tags": {"a": "b"}, "open": {"z": 1}, "pair": [1, 2, 3]}) is None
    assert error_for(et, {"x-trace": "t"}) is None
    assert error_for(et, {"tags": {"a": 1}}) == "#/tags/a: 1 is not of type 'string'"
    assert "'y-trace' does not match any of the regexes" in error_for(et, {"y-trace": "t"})
    # Inside `not`, forbidding undeclared properties would have let {"x": 1, "y": 2} through.
    assert error_for(et, {"nothing": {"x": 1, "y": 2}}) is not None


def test_compatible_mode_reaches_definitions_and_composed_schemas():
    document = {
        "definitions": {"thing": {"properties": {"x": {}}}},
        "properties": {"a": {"anyOf": [{"type": "object"}, {"type": "string"}]}},
    }
    schema = effective_schema(event_type("undefined", mode="compatible", schema=document))
    assert schema["additionalProperties"] is False
    assert schema["definitions"]["thing"]["additionalProperties"] is False
    assert schema["properties"]["a"]["anyOf"][0]["additionalProperties"] is False
    assert "additionalProperties" not in schema["properties"]["a"]["anyOf"][1]


def test_compact_cleanup_requires_a_compaction_key():
    et = event_type(cleanup_policy="compact")
    assert error_for(et, {"order_number": "1", "metadata": METADATA}).startswith(
        "#/metadata: 'partition_compaction_key' is a required property"
    )
    event = {"order_number": "1", "metadata": {**METADATA, "partition_compaction_key": "k"}}
    assert error_for(et, event) is None
    event["metadata"]["partition_compaction_key"] = ""
    assert error_for(et, event) == \
        "#/metadata/partition_compaction_key: '' should be non-empty"


@pytest.mark.parametrize("category", ["business", "data"])
@pytest.mark.parametrize("engine", ["jsonschema-rs", "jsonschema"])
def test_only_compacted_event_types_take_a_compaction_key(category, engine):
    """001: "Must be absent otherwise." Nakadi refuses it too; both engines say why."""
    schema = {**ORDER_SCHEMA, "patternProperties": {"^x-": {}}} if engine == "jsonschema" \
        else ORDER_SCHEMA
    et = event_type(category, schema=schema)
    assert EventValidator(effective_schema(et)).engine == engine
    metadata = {**METADATA, "partition_compaction_key": "k"}
    event = ({"order_number": "1", "metadata": metadata} if category == "business" else
             {"metadata": metadata, "data_type": "order", "data_op": "C",
              "data": {"order_number": "1"}})
    message = error_for(et, event)
    assert message.startswith("#/metadata/partition_compaction_key: 'k' should not be valid")
    assert "only compacted event types take a compaction key" in message


def test_effective_schema_leaves_its_inputs_alone():
    custom = copy.deepcopy(ORDER_SCHEMA)
    et = event_type("business", mode="compatible")
    effective_schema(et, custom)
    assert custom == ORDER_SCHEMA


def test_effective_schema_of_an_older_version():
    older = {"properties": {"legacy": {"type": "string"}}}
    schema = effective_schema(event_type(), older)
    assert set(schema["properties"]) == {"legacy", "metadata"}


def test_long_error_messages_are_cut():
    et = event_type("undefined", schema={"properties": {"a": {"type": "string"}}})
    error = error_for(et, {"a": ["x" * 1000]})
    assert len(error) <= len("#/a: ") + MAX_ERROR_LENGTH
    assert error.endswith("...")


def test_an_event_nested_too_deeply_is_an_error_not_a_crash():
    et = event_type("undefined", schema={"properties": {"child": {"$ref": "#"}}})
    assert error_for(et, nested(5000)) == TOO_DEEP


@pytest.mark.parametrize(
    ("schema", "event", "error"),
    [
        # Validated through, but deeper than jsonschema-rs converts values to compare or report.
        ({"properties": {"a": {"uniqueItems": True}}}, {"a": [nested(300), nested(300)]}, TOO_DEEP),
        ({"properties": {"a": {"type": "string"}}}, {"a": nested(300)}, TOO_DEEP),
        # Not looked into: the schema says nothing about what is below `a`.
        ({"properties": {"a": {"type": "object"}}}, {"a": nested(100_000)}, None),
    ],
)
def test_deep_events_never_crash_the_native_engine(schema, event, error):
    validator = EventValidator(schema)
    assert validator.engine == "jsonschema-rs"
    assert validator.error_for(event) == error
    assert validator.is_valid(event) is (error is None)


def test_valid_events_need_no_error():
    validator = EventValidator(effective_schema(event_type()))
    assert validator.engine == "jsonschema-rs"
    assert validator.is_valid({"order_number": "1", "metadata": METADATA})
    assert not validator.is_valid({"order_number": 1, "metadata": METADATA})


@pytest.mark.parametrize(
    ("schema", "event"),
    [
        ({"type": "string"}, 1),
        ({"required": ["a", "b"]}, {"b": 1}),
        ({"enum": ["C", "U"]}, "X"),
        ({"properties": {"e": {"format": "uuid"}}}, {"e": "x"}),
        ({"additionalProperties": False, "properties": {"a": {}}}, {"a": 1, "c": 2, "b": 1}),
        ({"additionalProperties": False}, {"b": 1}),
        ({"properties": {"o": {"additionalProperties": False}}}, {"o": {"c": 1, "b": {}}}),
        ({"items": [{}], "additionalItems": False}, [1, 2, 3]),
        ({"items": [{}], "additionalItems": False}, [1, 2]),
        ({"minimum": 1}, 0),
        ({"minimum": 1, "exclusiveMinimum": True}, 1),
        ({"maximum": 1.5}, 2),
        ({"maximum": 1, "exclusiveMaximum": True}, 1),
        ({"minLength": 1}, ""),
        ({"minLength": 3}, "ab"),
        ({"maxLength": 0}, "a"),
        ({"maxLength": 1}, "ab"),
        ({"minItems": 1}, []),
        ({"minItems": 2}, [1]),
        ({"maxItems": 0}, [1]),
        ({"maxItems": 1}, [1, 2]),
        ({"minProperties": 1}, {}),
        ({"minProperties": 2}, {"a": 1}),
        ({"maxProperties": 0}, {"a": 1}),
        ({"maxProperties": 1}, {"a": 1, "b": 2}),
        ({"multipleOf": 3}, 7),
        ({"uniqueItems": True}, [{"a": 1}, {"a": 1}]),
        ({"pattern": "^[a-z]+$"}, "ABC"),
        ({"not": {"type": "string"}}, "x"),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 1.5),
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, 1.5),
        ({"anyOf": [{"type": "object", "required": ["x"]}, {"type": "string"}]}, {}),
        (
            {
                "properties": {
                    "a": {"anyOf": [{"properties": {"b": {"type": "string"}}}, {"type": "array"}]}
                }
            },
            {"a": {"b": 1}},
        ),
        (
            {"properties": {"a": {"anyOf": [{"properties": {"b": {"type": "string"}}}]}}},
            {"a": {"b": 1}},
        ),
        ({"allOf": [{"type": "object"}, {"required": ["a"]}]}, {}),
        ({"properties": {"a~b/c": {"items": {"type": "string"}}}}, {"a~b/c": ["x", None]}),
        ({"enum": [{"a": 1}, None, 1.5]}, [True]),
        ({"required": ["q"], "properties": {"a": {"type": "string"}}}, {"a": 1}),
        ({"definitions": {"n": {"minimum": 1}}, "items": {"$ref": "#/definitions/n"}}, [1, 0]),
    ],
)
def test_native_errors_are_those_jsonschema_gave(schema, event):
    validator = EventValidator(schema)
    assert validator.engine == "jsonschema-rs"
    expected = best_match(
        Draft4Validator(schema, format_checker=EVENT_FORMAT_CHECKER).iter_errors(event)
    )
    assert validator.error_for(event) == (
        f"{pointer(list(expected.absolute_path))}: {expected.message}"
    )


@pytest.mark.parametrize(
    ("schema", "event", "error"),
    [
        # jsonschema-rs sorts the types; jsonschema lists them as the schema does.
        ({"type": ["string", "null"]}, 1, "#: 1 is not of type 'null', 'string'"),
        # jsonschema-rs reports a missing dependency as a missing required property.
        ({"dependencies": {"a": ["b"]}}, {"a": 1}, "#: 'b' is a required property"),
        # Of equally relevant errors jsonschema reported the first in the schema's order.
        (
            {"required": ["a"], "properties": {"x": {}}, "additionalProperties": False},
            {"b": 1},
            "#: Additional properties are not allowed ('b' was unexpected)",
        ),
        # jsonschema listed the schemas the instance is valid under.
        (
            {"oneOf": [{"type": "number"}, {"type": "integer"}]},
            1,
            "#: 1 is valid under more than one of the given schemas",
        ),
    ],
)
def test_native_errors_worded_differently(schema, event, error):
    assert EventValidator(schema).error_for(event) == error


@pytest.mark.parametrize(
    ("value", "valid"),
    [("José", True), ("tab\t", False), ("123", True), ("١٢٣", True), ("123\n", True)],
)
def test_patterns_keep_python_regex_semantics(value, valid):
    # jsonschema-rs alone reads ECMA 262 regexes: ASCII-only \w and \d, `$` only at the very end.
    schema = {"properties": {"name": {"pattern": "^\\w+$"}}}
    validator = EventValidator(schema)
    assert validator.engine == "jsonschema-rs"
    error = None if valid else f"#/name: {value!r} does not match '^\\\\w+$'"
    assert validator.error_for({"name": value}) == error


def test_regexes_jsonschema_rs_refuses_are_left_to_jsonschema():
    schema = {"properties": {"code": {"type": "string", "pattern": "(?i)^[a-z]{3}\\Z"}}}
    validator = EventValidator(schema)
    assert validator.engine == "jsonschema"
    assert validator.error_for({"code": "AbC"}) is None
    assert validator.error_for({"code": "AbCd"}) == (
        "#/code: 'AbCd' does not match '(?i)^[a-z]{3}\\\\Z'"
    )


def test_pattern_properties_are_left_to_jsonschema():
    schema = {"patternProperties": {"^\\w+$": {"type": "integer"}}, "additionalProperties": False}
    validator = EventValidator(schema)
    assert validator.engine == "jsonschema"
    assert validator.error_for({"José": 1}) is None
    assert validator.error_for({"José": "1"}) == "#/José: '1' is not of type 'integer'"
    assert validator.error_for({"a b": 1}).startswith("#: 'a b' does not match any of the regexes")


def test_recursive_schemas_are_left_to_jsonschema():
    validator = EventValidator(TREE_SCHEMA)
    assert validator.engine == "jsonschema"
    leaf = {"name": 1}
    assert validator.error_for({"name": "root", "children": [{"children": [leaf]}]}) == (
        "#/children/0/children/0/name: 1 is not of type 'string'"
    )
    assert validator.is_valid({"name": "root", "children": [{"name": "leaf"}]})


def test_recursion_inside_a_data_schema_is_found():
    et = event_type("data", schema=TREE_SCHEMA)
    assert EventValidator(effective_schema(et)).engine == "jsonschema"


@pytest.mark.parametrize(
    ("links", "engine"),
    [(MAX_NATIVE_DEPTH - 2, "jsonschema-rs"), (MAX_NATIVE_DEPTH - 1, "jsonschema")],
)
def test_chains_of_references_deeper_than_the_native_stack_allows_are_left_to_jsonschema(
    links, engine
):
    definitions = {f"d{index}": {"$ref": f"#/definitions/d{index + 1}"} for index in range(links)}
    definitions[f"d{links}"] = {"type": "object"}
    schema = {"definitions": definitions, "$ref": "#/definitions/d0"}
    assert EventValidator(schema).engine == engine


def test_the_cache_compiles_once_per_version():
    cache = ValidatorCache()
    et = event_type()
    first = cache.validator_for(et)
    assert cache.validator_for(replace(et)) is first
    newer = replace(et, schema=replace(et.schema, version="1.1.0"))
    assert cache.validator_for(newer) is not first
    assert len(cache) == 2


def test_the_cache_rebuilds_when_what_the_schema_depends_on_changed():
    cache = ValidatorCache()
    et = event_type()
    first = cache.validator_for(et)
    upgraded = replace(et, compatibility_mode="compatible")
    strict = cache.validator_for(upgraded)
    assert strict is not first
    assert strict.error_for({"order_number": "1", "metadata": METADATA, "x": 1}) is not None
    other = json.dumps({"properties": {"other": {"type": "string"}}})
    recreated = replace(et, schema=replace(et.schema, schema=other))
    assert cache.validator_for(recreated).error_for({"metadata": METADATA}) is None


def test_the_cache_evicts_the_least_recently_used_and_forgets_on_request():
    cache = ValidatorCache(max_entries=2)
    a, b, c = (event_type(name=name) for name in ("a", "b", "c"))
    validator_a = cache.validator_for(a)
    cache.validator_for(b)
    assert cache.validator_for(a) is validator_a  # a is now the most recently used
    cache.validator_for(c)
    assert len(cache) == 2
    assert cache.validator_for(a) is validator_a
    cache.forget("a")
    assert cache.validator_for(a) is not validator_a


def test_the_cache_needs_room_for_one():
    with pytest.raises(ValueError, match="max_entries"):
        ValidatorCache(max_entries=0)


ROOT_REF_SCHEMA = {
    "$ref": "#/definitions/O",
    "definitions": {"O": {"type": "object", "properties": {"order_number": {"type": "string"}}}},
}
BASE_AND_EXTENSION = {
    "definitions": {
        "Base": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    },
    "allOf": [{"$ref": "#/definitions/Base"}, {"properties": {"extra": {"type": "integer"}}}],
}


def with_metadata(category, payload):
    """`payload` as an event of `category` (for data, it is the event's data)."""
    if category == "business":
        return {**payload, "metadata": METADATA}
    if category == "data":
        return {"metadata": METADATA, "data_type": "t", "data_op": "C", "data": payload}
    return payload


@pytest.mark.parametrize("mode", ["forward", "compatible", "none"])
def test_a_business_schema_whose_root_is_a_reference_gets_metadata_validated(mode):
    """Draft 4 ignores the keywords beside a `$ref`: `metadata` must not be added there."""
    et = event_type("business", mode=mode, schema=ROOT_REF_SCHEMA)
    assert error_for(et, {"order_number": "x", "metadata": METADATA}) is None
    assert error_for(et, {"order_number": "x"}) == "#: 'metadata' is a required property"
    assert error_for(et, {"order_number": "x", "metadata": "m"}) == (
        "#/metadata: 'm' is not of type 'object'")
    bad_eid = {"order_number": "x", "metadata": {**METADATA, "eid": "nope"}}
    assert error_for(et, bad_eid) == "#/metadata/eid: 'nope' is not a 'uuid'"
    assert error_for(et, {"order_number": 1, "metadata": METADATA}) == (
        "#/order_number: 1 is not of type 'string'")
    surprise = error_for(et, {"order_number": "x", "metadata": METADATA, "surprise": 1})
    if mode == "forward":
        assert surprise is None
    else:
        assert surprise == "#: Additional properties are not allowed ('surprise' was unexpected)"


def test_the_keywords_beside_a_root_reference_stay_ignored():
    document = {**ROOT_REF_SCHEMA, "required": ["nothing"], "id": "http://example.com/x"}
    et = event_type("business", schema=document)
    schema = effective_schema(et)
    assert "id" not in schema
    assert error_for(et, {"order_number": "x", "metadata": METADATA}) is None


@pytest.mark.parametrize("mode", ["forward", "compatible", "none"])
def test_a_data_schema_whose_root_is_a_reference_resolves_against_itself(mode):
    """The custom schema's own `id` lets its `#/...` references mean its root; draft 4
    ignores an `id` beside a `$ref`, so the reference is moved into `allOf`."""
    et = event_type("data", mode=mode, schema=ROOT_REF_SCHEMA)
    assert effective_schema(et)["properties"]["data"]["id"] == DATA_SCHEMA_ID
    assert error_for(et, with_metadata("data", {"order_number": "x"})) is None
    assert error_for(et, with_metadata("data", {"order_number": 1})) == (
        "#/data/order_number: 1 is not of type 'string'")
    surprise = error_for(et, with_metadata("data", {"order_number": "x", "surprise": 1}))
    if mode == "forward":
        assert surprise is None
    else:
        assert surprise == (
            "#/data: Additional properties are not allowed ('surprise' was unexpected)")


@pytest.mark.parametrize("mode", ["compatible", "none"])
def test_an_undefined_schema_whose_root_is_a_reference_refuses_undeclared_properties(mode):
    et = event_type("undefined", mode=mode, schema=ROOT_REF_SCHEMA)
    assert error_for(et, {"order_number": "x"}) is None
    assert error_for(et, {"order_number": "x", "surprise": 1}) == (
        "#: Additional properties are not allowed ('surprise' was unexpected)")


def test_an_undefined_forward_schema_whose_root_is_a_reference_is_kept_as_given():
    assert effective_schema(event_type("undefined", schema=ROOT_REF_SCHEMA)) == ROOT_REF_SCHEMA


@pytest.mark.parametrize("mode", ["compatible", "none"])
@pytest.mark.parametrize("category", ["business", "data", "undefined"])
@pytest.mark.parametrize("keyword", ["allOf", "anyOf", "oneOf"])
def test_properties_declared_by_composition_branches_are_accepted(category, mode, keyword):
    """additionalProperties sees only its own object's `properties`: the root, and each
    branch, must also accept what the other branches declare."""
    document = {keyword: [
        {"properties": {"a": {"type": "string"}}, "required": ["a"]},
        {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
    ]}
    if keyword == "oneOf":  # one branch, not both
        document[keyword][1]["required"] = ["b", "c"]
        document[keyword][1]["properties"]["c"] = {}
    et = event_type(category, mode=mode, schema=document)
    prefix = "#/data" if category == "data" else "#"
    assert error_for(et, with_metadata(category, {"a": "x", "b": 1})) is None
    missing_b = error_for(et, with_metadata(category, {"a": "x"}))
    if keyword == "allOf":
        assert missing_b == f"{prefix}: 'b' is a required property"
    else:
        assert missing_b is None
    refused = error_for(et, with_metadata(category, {"a": "x", "b": 1, "surprise": 1}))
    assert refused is not None
    assert refused.startswith(prefix)
    assert "surprise" in refused
    if keyword == "allOf":
        assert error_for(et, with_metadata(category, {"a": "x", "b": "y"})) == (
            f"{prefix}/b: 'y' is not of type 'integer'")


@pytest.mark.parametrize("mode", ["compatible", "none"])
@pytest.mark.parametrize("category", ["business", "data", "undefined"])
def test_a_referenced_base_with_an_extension_accepts_both(category, mode):
    et = event_type(category, mode=mode, schema=BASE_AND_EXTENSION)
    prefix = "#/data" if category == "data" else "#"
    assert error_for(et, with_metadata(category, {"id": "1", "extra": 2})) is None
    assert error_for(et, with_metadata(category, {"id": "1"})) is None
    assert error_for(et, with_metadata(category, {"extra": 2})) == (
        f"{prefix}: 'id' is a required property")
    assert error_for(et, with_metadata(category, {"id": "1", "extra": "2"})) == (
        f"{prefix}/extra: '2' is not of type 'integer'")
    assert error_for(et, with_metadata(category, {"id": "1", "surprise": 2})) == (
        f"{prefix}: Additional properties are not allowed ('surprise' was unexpected)")


def test_a_referenced_definition_keeps_its_own_properties_for_its_other_uses():
    document = {**BASE_AND_EXTENSION, "properties": {"parent": {"$ref": "#/definitions/Base"}}}
    et = event_type("undefined", mode="compatible", schema=document)
    schema = effective_schema(et)
    assert set(schema["definitions"]["Base"]["properties"]) == {"id"}
    assert error_for(et, {"id": "1", "parent": {"id": "2"}}) is None
    assert error_for(et, {"id": "1", "parent": {"id": "2", "extra": 1}}) == (
        "#/parent: Additional properties are not allowed ('extra' was unexpected)")


def test_composition_is_followed_through_nested_branches_and_reference_chains():
    document = {
        "definitions": {
            "Named": {"properties": {"name": {"type": "string"}}},
            "Alias": {"$ref": "#/definitions/Named"},
            "Dated": {"allOf": [{"$ref": "#/definitions/Alias"},
                                {"properties": {"at": {"type": "string"}}}]},
        },
        "properties": {"item": {"allOf": [
            {"$ref": "#/definitions/Dated"},
            {"anyOf": [{"properties": {"kind": {"enum": ["a"]}}}, {"required": ["kind"]}]},
        ]}},
    }
    et = event_type("undefined", mode="compatible", schema=document)
    assert error_for(et, {"item": {"name": "n", "at": "t", "kind": "a"}}) is None
    assert error_for(et, {"item": {"name": 1}}) == "#/item/name: 1 is not of type 'string'"
    assert "'surprise' was unexpected" in error_for(et, {"item": {"name": "n", "surprise": 1}})


def test_recursive_compositions_end():
    document = {
        "definitions": {
            "Named": {"properties": {"name": {"type": "string"}}},
            "Node": {"allOf": [{"$ref": "#/definitions/Named"}, {"properties": {
                "children": {"type": "array", "items": {"$ref": "#/definitions/Node"}}}}]},
            # Draft 4 itself never ends validating these; building the schema must end.
            "Self": {"allOf": [{"$ref": "#/definitions/Self"}, {"properties": {"x": {}}}]},
            "Loop": {"anyOf": [{"$ref": "#/definitions/Loop"}, {"properties": {"y": {}}}]},
        },
        "properties": {"tree": {"$ref": "#/definitions/Node"}},
    }
    et = event_type("business", mode="compatible", schema=document)
    schema = effective_schema(et)
    assert len(schema["definitions"]) < 10
    tree = {"name": "root", "children": [{"name": "leaf", "children": []}]}
    assert error_for(et, {"tree": tree, "metadata": METADATA}) is None
    tree["children"][0]["surprise"] = 1
    assert "'surprise' was unexpected" in error_for(et, {"tree": tree, "metadata": METADATA})


def test_none_mode_branches_follow_what_their_object_states():
    document = {
        "additionalProperties": True,
        "allOf": [{"properties": {"a": {"type": "string"}}}],
        "properties": {"o": {"allOf": [{"properties": {"b": {}}}]}},
    }
    et = event_type("undefined", mode="none", schema=document)
    assert error_for(et, {"a": "x", "anything": 1, "o": {"b": 1}}) is None
    assert "'c' was unexpected" in error_for(et, {"o": {"b": 1, "c": 1}})


def test_not_stays_untouched_with_composition():
    document = {"allOf": [{"properties": {"a": {}}}],
                "properties": {"n": {"not": {"allOf": [{"properties": {"x": {}}}]}}}}
    schema = effective_schema(event_type("undefined", mode="none", schema=document))
    assert schema["properties"]["n"]["not"] == {"allOf": [{"properties": {"x": {}}}]}
    et = event_type("undefined", mode="none", schema=document)
    assert error_for(et, {"a": 1, "n": {"x": 1, "y": 2}}) is not None


def test_composition_leaves_the_custom_schema_alone():
    custom = copy.deepcopy(BASE_AND_EXTENSION)
    effective_schema(event_type("business", mode="compatible"), custom)
    assert custom == BASE_AND_EXTENSION
    root_ref = copy.deepcopy(ROOT_REF_SCHEMA)
    effective_schema(event_type("data", mode="compatible"), root_ref)
    assert root_ref == ROOT_REF_SCHEMA


def _property_entries(schema) -> int:
    """How many names all the `properties` of a schema hold, definitions included."""
    return sum(len(node["properties"]) for _, node in walk(schema)
               if isinstance(node.get("properties"), dict))


@pytest.mark.parametrize("keyword", ["allOf", "anyOf"])
@pytest.mark.parametrize("owner", ["root", "typed"])
def test_branches_of_an_object_that_refuses_for_them_stay_as_given(keyword, owner):
    """Each of n branches was given the names of all: 5,000 one-property branches made an
    effective schema of 25M names, and creating the event type took minutes."""
    branches = [{"properties": {f"p{i}": {"type": "integer"}}} for i in range(300)]
    composed = {"type": "object", keyword: branches}
    document = composed if owner == "root" else {"properties": {"o": composed}}
    et = event_type("undefined", mode="compatible", schema=document)
    assert _property_entries(effective_schema(et)) < 2 * 300 + 10
    event = {"p0": 1, "p299": 2}
    if owner != "root":
        event = {"o": event}
    at = "#" if owner == "root" else "#/o"
    assert error_for(et, event) is None
    inner = event if owner == "root" else event["o"]
    inner["surprise"] = 3
    assert error_for(et, event) == (
        f"{at}: Additional properties are not allowed ('surprise' was unexpected)")
    if keyword == "allOf":
        inner.pop("surprise")
        inner["p7"] = "x"
        assert error_for(et, event) == f"{at}/p7: 'x' is not of type 'integer'"


def test_a_referenced_branch_of_such_an_object_needs_one_copy_whatever_the_names():
    document = {
        "definitions": {"Base": {"properties": {"id": {"type": "string"}}}},
        "properties": {
            "a": {"type": "object", "allOf": [{"$ref": "#/definitions/Base"},
                                              {"properties": {"x": {}}}]},
            "b": {"type": "object", "allOf": [{"$ref": "#/definitions/Base"},
                                              {"properties": {"y": {}}}]},
        },
    }
    et = event_type("undefined", mode="compatible", schema=document)
    composed = [name for name in effective_schema(et)["definitions"]
                if name.startswith("nakadi-composed-")]
    assert len(composed) == 1
    assert error_for(et, {"a": {"id": "1", "x": 1}, "b": {"id": "2", "y": 2}}) is None
    assert "'y' was unexpected" in error_for(et, {"a": {"id": "1", "y": 1}})
    assert error_for(et, {"b": {"id": 2}}) == "#/b/id: 2 is not of type 'string'"


def test_too_many_names_for_the_branches_of_an_untyped_object_are_refused():
    """A bare `allOf` under `properties` is not recognisably an object: its branches still
    get each other's names, so their count is bounded."""
    branches = [{"properties": {f"p{i}": {}}} for i in range(200)]
    untyped = event_type("undefined", mode="compatible",
                         schema={"properties": {"o": {"allOf": branches}}})
    with pytest.raises(SchemaNotComposable, match="give such objects `type: object`"):
        effective_schema(untyped)
    few = event_type("undefined", mode="compatible",
                     schema={"properties": {"o": {"allOf": branches[:100]}}})
    assert error_for(few, {"o": {"p0": 1, "p99": 1}}) is None
    assert "'z' was unexpected" in error_for(few, {"o": {"p0": 1, "z": 1}})


def test_too_many_composed_copies_are_refused():
    document = {"definitions": {f"d{i}": {"properties": {f"p{i}": {}}} for i in range(300)},
                "allOf": [{"$ref": f"#/definitions/d{i}"} for i in range(300)]}
    with pytest.raises(SchemaNotComposable, match="composes too many schemas"):
        effective_schema(event_type("undefined", mode="compatible", schema=document))
