"""Loading request bodies and dumping response bodies for event types."""

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.registry.errors import EventTypeInvalid, FieldError
from app.registry.schemas import dump_event_type, dump_schema_version, load_event_type
from app.registry.settings import RegistrySettings

SETTINGS = RegistrySettings()
SCHEMA = {"type": "json_schema", "schema": json.dumps({"properties": {"a": {"type": "string"}}})}
MINIMAL = {
    "name": "acme.thing",
    "owning_application": "acme",
    "category": "undefined",
    "schema": SCHEMA,
}
ALL_FIELDS = {
    "name",
    "owning_application",
    "category",
    "enrichment_strategies",
    "partition_strategy",
    "compatibility_mode",
    "schema",
    "partition_key_fields",
    "cleanup_policy",
    "default_statistic",
    "options",
    "authorization",
    "ordering_key_fields",
    "ordering_instance_ids",
    "audience",
    "created_at",
    "updated_at",
}


def test_load_fills_the_spec_defaults():
    assert load_event_type(MINIMAL, SETTINGS) == {
        "name": "acme.thing",
        "owning_application": "acme",
        "category": "undefined",
        "enrichment_strategies": [],
        "partition_strategy": "random",
        "compatibility_mode": "forward",
        "schema": SCHEMA,
        "partition_key_fields": [],
        "cleanup_policy": "delete",
        "default_statistic": None,
        "options": {"retention_time": 345_600_000},
        "authorization": None,
        "ordering_key_fields": [],
        "ordering_instance_ids": [],
        "audience": None,
    }


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
    }
    assert load_event_type(body, SETTINGS) == load_event_type(MINIMAL, SETTINGS)


def test_an_empty_options_object_gets_the_default_retention():
    loaded = load_event_type({**MINIMAL, "options": {}}, SETTINGS)
    assert loaded["options"] == {"retention_time": SETTINGS.default_retention_time_ms}


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
        assert loaded[kept] == stored[kept]
    assert loaded["ordering_key_fields"] == []
    assert loaded["audience"] is None


def test_a_list_item_may_not_be_null():
    with pytest.raises(EventTypeInvalid) as raised:
        load_event_type({**MINIMAL, "ordering_key_fields": ["a", None]}, SETTINGS)
    assert raised.value.errors == (FieldError("ordering_key_fields[1]", "must not be null"),)


def test_a_nested_unknown_field_is_named_with_its_path():
    body = {
        **MINIMAL,
        "authorization": {
            "admins": [{"data_type": "user", "value": "a", "role": "x"}],
            "readers": [{"data_type": "user", "value": "a"}],
            "writers": [{"data_type": "user", "value": "a"}],
        },
    }
    with pytest.raises(EventTypeInvalid) as raised:
        load_event_type(body, SETTINGS)
    assert raised.value.errors == (
        FieldError("authorization.admins[0].role", "is not a field of this object"),
    )


def test_event_type_invalid_needs_errors():
    with pytest.raises(ValueError, match="at least one"):
        EventTypeInvalid([])


def test_dump_carries_every_field_the_spec_defines():
    stored = {
        **load_event_type(MINIMAL, SETTINGS),
        "created_at": "2016-03-15T22:47:15.123Z",
        "updated_at": "2016-03-16T22:47:15.123Z",
    }
    stored["schema"] = {
        **stored["schema"],
        "version": "1.1.0",
        "created_at": "2016-03-16T22:47:15.123Z",
    }
    dumped = dump_event_type(stored)
    assert set(dumped) == ALL_FIELDS
    assert dumped["schema"] == {
        "type": "json_schema",
        "schema": SCHEMA["schema"],
        "version": "1.1.0",
        "created_at": "2016-03-16T22:47:15.123Z",
    }
    assert dumped["options"] == {"retention_time": 345_600_000}
    assert dumped["created_at"] == "2016-03-15T22:47:15.123Z"
    assert json.loads(json.dumps(dumped)) == dumped


def test_dump_formats_datetimes_and_fills_defaults_of_sparse_records():
    moment = datetime(2016, 3, 15, 23, 47, 15, 123456, tzinfo=timezone(timedelta(hours=1)))
    dumped = dump_event_type({**MINIMAL, "created_at": moment, "updated_at": moment})
    assert set(dumped) == ALL_FIELDS
    assert dumped["created_at"] == "2016-03-15T22:47:15.123Z"
    assert dumped["schema"]["version"] == "1.0.0"
    assert dumped["partition_strategy"] == "random"
    assert dumped["compatibility_mode"] == "forward"
    assert dumped["cleanup_policy"] == "delete"
    assert dumped["options"] == {"retention_time": 345_600_000}
    assert dumped["enrichment_strategies"] == dumped["partition_key_fields"] == []
    assert dumped["authorization"] is None


def test_dump_leaves_out_what_the_spec_does_not_define():
    dumped = dump_event_type({**load_event_type(MINIMAL, SETTINGS), "id": 7, "topic": "t"})
    assert "id" not in dumped and "topic" not in dumped


def test_dump_schema_version():
    version = {
        "type": "json_schema",
        "schema": "{}",
        "version": "2.0.0",
        "created_at": datetime(2016, 3, 15, 22, 47, 15, tzinfo=UTC),
    }
    assert dump_schema_version(version) == {
        "type": "json_schema",
        "schema": "{}",
        "version": "2.0.0",
        "created_at": "2016-03-15T22:47:15.000Z",
    }


def test_naive_datetimes_are_taken_as_utc():
    dumped = dump_schema_version({**SCHEMA, "created_at": datetime(2016, 3, 15, 22, 47, 15)})
    assert dumped["created_at"] == "2016-03-15T22:47:15.000Z"
