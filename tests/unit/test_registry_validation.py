"""Every event type rule: bad input is refused with an error naming the field and the reason."""

import copy
import json

import pytest

from app.registry.errors import EventTypeInvalid, FieldError
from app.registry.settings import RegistrySettings
from app.registry.validation import check_event_type, validate_event_type

SETTINGS = RegistrySettings()
ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string"},
        "customer": {"type": "object", "properties": {"id": {"type": "string"}}},
        "amount": {"type": "number"},
    },
    "required": ["order_number"],
}


def business_body(**changes):
    body = {
        "name": "acme.order-received",
        "owning_application": "acme-order-service",
        "category": "business",
        "enrichment_strategies": ["metadata_enrichment"],
        "partition_strategy": "hash",
        "partition_key_fields": ["order_number"],
        "schema": {"type": "json_schema", "schema": json.dumps(ORDER_SCHEMA)},
    }
    body.update(changes)
    return body


def data_body(**changes):
    return business_body(**{"category": "data", **changes})


def undefined_body(**changes):
    body = business_body(category="undefined", enrichment_strategies=[])
    body.update(partition_strategy="random", partition_key_fields=[])
    body.update(changes)
    return body


def schema_of(document):
    return {"type": "json_schema", "schema": json.dumps(document)}


def errors_for(body, settings=SETTINGS):
    with pytest.raises(EventTypeInvalid) as raised:
        check_event_type(body, settings)
    return raised.value.errors


def assert_refused(body, field, reason, settings=SETTINGS):
    errors = errors_for(body, settings)
    matching = [error for error in errors if error.field == field and reason in error.reason]
    assert matching, f"expected {field}: ...{reason}... in {[str(e) for e in errors]}"


@pytest.mark.parametrize(
    "body",
    [
        business_body(),
        data_body(),
        undefined_body(),
        undefined_body(schema=schema_of({"additionalProperties": True})),
        business_body(partition_strategy="user_defined", partition_key_fields=[]),
        business_body(cleanup_policy="compact"),
        business_body(partition_key_fields=["customer.id"]),
        business_body(
            ordering_key_fields=["metadata.occurred_at"], ordering_instance_ids=["customer.id"]
        ),
        data_body(ordering_key_fields=["data.amount"], ordering_instance_ids=["data.order_number"]),
        business_body(compatibility_mode="compatible"),
        business_body(compatibility_mode="none", audience="company-internal"),
        business_body(options={"retention_time": SETTINGS.min_retention_time_ms}),
        business_body(
            default_statistic={
                "messages_per_minute": 1000,
                "message_size": 5,
                "read_parallelism": 1,
                "write_parallelism": 1,
            }
        ),
        business_body(
            authorization={
                "admins": [{"data_type": "user", "value": "bfawlty"}],
                "readers": [{"data_type": "*", "value": "*"}],
                "writers": [{"data_type": "service", "value": "acme-order-service"}],
            }
        ),
        business_body(
            schema=schema_of(
                {
                    "definitions": {"id": {"type": "string"}},
                    "properties": {"order_number": {"$ref": "#/definitions/id"}},
                }
            )
        ),
        data_body(
            schema=schema_of(
                {
                    "definitions": {"id": {"type": "string"}},
                    "properties": {"order_number": {"$ref": "#/definitions/id"}},
                }
            )
        ),
        business_body(
            schema=schema_of(
                {
                    "$schema": "http://json-schema.org/draft-04/schema#",
                    "properties": {"order_number": {"type": "string"}},
                }
            )
        ),
        business_body(name="a" * SETTINGS.max_name_length, partition_key_fields=["order_number"]),
        business_body(name="order.order_cancelled"),
        business_body(name="acme-platform.users.v2"),
    ],
)
def test_valid_event_types_are_accepted(body):
    event_type = check_event_type(body, SETTINGS)
    assert event_type.name == body["name"]
    assert validate_event_type(event_type, SETTINGS) == []


