"""The JSON form of event types: what is stored and shown, and reading it back."""

import json
from datetime import UTC, datetime

from app.domain.event_type import EventType, EventTypeSchema
from app.domain.event_type_document import (
    event_type_document,
    event_type_from_document,
    schema_document,
    schema_from_document,
)

SCHEMA_TEXT = json.dumps({"properties": {"a": {"type": "string"}}})
# A stored document as the broker wrote it before the typed domain (key order is jsonb's).
STORED = {
    "name": "acme.thing",
    "owning_application": "acme",
    "category": "business",
    "enrichment_strategies": ["metadata_enrichment"],
    "partition_strategy": "hash",
    "compatibility_mode": "forward",
    "schema": {
        "type": "json_schema",
        "schema": SCHEMA_TEXT,
        "version": "1.1.0",
        "created_at": "2016-03-16T22:47:15.123Z",
    },
    "partition_key_fields": ["a"],
    "cleanup_policy": "delete",
    "default_statistic": {
        "messages_per_minute": 10,
        "message_size": 100,
        "read_parallelism": 2,
        "write_parallelism": 1,
    },
    "options": {"retention_time": 20_000_000},
    "authorization": {
        "admins": [{"data_type": "user", "value": "a"}],
        "readers": [{"data_type": "*", "value": "*"}],
        "writers": [{"data_type": "service", "value": "s"}],
    },
    "ordering_key_fields": ["a"],
    "ordering_instance_ids": [],
    "audience": "company-internal",
    "created_at": "2016-03-15T22:47:15.123Z",
    "updated_at": "2016-03-16T22:47:15.123Z",
}
# The order every response has had: the spec's fields, then the timestamps.
SPEC_ORDER = [
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
]


def test_a_stored_document_reads_back_to_the_same_json_in_the_spec_order():
    shuffled = dict(sorted(STORED.items()))
    rendered = event_type_document(event_type_from_document(shuffled))
    assert json.dumps(rendered) == json.dumps({key: STORED[key] for key in SPEC_ORDER})


def test_timestamps_are_typed_and_shown_utc_with_milliseconds():
    event_type = event_type_from_document(STORED)
    assert event_type.created_at == datetime(2016, 3, 15, 22, 47, 15, 123000, tzinfo=UTC)
    assert event_type.schema.created_at == datetime(2016, 3, 16, 22, 47, 15, 123000, tzinfo=UTC)


def test_sparse_documents_get_the_spec_defaults():
    sparse = {
        "name": "acme.thing",
        "owning_application": "acme",
        "category": "undefined",
        "schema": {"type": "json_schema", "schema": "{}"},
    }
    rendered = event_type_document(event_type_from_document(sparse))
    assert list(rendered) == SPEC_ORDER
    assert rendered["schema"] == {
        "type": "json_schema",
        "schema": "{}",
        "version": "1.0.0",
        "created_at": None,
    }
    assert rendered["partition_strategy"] == "random"
    assert rendered["compatibility_mode"] == "forward"
    assert rendered["cleanup_policy"] == "delete"
    assert rendered["options"] == {"retention_time": 345_600_000}
    assert rendered["enrichment_strategies"] == rendered["partition_key_fields"] == []
    assert rendered["authorization"] is rendered["default_statistic"] is None


def test_later_nakadi_fields_are_shown_only_when_set():
    document = {
        **STORED,
        "event_owner_selector": {"type": "path", "name": "retailer", "value": "data.id"},
        "annotations": {"owner": "team-a"},
        "labels": {},
    }
    event_type = event_type_from_document(document)
    rendered = event_type_document(event_type)
    assert list(rendered)[-5:] == [
        "event_owner_selector",
        "annotations",
        "labels",
        "created_at",
        "updated_at",
    ]
    assert rendered["event_owner_selector"] == document["event_owner_selector"]
    assert rendered["annotations"] == {"owner": "team-a"}
    assert rendered["labels"] == {}
    assert event_type_from_document(rendered) == event_type


def test_schema_versions_round_trip():
    schema = EventTypeSchema(
        "json_schema", "{}", "2.0.0", datetime(2016, 3, 15, 22, 47, 15, tzinfo=UTC)
    )
    document = schema_document(schema)
    assert document == {
        "type": "json_schema",
        "schema": "{}",
        "version": "2.0.0",
        "created_at": "2016-03-15T22:47:15.000Z",
    }
    assert schema_from_document(document) == schema


def test_an_event_type_knows_whether_its_events_carry_metadata():
    schema = EventTypeSchema("json_schema", "{}")
    assert EventType("a", "app", "business", schema).has_metadata
    assert not EventType("a", "app", "undefined", schema).has_metadata
