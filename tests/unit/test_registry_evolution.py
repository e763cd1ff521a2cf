"""Updates: what may change, schema evolution per compatibility mode, and semantic versions."""

import copy
import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from app.domain.event_type_document import event_type_document
from app.registry.evolution import evolve_event_type, initial_event_type, next_version
from app.registry.schema_diff import ChangeKind, Level, schema_changes
from app.registry.settings import RegistrySettings
from app.registry.validation import check_event_type

SETTINGS = RegistrySettings()
CREATED = datetime(2016, 3, 15, 22, 47, 15, 123000, tzinfo=UTC)
NOW = datetime(2016, 4, 1, 8, 0, 0, tzinfo=UTC)
BASE_SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "string", "description": "A"},
        "b": {"type": "integer"},
        "e": {"type": "string", "enum": ["x", "y"]},
    },
    "required": ["a"],
}


def body(schema=None, **changes):
    document = BASE_SCHEMA if schema is None else schema
    result = {
        "name": "acme.thing-changed",
        "owning_application": "acme",
        "category": "business",
        "enrichment_strategies": ["metadata_enrichment"],
        "schema": {
            "type": "json_schema",
            "schema": document if isinstance(document, str) else json.dumps(document),
        },
    }
    result.update(changes)
    return result


def stored_event_type(**changes):
    return initial_event_type(check_event_type(body(**changes), SETTINGS), CREATED)


def update(stored, request_body):
    return evolve_event_type(stored, check_event_type(request_body, SETTINGS, stored=stored), NOW)


def with_schema(change):
    document = copy.deepcopy(BASE_SCHEMA)
    change(document)
    return document


# name -> (new schema, expected per mode: a version, or the refusal text for "refused")
SCHEMA_EVOLUTION = {
    "no change": (BASE_SCHEMA, {"none": "1.0.0", "forward": "1.0.0", "compatible": "1.0.0"}),
    "description changed": (
        with_schema(lambda s: s["properties"]["a"].update(description="The A")),
        {"none": "1.0.1", "forward": "1.0.1", "compatible": "1.0.1"},
    ),
    "title added": (
        with_schema(lambda s: s.update(title="Thing")),
        {"none": "1.0.1", "forward": "1.0.1", "compatible": "1.0.1"},
    ),
    "description removed": (
        with_schema(lambda s: s["properties"]["a"].pop("description")),
        {"none": "1.0.1", "forward": "1.0.1", "compatible": "1.0.1"},
    ),
    "optional property added": (
        with_schema(lambda s: s["properties"].update(c={"type": "string"})),
        {"none": "1.1.0", "forward": "1.1.0", "compatible": "1.1.0"},
    ),
    "nested optional property added": (
        with_schema(
            lambda s: s["properties"].update(
                c={"type": "object", "properties": {"d": {"type": "string"}}}
            )
        ),
        {"none": "1.1.0", "forward": "1.1.0", "compatible": "1.1.0"},
    ),
    "definition added": (
        with_schema(lambda s: s.update(definitions={"id": {"type": "string"}})),
        {"none": "1.1.0", "forward": "1.1.0", "compatible": "1.1.0"},
    ),
    "description changed and optional property added": (
        with_schema(
            lambda s: (
                s["properties"]["a"].update(description="The A"),
                s["properties"].update(c={"type": "string"}),
            )
        ),
        {"none": "1.1.0", "forward": "1.1.0", "compatible": "1.1.0"},
    ),
    "required property added": (
        with_schema(
            lambda s: (s["properties"].update(c={"type": "string"}), s["required"].append("c"))
        ),
        {
            "none": "2.0.0",
            "forward": "2.0.0",
            "compatible": "refused: required property added at #/properties/c",
        },
    ),
    "existing property marked required": (
        with_schema(lambda s: s["required"].append("b")),
        {
            "none": "2.0.0",
            "forward": "2.0.0",
            "compatible": "refused: property marked as required at #/properties/b",
        },
    ),
    "additionalProperties from absent to a schema": (
        with_schema(lambda s: s.update(additionalProperties={"type": "string"})),
        {"none": "2.0.0", "forward": "2.0.0"},
    ),
    "property removed": (
        with_schema(lambda s: s["properties"].pop("b")),
        {
            "none": "2.0.0",
            "forward": "refused: property removed at #/properties/b",
            "compatible": "refused: property removed at #/properties/b",
        },
    ),
    "property no longer required": (
        with_schema(lambda s: s.pop("required")),
        {
            "none": "2.0.0",
            "forward": "refused: property no longer required at #/properties/a",
            "compatible": "refused: property no longer required at #/properties/a",
        },
    ),
    "type changed": (
        with_schema(lambda s: s["properties"]["b"].update(type="string")),
        {
            "none": "2.0.0",
            "forward": "refused: type changed at #/properties/b/type",
            "compatible": "refused: type changed at #/properties/b/type",
        },
    ),
    "enum value added": (
        with_schema(lambda s: s["properties"]["e"]["enum"].append("z")),
        {
            "none": "2.0.0",
            "forward": "refused: enum changed at #/properties/e/enum",
            "compatible": "refused: enum changed at #/properties/e/enum",
        },
    ),
    "constraint added": (
        with_schema(lambda s: s["properties"]["a"].update(maxLength=10)),
        {
            "none": "2.0.0",
            "forward": "refused: keyword added at #/properties/a/maxLength",
            "compatible": "refused: keyword added at #/properties/a/maxLength",
        },
    ),
    "default changed": (
        with_schema(lambda s: s["properties"]["b"].update(default=1)),
        {
            "none": "2.0.0",
            "forward": "refused: keyword added at #/properties/b/default",
            "compatible": "refused: keyword added at #/properties/b/default",
        },
    ),
}
SCHEMA_EVOLUTION_CASES = [
    pytest.param(mode, schema, expected, id=f"{mode}: {name}")
    for name, (schema, by_mode) in SCHEMA_EVOLUTION.items()
    for mode, expected in by_mode.items()
]