CASES = [
    # (body, field, reason)
    (business_body(name="1order"), "name", "must match the pattern"),
    (business_body(name="order..received"), "name", "must match the pattern"),
    (business_body(name="order received"), "name", "must match the pattern"),
    (business_body(name="order."), "name", "must match the pattern"),
    (business_body(name="a" * 256), "name", "at most 255 characters"),
    (business_body(name=None), "name", "must not be null"),
    (business_body(name=42), "name", "must be a string"),
    (business_body(owning_application="  "), "owning_application", "must not be empty"),
    (business_body(owning_application=None), "owning_application", "must not be null"),
    (business_body(category="other"), "category", "must be one of: undefined, data, business"),
    (business_body(schema=None), "schema", "must not be null"),
    (business_body(schema="{}"), "schema", "must be a JSON object"),
    (business_body(schema={"type": "avro", "schema": "{}"}), "schema.type", "must be one of"),
    (business_body(schema={"type": "json_schema"}), "schema.schema", "is required"),
    (business_body(schema={"type": "json_schema", "schema": {}}), "schema.schema", "string"),
    (
        business_body(schema={"type": "json_schema", "schema": "{"}),
        "schema.schema",
        "not valid JSON",
    ),
    (business_body(schema={"type": "json_schema", "schema": "[]"}), "schema.schema", "JSON object"),
    (
        business_body(schema={"type": "json_schema", "schema": '{"maximum": NaN}'}),
        "schema.schema",
        "is not valid JSON (unexpected character, expected a JSON value: line 1 column 13",
    ),
    (
        business_body(schema=schema_of({"properties": {"order_number": {"type": "strin"}}})),
        "schema.schema",
        "not a valid JSON Schema (draft 4): at #/properties/order_number/type",
    ),
    (
        business_body(schema=schema_of({"properties": {"order_number": {"pattern": "(("}}})),
        "schema.schema",
        "is not a 'regex'",
    ),
    (
        business_body(schema=schema_of({"$schema": "http://json-schema.org/draft-07/schema#"})),
        "schema.schema",
        "$schema must be the draft 4 meta-schema",
    ),
    (
        business_body(schema=schema_of({"properties": {"a": {"$ref": "#/definitions/nope"}}})),
        "schema.schema",
        "$ref '#/definitions/nope' at #/properties/a does not resolve",
    ),
    (
        business_body(schema=schema_of({"definitions": {"a": {"$ref": "#/definitions/a"}},
                                        "properties": {"a": {"$ref": "#/definitions/a"}}})),
        "schema.schema",
        "the schema at #/definitions/a refers back to itself through $ref",
    ),
    (
        business_body(
            schema=schema_of({"properties": {"a": {"$ref": "https://example.com/a.json"}}})
        ),
        "schema.schema",
        "does not resolve",
    ),
    (
        undefined_body(schema=schema_of({"type": "array"})),
        "schema.schema",
        "top-level type must be object",
    ),
    (
        business_body(
            schema=schema_of({"properties": {"metadata": {"type": "object"}, "order_number": {}}})
        ),
        "schema.schema",
        "may not define metadata",
    ),
    (
        data_body(
            schema=schema_of(
                {
                    "properties": {
                        "order_number": {},
                        "data_op": {"type": "string"},
                        "data": {"type": "object"},
                    }
                }
            )
        ),
        "schema.schema",
        "describes the content of data only",
    ),
    (
        business_body(enrichment_strategies=[]),
        "enrichment_strategies",
        "must include metadata_enrichment",
    ),
    (
        data_body(enrichment_strategies=None),
        "enrichment_strategies",
        "must include metadata_enrichment",
    ),
    (
        undefined_body(enrichment_strategies=["metadata_enrichment"]),
        "enrichment_strategies",
        "not possible for the undefined category",
    ),
    (
        business_body(enrichment_strategies=["metadata_enrichment", "metadata_enrichment"]),
        "enrichment_strategies",
        "twice",
    ),
    (business_body(enrichment_strategies=["geo"]), "enrichment_strategies[0]", "must be one of"),
    (business_body(enrichment_strategies="metadata_enrichment"), "enrichment_strategies", "array"),
    (business_body(partition_strategy="round_robin"), "partition_strategy", "must be one of"),
    (
        undefined_body(partition_strategy="user_defined"),
        "partition_strategy",
        "only available for the business and data categories",
    ),
    (business_body(partition_key_fields=[]), "partition_key_fields", "required for the hash"),
    (
        business_body(partition_strategy="random"),
        "partition_key_fields",
        "must be absent unless partition_strategy is hash",
    ),
    (
        business_body(partition_strategy="user_defined"),
        "partition_key_fields",
        "must be absent unless partition_strategy is hash",
    ),
    (
        business_body(partition_key_fields=["order_id"]),
        "partition_key_fields[0]",
        "'order_id' is not a field of the schema",
    ),
    (
        business_body(partition_key_fields=["order_number", "customer.nope"]),
        "partition_key_fields[1]",
        "'customer.nope' is not a field",
    ),
    (
        data_body(partition_key_fields=["data.order_number"]),
        "partition_key_fields[0]",
        "is not a field of data in the schema",
    ),
    (
        business_body(partition_key_fields=["order_number", "order_number"]),
        "partition_key_fields",
        "twice",
    ),
    (
        business_body(ordering_key_fields=["sequence"]),
        "ordering_key_fields[0]",
        "'sequence' is not a field of the event",
    ),
    (
        data_body(ordering_key_fields=["amount"]),
        "ordering_key_fields[0]",
        "'amount' is not a field of the event",
    ),
    (
        business_body(ordering_key_fields=["amount"], ordering_instance_ids=["customer.name"]),
        "ordering_instance_ids[0]",
        "is not a field of the event",
    ),
    (
        business_body(ordering_instance_ids=["order_number"]),
        "ordering_instance_ids",
        "only be used together with ordering_key_fields",
    ),
    (business_body(cleanup_policy="archive"), "cleanup_policy", "must be one of: delete, compact"),
    (
        undefined_body(cleanup_policy="compact"),
        "cleanup_policy",
        "compact is not available for the undefined category",
    ),
    (business_body(compatibility_mode="backward"), "compatibility_mode", "must be one of"),
    (business_body(audience="everyone"), "audience", "must be one of: component-internal"),
    (
        business_body(options={"retention_time": 1000}),
        "options.retention_time",
        "must be between 10800000 and 345600000 milliseconds (got 1000)",
    ),
    (
        business_body(options={"retention_time": 345600001}),
        "options.retention_time",
        "must be between",
    ),
    (business_body(options={"retention_time": "1000"}), "options.retention_time", "integer"),
    (business_body(options={"retention_time": 3.6e6}), "options.retention_time", "integer"),
    (business_body(options={"retention_time": True}), "options.retention_time", "integer"),
    (business_body(options=[]), "options", "must be a JSON object"),
    (
        business_body(
            default_statistic={
                "messages_per_minute": 1,
                "message_size": 1,
                "read_parallelism": 0,
                "write_parallelism": 1,
            }
        ),
        "default_statistic.read_parallelism",
        "must be a positive integer (got 0)",
    ),
    (
        business_body(
            default_statistic={
                "messages_per_minute": -5,
                "message_size": 1,
                "read_parallelism": 1,
                "write_parallelism": 1,
            }
        ),
        "default_statistic.messages_per_minute",
        "positive",
    ),
    (
        business_body(default_statistic={"messages_per_minute": 1}),
        "default_statistic.write_parallelism",
        "is required",
    ),
    (
        business_body(
            authorization={
                "admins": [],
                "readers": [{"data_type": "user", "value": "a"}],
                "writers": [{"data_type": "user", "value": "a"}],
            }
        ),
        "authorization.admins",
        "at least one attribute",
    ),
    (
        business_body(
            authorization={
                "admins": [{"data_type": "user", "value": "a"}],
                "readers": [{"data_type": "user", "value": str(n)} for n in range(1001)],
                "writers": [{"data_type": "user", "value": "a"}],
            }
        ),
        "authorization.readers",
        "must list at most 1000 attributes",
    ),
    (
        business_body(
            authorization={
                "admins": [{"data_type": "user", "value": "a"}],
                "writers": [{"data_type": "user", "value": "a"}],
            }
        ),
        "authorization.readers",
        "is required",
    ),
    (
        business_body(
            authorization={
                "admins": [{"data_type": "user"}],
                "readers": [{"data_type": "user", "value": "a"}],
                "writers": [{"data_type": "user", "value": "a"}],
            }
        ),
        "authorization.admins[0].value",
        "is required",
    ),
    (
        business_body(
            authorization={
                "admins": [{"data_type": "user", "value": "a"}],
                "readers": [{"data_type": " ", "value": "a"}],
                "writers": [{"data_type": "user", "value": "a"}],
            }
        ),
        "authorization.readers[0].data_type",
        "must not be empty",
    ),
    (
        business_body(
            authorization={
                "admins": [{"data_type": "user", "value": "a"}],
                "readers": [{"data_type": "user", "value": "a"}],
                "writers": ["a"],
            }
        ),
        "authorization.writers[0]",
        "must be a JSON object",
    ),
]


