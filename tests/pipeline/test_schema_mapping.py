"""JSON Schema -> Spark columns, per category and for schemas Spark types cannot
hold as they are; and events -> Arrow rows in those columns."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructType,
)

from workers.pipeline.rows import arrow_schema, derived_eid, record_batch
from workers.pipeline.schema_mapping import (
    JSON,
    Node,
    event_layout,
    map_schema,
    row_schema,
    spark_type,
)

ORDER = {"type": "object",
         "properties": {"order_number": {"type": "string"}, "amount": {"type": "number"},
                        "lines": {"type": "array", "items": {
                            "type": "object", "properties": {"sku": {"type": "string"},
                                                             "qty": {"type": "integer"}}}},
                        "paid": {"type": "boolean"}}}
BROKER = ["eid", "event_type", "partition", "offset"]


def fields(schema: StructType) -> dict:
    return {field.name: field.dataType for field in schema.fields}


def test_business_events_have_their_properties_and_metadata_at_the_top():
    schema = row_schema(event_layout("business", ORDER))
    assert schema.names == [*BROKER, "order_number", "amount", "lines", "paid", "metadata"]
    types = fields(schema)
    assert types["amount"] == DoubleType() and types["paid"] == BooleanType()
    assert types["lines"] == ArrayType(StructType().add("sku", StringType())
                                       .add("qty", LongType()))
    metadata = fields(types["metadata"])
    assert metadata["eid"] == StringType() and metadata["received_at"] == StringType()
    assert metadata["parent_eids"] == ArrayType(StringType())
    assert metadata["span_ctx"] == MapType(StringType(), StringType())


def test_data_events_nest_the_schema_under_data_next_to_data_op_and_data_type():
    schema = row_schema(event_layout("data", ORDER))
    assert schema.names == [*BROKER, "metadata", "data_op", "data_type", "data"]
    assert fields(schema)["data"] == spark_type(map_schema(ORDER))
    assert fields(schema)["data_op"] == StringType()


def test_undefined_events_have_their_properties_and_no_metadata():
    schema = row_schema(event_layout("undefined", ORDER))
    assert schema.names == [*BROKER, "order_number", "amount", "lines", "paid"]


def test_the_raw_option_is_one_json_string_column():
    schema = row_schema(event_layout("business", ORDER, raw=True))
    assert schema.names == [*BROKER, "raw"] and fields(schema)["raw"] == StringType()


def test_payload_properties_named_like_broker_columns_are_renamed():
    schema = {"properties": {"offset": {"type": "integer"}, "Partition": {"type": "string"},
                             "x": {"type": "string"}}}
    names = row_schema(event_layout("undefined", schema)).names
    assert names == [*BROKER, "payload_offset", "payload_Partition", "x"]


@pytest.mark.parametrize(("schema", "node"), [
    ({"type": ["string", "null"]}, Node("string")),
    ({"type": ["integer", "number"]}, Node("double")),
    ({"type": ["string", "integer"]}, JSON),
    ({"type": "null"}, JSON),
    ({}, JSON),
    (True, JSON),
    ({"enum": ["a", "b", None]}, Node("string")),
    ({"enum": ["a", 1]}, JSON),
    ({"const": 3}, Node("long")),
    ({"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}, JSON),
    ({"type": "array"}, Node("array", items=JSON)),
    ({"type": "object"}, JSON),
    ({"type": "object", "additionalProperties": {"type": "integer"}},
     Node("map", items=Node("long"))),
    ({"type": "object", "properties": {"a": {}, "A": {}}}, JSON),
    ({"type": "object", "properties": {"": {"type": "string"}}}, JSON),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, JSON),
    ({"anyOf": [{"type": "string", "format": "date-time"}, {"type": "string"}]},
     Node("string")),
], ids=repr)
def test_json_schema_constructs_map_to_spark_types_or_json_text(schema, node):
    assert map_schema(schema) == node


def test_references_resolve_and_recursion_stops_at_a_json_column():
    schema = {"definitions": {"money": {"type": "object", "properties": {
                  "amount": {"type": "number"}, "currency": {"type": "string"}}},
                  "tree": {"type": "object", "properties": {
                      "label": {"type": "string"},
                      "children": {"type": "array", "items": {"$ref": "#/definitions/tree"}}}}},
              "properties": {"price": {"$ref": "#/definitions/money"},
                             "tree": {"$ref": "#/definitions/tree"},
                             "missing": {"$ref": "#/definitions/nothing"}}}
    node = dict(map_schema(schema).fields)
    assert node["price"] == Node("struct", (("amount", Node("double")),
                                            ("currency", Node("string"))))
    assert node["tree"] == Node("struct", (("label", Node("string")),
                                           ("children", Node("array", items=JSON))))
    assert node["missing"] == JSON


def test_all_of_merges_the_properties_of_its_parts():
    schema = {"allOf": [{"properties": {"a": {"type": "string"}}},
                        {"properties": {"b": {"type": "integer"}}},
                        {"properties": {"a": {"type": "integer"}}}],
              "properties": {"c": {"type": "boolean"}}}
    assert dict(map_schema(schema).fields) == {"a": JSON, "b": Node("long"),
                                               "c": Node("boolean")}


def rows(category: str, schema, events: list[dict], raw: bool = False) -> list[dict]:
    layout = event_layout(category, schema, raw)
    offsets = pa.array([f"001-0001-{n:018d}" for n in range(len(events))])
    batch = record_batch(layout, arrow_schema(layout), "orders", "0", offsets, events)
    return batch.to_pylist()


def test_json_columns_hold_the_value_as_json_text_exactly():
    schema = {"properties": {"any": {}, "big": {"type": "integer"}}}
    [row] = rows("undefined", schema, [{"any": {"n": 123456789012345678901234567890},
                                        "big": 5}])
    assert row["any"] == '{"n":123456789012345678901234567890}'
    assert row["big"] == 5


def test_values_that_do_not_fit_their_column_become_null_not_a_failure():
    schema = {"properties": {"n": {"type": "integer"}, "s": {"type": "string"},
                             "o": {"type": "object", "properties": {"x": {"type": "number"}}}}}
    events = [{"n": 2**70, "s": "fine", "o": {"x": 1}},
              {"n": "seven", "s": 7, "o": "not an object"},
              {"n": 3.0, "s": "ok", "o": {"x": 2.5}}]
    assert [(r["n"], r["s"], r["o"]) for r in rows("undefined", schema, events)] == [
        (None, "fine", {"x": 1.0}), (None, None, None), (3, "ok", {"x": 2.5})]


def test_eids_come_from_metadata_or_are_derived_stably_from_the_offset():
    events = [{"order_number": "A", "metadata": {"eid": "e-1"}}, {"order_number": "B"}]
    business = rows("business", ORDER, events)
    assert business[0]["eid"] == "e-1"
    assert business[1]["eid"] == derived_eid("orders", "0", "001-0001-000000000000000001")
    undefined = rows("undefined", ORDER, [{"order_number": "A"}])
    assert undefined[0]["eid"] == derived_eid("orders", "0", "001-0001-000000000000000000")
    assert undefined[0]["eid"] != derived_eid("orders", "1", "001-0001-000000000000000000")


def test_raw_rows_hold_the_whole_event():
    event = {"order_number": "A", "extra": [1, 2], "metadata": {"eid": "e-1"}}
    [row] = rows("business", ORDER, [event], raw=True)
    assert json.loads(row["raw"]) == event and row["offset"] == "001-0001-000000000000000000"