@pytest.mark.parametrize(("mode", "new_schema", "expected"), SCHEMA_EVOLUTION_CASES)
def test_schema_evolution_per_compatibility_mode(mode, new_schema, expected):
    stored = stored_event_type(compatibility_mode=mode)
    evolution = update(stored, body(new_schema, compatibility_mode=mode))
    if expected.startswith("refused: "):
        assert evolution.refused
        reasons = [str(refusal) for refusal in evolution.refusals]
        assert any(
            reason.startswith("schema.schema: " + expected.removeprefix("refused: "))
            and f"({mode} mode allows" in reason
            for reason in reasons
        ), reasons
    else:
        assert not evolution.refused, evolution.refusals
        assert evolution.event_type.schema.version == expected
        assert evolution.new_schema_version == (expected != "1.0.0")
        if evolution.new_schema_version:
            assert evolution.event_type.schema.created_at == NOW
            assert evolution.event_type.schema.schema == json.dumps(new_schema)


@pytest.mark.parametrize("mode", ["none", "forward", "compatible"])
def test_versions_keep_counting_from_the_stored_version(mode):
    stored = stored_event_type(compatibility_mode=mode)
    stored = replace(stored, schema=replace(stored.schema, version="3.4.5"))
    patched = update(
        stored, body(with_schema(lambda s: s.update(title="T")), compatibility_mode=mode)
    )
    assert patched.event_type.schema.version == "3.4.6"
    minor = update(
        patched.event_type,
        body(
            with_schema(lambda s: (s.update(title="T"), s["properties"].update(c={}))),
            compatibility_mode=mode,
        ),
    )
    assert minor.event_type.schema.version == "3.5.0"


def test_a_put_that_changes_nothing_keeps_everything():
    stored = stored_event_type()
    evolution = update(stored, body())
    assert not evolution.refused
    assert not evolution.changed
    assert not evolution.new_schema_version
    assert evolution.event_type == stored


def test_formatting_only_changes_keep_the_stored_schema_text_and_version():
    stored = stored_event_type()
    reformatted = json.dumps(dict(reversed(BASE_SCHEMA.items())), indent=2)
    evolution = update(stored, body(reformatted))
    assert not evolution.changed
    assert evolution.event_type.schema == stored.schema