@pytest.mark.parametrize(("body", "field", "reason"), CASES)
def test_bad_event_types_are_refused_naming_field_and_reason(body, field, reason):
    assert_refused(body, field, reason)


@pytest.mark.parametrize(
    "keyword", ["additionalProperties", "additionalItems", "not", "patternProperties"]
)
def test_compatible_mode_refuses_open_ended_keywords(keyword):
    value = {"type": "string"} if keyword != "patternProperties" else {"^x": {"type": "string"}}
    document = copy.deepcopy(ORDER_SCHEMA)
    document["properties"]["customer"][keyword] = value
    body = business_body(compatibility_mode="compatible", schema=schema_of(document))
    assert_refused(
        body,
        "schema.schema",
        f"{keyword} is not allowed in compatible mode (at #/properties/customer)",
    )
    check_event_type(
        business_body(compatibility_mode="forward", schema=schema_of(document)), SETTINGS
    )


def test_compatible_mode_does_not_mistake_data_for_keywords():
    document = {"properties": {"order_number": {"enum": [{"not": 1}], "default": {"not": 2}}}}
    check_event_type(
        business_body(compatibility_mode="compatible", schema=schema_of(document)), SETTINGS
    )


@pytest.mark.parametrize("body", [[], "event type", 42, None, True])
def test_a_body_that_is_not_an_object_is_refused(body):
    assert errors_for(body) == (FieldError("body", "must be a JSON object (an EventType)"),)


