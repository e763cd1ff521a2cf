"""Loading request bodies into event types: shape, defaults, and what is ignored."""

import json

import pytest

from app.domain.event_type import (
    AuthorizationAttribute,
    EventOwnerSelector,
    EventType,
    EventTypeSchema,
)
from app.registry.errors import EventTypeInvalid, FieldError
from app.registry.schemas import load_event_type, load_schema
from app.registry.settings import RegistrySettings

SETTINGS = RegistrySettings()
SCHEMA = {"type": "json_schema", "schema": json.dumps({"properties": {"a": {"type": "string"}}})}
MINIMAL = {
    "name": "acme.thing",
    "owning_application": "acme",
    "category": "undefined",
    "schema": SCHEMA,
}


def test_load_fills_the_spec_defaults():
    assert load_event_type(MINIMAL, SETTINGS) == EventType(
        name="acme.thing",
        owning_application="acme",
        category="undefined",
        schema=EventTypeSchema("json_schema", SCHEMA["schema"]),
        enrichment_strategies=(),
        partition_strategy="random",
        compatibility_mode="forward",
        partition_key_fields=(),
        cleanup_policy="delete",
        default_statistic=None,
        authorization=None,
        ordering_key_fields=(),
        ordering_instance_ids=(),
        audience=None,
        event_owner_selector=None,
        annotations=None,
        labels=None,
    )
    assert load_event_type(MINIMAL, SETTINGS).options.retention_time == 345_600_000


def test_nulls_are_taken_as_absent_for_optional_fields():
    body = {
        **MINIMAL,
        "enrichment_strategies": None,
        "partition_strategy": None,
        "compatibility_mode": None,
        "partition_key_fields": None,
        "cleanup_policy": None,
        "default_statistic": None,
        "options": None,
        "authorization": None,
        "ordering_key_fields": None,
        "ordering_instance_ids": None,
        "audience": None,
        "event_owner_selector": None,
        "annotations": None,
        "labels": None,
    }
    assert load_event_type(body, SETTINGS) == load_event_type(MINIMAL, SETTINGS)


def test_an_empty_options_object_gets_the_default_retention():
    loaded = load_event_type({**MINIMAL, "options": {}}, SETTINGS)
    assert loaded.options.retention_time == SETTINGS.default_retention_time_ms


def test_on_update_omitted_settings_keep_their_stored_values():
    stored = load_event_type(
        {
            **MINIMAL,
            "category": "business",
            "partition_strategy": "hash",
            "partition_key_fields": ["a"],
            "compatibility_mode": "compatible",
            "cleanup_policy": "compact",
            "options": {"retention_time": 20_000_000},
            "default_statistic": {
                "messages_per_minute": 1,
                "message_size": 1,
                "read_parallelism": 1,
                "write_parallelism": 1,
            },
            "ordering_key_fields": ["a"],
            "audience": "company-internal",
        },
        SETTINGS,
    )
    loaded = load_event_type({**MINIMAL, "category": "business"}, SETTINGS, stored=stored)
    for kept in (
        "partition_strategy",
        "partition_key_fields",
        "compatibility_mode",
        "cleanup_policy",
        "options",
        "default_statistic",
    ):
        assert getattr(loaded, kept) == getattr(stored, kept)
    assert loaded.ordering_key_fields == ()
    assert loaded.audience is None


def test_a_list_item_may_not_be_null():
    with pytest.raises(EventTypeInvalid) as raised:
        load_event_type({**MINIMAL, "ordering_key_fields": ["a", None]}, SETTINGS)
    assert raised.value.errors == (FieldError("ordering_key_fields[1]", "must not be null"),)


def test_unknown_fields_are_ignored_at_every_level():
    body = {
        **MINIMAL,
        "surprise": True,
        "schema": {**SCHEMA, "version": "9.9.9", "created_at": "x", "hint": 1},
        "options": {"retention_time": 20_000_000, "max_lag": 1},
        "authorization": {
            "admins": [{"data_type": "user", "value": "a", "role": "x"}],
            "readers": [{"data_type": "user", "value": "a"}],
            "writers": [{"data_type": "user", "value": "a"}],
            "auditors": [],
        },
        "created_at": "2016-03-15T22:47:15.123Z",
    }
    loaded = load_event_type(body, SETTINGS)
    assert loaded.schema == EventTypeSchema("json_schema", SCHEMA["schema"])
    assert loaded.options.retention_time == 20_000_000
    assert loaded.authorization.admins == (AuthorizationAttribute("user", "a"),)
    assert loaded.created_at is None


def test_newer_nakadi_fields_are_kept():
    body = {
        **MINIMAL,
        "annotations": {"nakadi.io/owner": "team-a", "note": ""},
        "labels": {"team": "a"},
        "event_owner_selector": {"type": "path", "name": "retailer", "value": "data.id"},
    }
    loaded = load_event_type(body, SETTINGS)
    assert loaded.annotations == {"nakadi.io/owner": "team-a", "note": ""}
    assert loaded.labels == {"team": "a"}
    assert loaded.event_owner_selector == EventOwnerSelector("path", "retailer", "data.id")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"labels": ["team"]}, FieldError("labels", "must be an object of string values")),
        ({"labels": {"team": 1}}, FieldError("labels.team", "must be a string")),
        ({"annotations": {"": "x"}}, FieldError("annotations", "a key must not be empty")),
        ({"annotations": "x"}, FieldError("annotations", "must be an object of string values")),
        (
            {"event_owner_selector": {"type": "path", "name": "n"}},
            FieldError("event_owner_selector.value", "is required"),
        ),
        (
            {"event_owner_selector": "path"},
            FieldError("event_owner_selector", "must be a JSON object"),
        ),
        (
            {"ordering_key_fields": "a"},
            FieldError("ordering_key_fields", "must be an array of strings"),
        ),
        ({"audience": 7}, FieldError("audience", "must be a string")),
    ],
)
def test_known_fields_of_the_wrong_type_are_named(changes, expected):
    with pytest.raises(EventTypeInvalid) as raised:
        load_event_type({**MINIMAL, **changes}, SETTINGS)
    assert raised.value.errors == (expected,)


def test_an_unknown_owner_selector_type_is_refused():
    body = {**MINIMAL, "event_owner_selector": {"type": "magic", "name": "n", "value": "v"}}
    with pytest.raises(EventTypeInvalid) as raised:
        load_event_type(body, SETTINGS)
    assert raised.value.errors[0].field == "event_owner_selector.type"


def test_a_schema_body_is_loaded_without_its_read_only_fields():
    body = {**SCHEMA, "version": "2.0.0", "created_at": "2016-03-15T22:47:15.123Z"}
    assert load_schema(body) == EventTypeSchema("json_schema", SCHEMA["schema"])
    with pytest.raises(EventTypeInvalid) as raised:
        load_schema({"type": "avro_schema"})
    assert {error.field for error in raised.value.errors} == {"schema.type", "schema.schema"}
    with pytest.raises(EventTypeInvalid) as raised:
        load_schema("{}")
    assert raised.value.errors[0].field == "schema"


def test_event_type_invalid_needs_errors():
    with pytest.raises(ValueError, match="at least one"):
        EventTypeInvalid([])