def test_changing_other_fields_updates_without_a_new_schema_version():
    stored = stored_event_type()
    evolution = update(
        stored, body(owning_application="acme-2", options={"retention_time": 10_800_000})
    )
    assert evolution.changed and not evolution.new_schema_version
    event_type = evolution.event_type
    assert event_type.owning_application == "acme-2"
    assert event_type.options.retention_time == 10_800_000
    assert event_type.schema == stored.schema
    assert event_type.created_at == CREATED
    assert event_type.updated_at == NOW


def test_create_starts_at_version_1_0_0():
    event_type = stored_event_type()
    assert event_type.schema.version == "1.0.0"
    assert event_type.schema.created_at == CREATED
    assert event_type.created_at == event_type.updated_at == CREATED


HASHED = {"partition_strategy": "hash", "partition_key_fields": ["a"]}
AUTHORIZATION = {
    "admins": [{"data_type": "user", "value": "a"}],
    "readers": [{"data_type": "user", "value": "a"}],
    "writers": [{"data_type": "user", "value": "a"}],
}
STATISTIC = {
    "messages_per_minute": 10,
    "message_size": 100,
    "read_parallelism": 2,
    "write_parallelism": 2,
}

# (stored changes, requested changes, refused field(s) or None when accepted)
FIELD_CHANGES = {
    "name": ({}, {"name": "acme.other"}, "name"),
    "category": ({}, {"category": "data"}, "category"),
    "cleanup_policy": ({}, {"cleanup_policy": "compact"}, "cleanup_policy"),
    "random to hash": ({}, HASHED, None),
    "random to user_defined": ({}, {"partition_strategy": "user_defined"}, None),
    "hash to random": (
        HASHED,
        {"partition_strategy": "random", "partition_key_fields": []},
        ["partition_strategy", "partition_key_fields"],
    ),
    "hash to user_defined": (
        HASHED,
        {"partition_strategy": "user_defined", "partition_key_fields": []},
        ["partition_strategy", "partition_key_fields"],
    ),
    "user_defined to hash": ({"partition_strategy": "user_defined"}, HASHED, "partition_strategy"),
    "partition keys changed": (
        HASHED,
        {**HASHED, "partition_key_fields": ["b"]},
        "partition_key_fields",
    ),
    "partition keys extended": (
        HASHED,
        {**HASHED, "partition_key_fields": ["a", "b"]},
        "partition_key_fields",
    ),
    "authorization added": ({}, {"authorization": AUTHORIZATION}, None),
    "authorization changed": (
        {"authorization": AUTHORIZATION},
        {"authorization": {**AUTHORIZATION, "readers": [{"data_type": "*", "value": "*"}]}},
        None,
    ),
    "authorization removed": ({"authorization": AUTHORIZATION}, {}, "authorization"),
    "authorization set to null": (
        {"authorization": AUTHORIZATION},
        {"authorization": None},
        "authorization",
    ),
    "audience set": ({}, {"audience": "company-internal"}, None),
    "audience changed": ({"audience": "company-internal"}, {"audience": "external-public"}, None),
    "audience removed": ({"audience": "company-internal"}, {}, "audience"),
    "default_statistic added": ({}, {"default_statistic": STATISTIC}, "default_statistic"),
    "default_statistic changed": (
        {"default_statistic": STATISTIC},
        {"default_statistic": {**STATISTIC, "read_parallelism": 4}},
        "default_statistic",
    ),
    "default_statistic omitted": ({"default_statistic": STATISTIC}, {}, None),
    "ordering fields changed": (
        {},
        {"ordering_key_fields": ["b"], "ordering_instance_ids": ["a"]},
        None,
    ),
    "enrichment unchanged, retention changed": (
        {},
        {"options": {"retention_time": 20_000_000}},
        None,
    ),
    "none to forward": ({"compatibility_mode": "none"}, {"compatibility_mode": "forward"}, None),
    "forward to compatible": ({}, {"compatibility_mode": "compatible"}, None),
    "none to compatible": (
        {"compatibility_mode": "none"},
        {"compatibility_mode": "compatible"},
        "compatibility_mode",
    ),
    "forward to none": ({}, {"compatibility_mode": "none"}, "compatibility_mode"),
    "compatible to forward": (
        {"compatibility_mode": "compatible"},
        {"compatibility_mode": "forward"},
        "compatibility_mode",
    ),
    "compatible to none": (
        {"compatibility_mode": "compatible"},
        {"compatibility_mode": "none"},
        "compatibility_mode",
    ),
    "compatible omitted keeps compatible": ({"compatibility_mode": "compatible"}, {}, None),
    "hash omitted keeps hash": (HASHED, {}, None),
}