def test_missing_required_fields_are_all_named():
    fields = {error.field for error in errors_for({})}
    assert {"name", "owning_application", "category", "schema"} <= fields


def test_every_shape_problem_is_reported_at_once_and_detail_names_each():
    body = business_body(name=42, category="other")
    with pytest.raises(EventTypeInvalid) as raised:
        check_event_type(body, SETTINGS)
    assert raised.value.detail == (
        "name: must be a string; category: must be one of: undefined, data, business (got 'other')"
    )


def test_rules_across_fields_are_all_reported_together():
    body = business_body(name="1x", enrichment_strategies=[], options={"retention_time": 5})
    fields = {error.field for error in errors_for(body)}
    assert {"name", "enrichment_strategies", "options.retention_time"} <= fields


def test_a_deeply_nested_schema_is_refused_without_crashing():
    text = '{"properties": {"a": ' * 60 + "{}" + "}}" * 60
    assert_refused(
        business_body(schema={"type": "json_schema", "schema": text}), "schema.schema", "nested"
    )
    text = "[" * 100_000 + "]" * 100_000
    assert_refused(
        business_body(schema={"type": "json_schema", "schema": text}), "schema.schema", "nested"
    )


def test_bounds_come_from_the_settings():
    settings = RegistrySettings(
        max_name_length=10,
        min_retention_time_ms=1,
        max_retention_time_ms=10,
        default_retention_time_ms=5,
    )
    assert_refused(business_body(name="a-long-name"), "name", "at most 10 characters", settings)
    event_type = check_event_type(business_body(name="short"), settings)
    assert event_type.options.retention_time == 5
    assert_refused(
        business_body(name="short", options={"retention_time": 11}),
        "options.retention_time",
        "between 1 and 10",
        settings,
    )


def test_read_only_fields_sent_back_are_ignored():
    body = business_body(
        created_at="2016-03-15T23:47:15.000Z", updated_at="2016-03-15T23:47:15.000Z"
    )
    body["schema"] = {
        **body["schema"],
        "version": "3.0.0",
        "created_at": "2016-03-15T23:47:15.000Z",
    }
    event_type = check_event_type(body, SETTINGS)
    assert event_type.created_at is None and event_type.updated_at is None
    assert event_type.schema.version == "1.0.0" and event_type.schema.created_at is None


def test_partition_keys_follow_refs_and_composition():
    document = {
        "definitions": {"customer": {"properties": {"id": {"type": "string"}}}},
        "allOf": [{"properties": {"order_number": {"type": "string"}}}],
        "properties": {"customer": {"$ref": "#/definitions/customer"}},
    }
    body = business_body(
        schema=schema_of(document), partition_key_fields=["order_number", "customer.id"]
    )
    assert check_event_type(body, SETTINGS).partition_key_fields == ("order_number", "customer.id")


def test_fields_this_broker_does_not_define_are_ignored():
    body = business_body(foo=1, default_statistics={}, cleanup="x")
    body["schema"] = {**body["schema"], "format": "x"}
    assert check_event_type(body, SETTINGS) == check_event_type(business_body(), SETTINGS)


def test_an_event_owner_selector_names_something():
    selector = {"type": "static", "name": " ", "value": ""}
    errors = errors_for(business_body(event_owner_selector=selector))
    assert [error.field for error in errors] == [
        "event_owner_selector.name",
        "event_owner_selector.value",
    ]


ROOT_REF = {
    "$ref": "#/definitions/O",
    "definitions": {"O": {"type": "object", "properties": {"order_number": {"type": "string"}}}},
}


@pytest.mark.parametrize("mode", ["forward", "compatible", "none"])
@pytest.mark.parametrize("make", [business_body, data_body])
def test_a_schema_whose_root_is_a_reference_is_accepted(make, mode):
    body = make(schema=schema_of(ROOT_REF), compatibility_mode=mode)
    assert check_event_type(body, SETTINGS).category == body["category"]


def test_metadata_fields_can_order_a_business_type_whose_root_is_a_reference():
    body = business_body(schema=schema_of(ROOT_REF), ordering_key_fields=["metadata.occurred_at"])
    assert check_event_type(body, SETTINGS).ordering_key_fields == ("metadata.occurred_at",)


def test_a_schema_its_effective_schema_cannot_resolve_is_refused():
    """Draft 4 ignores what is beside a root `$ref`, so the effective schema leaves it out:
    a reference into it would fail every publish, so creation refuses it."""
    document = {"$ref": "#/properties/o", "properties": {"o": {"type": "object"}}}
    assert_refused(business_body(schema=schema_of(document), partition_key_fields=[],
                                 partition_strategy="random"),
                   "schema.schema",
                   "cannot be used to validate events: $ref '#/properties/o' does not resolve")


def test_a_schema_longer_than_the_limit_is_refused_before_it_is_read():
    """A schema is parsed and compiled in the request that brings it (~1.2 s of a worker's
    CPU per MB, nothing else of the worker running meanwhile): 50 MB outlasted gunicorn's
    timeout, and the worker was killed with every stream it served."""
    settings = RegistrySettings(max_schema_bytes=100)
    text = json.dumps({"properties": {"é" * 40: {}}}, ensure_ascii=False)  # 104 bytes
    assert len(text) <= 100 < len(text.encode())
    assert_refused(undefined_body(schema={"type": "json_schema", "schema": text}),
                   "schema.schema", "must be at most 100 bytes long (got 104)", settings)
    assert_refused(undefined_body(schema={"type": "json_schema", "schema": "{" * 101}),
                   "schema.schema", "must be at most 100 bytes long (got 101)", settings)
    fits = json.dumps({"properties": {"a" * 76: {}}})  # 100 bytes
    assert len(fits.encode()) == 100
    check_event_type(undefined_body(schema={"type": "json_schema", "schema": fits}), settings)


def test_the_schema_limit_must_be_positive():
    with pytest.raises(ValueError, match="max_schema_bytes"):
        RegistrySettings(max_schema_bytes=0)