@pytest.mark.parametrize(
    ("stored_changes", "requested_changes", "refused_field"),
    [pytest.param(*case, id=name) for name, case in FIELD_CHANGES.items()],
)
def test_which_fields_may_change(stored_changes, requested_changes, refused_field):
    stored = stored_event_type(**stored_changes)
    evolution = update(stored, body(**requested_changes))
    if refused_field is None:
        assert not evolution.refused, evolution.refusals
        for field, value in requested_changes.items():
            assert event_type_document(evolution.event_type)[field] == value
        for field, value in stored_changes.items():
            if field not in requested_changes:
                assert event_type_document(evolution.event_type)[field] == value
    else:
        assert evolution.refused
        expected = [refused_field] if isinstance(refused_field, str) else refused_field
        assert [refusal.field for refusal in evolution.refusals] == expected
        assert evolution.event_type is None


def test_refusals_say_why():
    stored = stored_event_type(**HASHED, compatibility_mode="forward")
    evolution = update(
        stored,
        body(
            name="acme.renamed",
            partition_strategy="random",
            partition_key_fields=[],
            compatibility_mode="none",
        ),
    )
    reasons = {refusal.field: refusal.reason for refusal in evolution.refusals}
    assert reasons["name"] == "cannot be changed (it is 'acme.thing-changed')"
    assert reasons["partition_strategy"] == "can only be changed from random (it is 'hash')"
    assert reasons["partition_key_fields"] == "cannot be changed once set (they are ['a'])"
    assert reasons["compatibility_mode"].startswith("cannot change from forward to none")


@pytest.mark.parametrize("strategy", ["random", "user_defined"])
def test_leaving_hash_without_naming_keys_is_refused_for_the_strategy(strategy):
    """The stored keys used to be kept for the omitted field, and the refusal named them
    (must be absent unless hash) instead of the strategy the client asked for."""
    evolution = update(stored_event_type(**HASHED), body(partition_strategy=strategy))
    reasons = {refusal.field: refusal.reason for refusal in evolution.refusals}
    assert reasons["partition_strategy"] == "can only be changed from random (it is 'hash')"


def test_a_hash_event_type_keeps_its_keys_when_a_put_leaves_both_out():
    evolution = update(stored_event_type(**HASHED), body())
    assert not evolution.refused
    assert list(evolution.event_type.partition_key_fields) == ["a"]


def test_an_upgrade_to_compatible_checks_the_schema_change_against_compatible():
    stored = stored_event_type(compatibility_mode="forward")
    required_added = with_schema(
        lambda s: (s["properties"].update(c={"type": "string"}), s["required"].append("c"))
    )
    evolution = update(stored, body(required_added, compatibility_mode="compatible"))
    assert [str(refusal) for refusal in evolution.refusals] == [
        "schema.schema: required property added at #/properties/c is not allowed "
        "(compatible mode allows only title/description changes and new optional properties "
        "or definitions)"
    ]
    optional_added = with_schema(lambda s: s["properties"].update(c={"type": "string"}))
    evolution = update(stored, body(optional_added, compatibility_mode="compatible"))
    assert evolution.event_type.compatibility_mode == "compatible"
    assert evolution.event_type.schema.version == "1.1.0"


def test_every_refused_schema_change_is_listed():
    stored = stored_event_type()
    document = with_schema(
        lambda s: (s["properties"].pop("b"), s["properties"]["e"].update(type="integer"))
    )
    evolution = update(stored, body(document))
    assert [str(refusal).split(" is not allowed")[0] for refusal in evolution.refusals] == [
        "schema.schema: property removed at #/properties/b",
        "schema.schema: type changed at #/properties/e/type",
    ]


@pytest.mark.parametrize(
    ("old", "new", "changes"),
    [
        ({}, {}, []),
        ({"additionalProperties": True}, {}, []),
        ({}, {"additionalProperties": True}, []),
        (
            {},
            {"additionalProperties": False},
            [(ChangeKind.KEYWORD_CHANGED, "#/additionalProperties")],
        ),
        (
            {"additionalProperties": True},
            {"additionalProperties": {"type": "string"}},
            [(ChangeKind.ADDITIONAL_PROPERTIES_NARROWED, "#/additionalProperties")],
        ),
        (
            {"additionalProperties": {"type": "string"}},
            {"additionalProperties": {"type": "string", "description": "d"}},
            [(ChangeKind.DESCRIPTION_CHANGED, "#/additionalProperties/description")],
        ),
        ({"enum": [1]}, {"enum": [True]}, [(ChangeKind.ENUM_CHANGED, "#/enum")]),
        ({"required": ["a", "b"]}, {"required": ["b", "a"]}, []),
        (
            {"items": {"type": "string"}},
            {"items": {"type": "string", "title": "t"}},
            [(ChangeKind.TITLE_CHANGED, "#/items/title")],
        ),
        (
            {"anyOf": [{"type": "string"}]},
            {"anyOf": [{"type": "string"}, {"type": "null"}]},
            [(ChangeKind.COMPOSITION_CHANGED, "#/anyOf")],
        ),
        (
            {"allOf": [{"properties": {}}]},
            {"allOf": [{"properties": {"x": {}}}]},
            [(ChangeKind.PROPERTY_ADDED, "#/allOf/0/properties/x")],
        ),
        (
            {"definitions": {"a": {}, "b": {}}},
            {"definitions": {"a": {"title": "A"}}},
            [
                (ChangeKind.TITLE_CHANGED, "#/definitions/a/title"),
                (ChangeKind.DEFINITION_REMOVED, "#/definitions/b"),
            ],
        ),
        (
            {"properties": {"a/b": {}}},
            {},
            [(ChangeKind.PROPERTY_REMOVED, "#/properties/a~1b")],
        ),
        (
            {"properties": {"title": {"type": "string"}}},
            {"properties": {"title": {"type": "integer"}}},
            [(ChangeKind.TYPE_CHANGED, "#/properties/title/type")],
        ),
        (
            {"default": {"title": "x"}},
            {"default": {"title": "y"}},
            [(ChangeKind.KEYWORD_CHANGED, "#/default")],
        ),
        (
            {"dependencies": {"a": ["b"]}},
            {"dependencies": {"a": ["c"], "b": {"required": ["a"]}}},
            [
                (ChangeKind.KEYWORD_CHANGED, "#/dependencies/a"),
                (ChangeKind.KEYWORD_ADDED, "#/dependencies/b"),
            ],
        ),
        (
            {"required": ["x"]},
            {"required": ["x", "y"], "properties": {"y": {}}},
            [(ChangeKind.REQUIRED_PROPERTY_ADDED, "#/properties/y")],
        ),
        ({"type": "string"}, {}, [(ChangeKind.KEYWORD_REMOVED, "#/type")]),
    ],
)
def test_schema_changes(old, new, changes):
    assert [(change.kind, change.path) for change in schema_changes(old, new)] == changes


@pytest.mark.parametrize(
    ("version", "level", "expected"),
    [
        ("1.0.0", Level.PATCH, "1.0.1"),
        ("1.0.9", Level.PATCH, "1.0.10"),
        ("1.2.3", Level.MINOR, "1.3.0"),
        ("1.2.3", Level.MAJOR, "2.0.0"),
        ("9.9.9", Level.MAJOR, "10.0.0"),
    ],
)
def test_next_version(version, level, expected):
    assert next_version(version, level) == expected


@pytest.mark.parametrize("version", ["1.0", "1.0.0.0", "a.b.c", ""])
def test_next_version_refuses_what_is_not_semver(version):
    with pytest.raises(ValueError, match=r"MAJOR\.MINOR\.PATCH"):
        next_version(version, Level.PATCH)
