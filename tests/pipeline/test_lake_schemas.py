"""Reading a lake back across schema changes that give a column another Spark type:
every row, old and new, in one column type per column (``schema_merge``)."""

from __future__ import annotations

import json

import requests
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from tests.helpers.broker import ONE_PARTITION, business_event, new_event_type, post
from tests.pipeline.test_archiver import archive_once, archiver
from workers.pipeline import read_archive
from workers.pipeline.lake import event_type_dir
from workers.pipeline.schema_merge import common_type, merge_structs

BEFORE = {"properties": {
    "seq": {"type": "integer"},
    # No properties: a JSON-text string column (none mode refuses undeclared properties
    # unless additionalProperties says otherwise).
    "details": {"type": "object", "additionalProperties": True},
    "tags": {"type": "object", "additionalProperties": {"type": "string"}},  # a map
    "code": {"type": "integer"},
    "shipping": {"type": "object", "properties": {
        "carrier": {"type": "string"},
        "options": {"type": "object", "additionalProperties": True}}},
    "lines": {"type": "array", "items": {"type": "object", "properties": {
        "sku": {"type": "string"}, "note": {"type": "object", "additionalProperties": True}}}},
    "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
}}
AFTER = {"properties": {
    "seq": {"type": "integer"},
    "details": {"type": "object", "properties": {"colour": {"type": "string"}}},
    "tags": {"type": "object", "properties": {"kind": {"type": "string"}}},
    "code": {"type": "string"},
    "shipping": {"type": "object", "properties": {
        "carrier": {"type": "string"},
        "options": {"type": "object", "properties": {"express": {"type": "boolean"}}}}},
    "lines": {"type": "array", "items": {"type": "object", "properties": {
        "sku": {"type": "string"},
        "note": {"type": "object", "properties": {"text": {"type": "string"}}}}}},
    "counts": {"type": "object", "additionalProperties": {"type": "string"}},
    "added": {"type": "string"},
}}


def event(**payload: object) -> dict:
    """An event of exactly these properties (``business_event``'s order fields aside)."""
    return {**payload, "metadata": business_event()["metadata"]}


def change_schema(base_url: str, name: str, schema: dict) -> None:
    body = requests.get(f"{base_url}/event-types/{name}").json()
    body["schema"]["schema"] = json.dumps(schema)
    response = requests.put(f"{base_url}/event-types/{name}", json=body)
    assert response.status_code == 200, response.text


def test_a_lake_whose_columns_changed_type_reads_every_row_old_and_new(
        spark, base_url, tmp_path):
    name = new_event_type(base_url, compatibility_mode="none",
                          default_statistic=ONE_PARTITION,
                          schema={"type": "json_schema", "schema": json.dumps(BEFORE)})
    old = [event(seq=0, details={"colour": "red", "size": 2}, tags={"a": "b"},
                          code=7, shipping={"carrier": "dhl", "options": {"express": True}},
                          lines=[{"sku": "s1", "note": {"text": "hi"}}], counts={"x": 1})]
    assert post(base_url, name, old).status_code == 200
    command = archiver(base_url, tmp_path, "--event-type", name, "--master", "local[1]")
    archive_once(command)
    change_schema(base_url, name, AFTER)
    new = [event(seq=1, details={"colour": "blue"}, tags={"kind": "gift"},
                          code="X7", shipping={"carrier": "ups", "options": {"express": False}},
                          lines=[{"sku": "s2", "note": {"text": "ho"}}], counts={"x": "many"},
                          added="yes")]
    assert post(base_url, name, new).status_code == 200
    archive_once(command)

    frame = read_archive(spark, tmp_path / "lake", name)
    types = {field.name: field.dataType for field in frame.schema.fields}
    assert types["details"] == types["tags"] == types["code"] == StringType()
    # Only the field that changed type is a string: the struct around it stays typed.
    assert types["shipping"] == StructType([StructField("carrier", StringType()),
                                            StructField("options", StringType())])
    assert types["lines"] == ArrayType(StructType([StructField("sku", StringType()),
                                                   StructField("note", StringType())]))
    assert types["counts"] == MapType(StringType(), StringType())
    assert types["seq"] == LongType() and types["added"] == StringType()
    assert frame.columns[:4] == ["eid", "event_type", "partition", "offset"]
    assert frame.columns[-1] == "date"
    rows = {row["seq"]: row for row in frame.collect()}
    assert sorted(rows) == [0, 1]
    old_row, new_row = rows[0], rows[1]
    assert json.loads(old_row["details"]) == {"colour": "red", "size": 2}
    assert json.loads(new_row["details"]) == {"colour": "blue"}
    assert json.loads(old_row["tags"]) == {"a": "b"}
    assert json.loads(new_row["tags"]) == {"kind": "gift"}
    assert (old_row["code"], new_row["code"]) == ("7", "X7")
    assert old_row["shipping"]["carrier"] == "dhl" and new_row["shipping"]["carrier"] == "ups"
    assert json.loads(old_row["shipping"]["options"]) == {"express": True}
    assert json.loads(new_row["shipping"]["options"]) == {"express": False}
    assert [(line["sku"], json.loads(line["note"])) for row in (old_row, new_row)
            for line in row["lines"]] == [("s1", {"text": "hi"}), ("s2", {"text": "ho"})]
    assert (old_row["counts"], new_row["counts"]) == ({"x": "1"}, {"x": "many"})
    assert (old_row["added"], new_row["added"]) == (None, "yes")
    assert old_row["event_type"] == new_row["event_type"] == name
    assert old_row["date"].isoformat() == old_row["metadata"]["received_at"][:10]


def test_a_lake_of_added_fields_only_is_read_as_spark_merges_it(spark, base_url, tmp_path):
    """No schema change gave a column another type: the read is Spark's own merge,
    with no conversions in the plan."""
    name = new_event_type(base_url, default_statistic=ONE_PARTITION)
    assert post(base_url, name, [business_event(0)]).status_code == 200
    command = archiver(base_url, tmp_path, "--event-type", name, "--master", "local[1]")
    archive_once(command)
    schema = json.loads(requests.get(f"{base_url}/event-types/{name}").json()
                        ["schema"]["schema"])
    schema["properties"]["added"] = {"type": "string"}
    change_schema(base_url, name, schema)
    assert post(base_url, name, [business_event(1, added="yes")]).status_code == 200
    archive_once(command)

    frame = read_archive(spark, tmp_path / "lake", name)
    merged = spark.read.option("mergeSchema", "true").parquet(
        str(event_type_dir(tmp_path / "lake", name)))
    assert [f for f in frame.schema.fields if f.name != "event_type"] == merged.schema.fields
    assert "to_json" not in frame._jdf.queryExecution().analyzed().toString()
    assert sorted(row["added"] or "" for row in frame.collect()) == ["", "yes"]


def test_the_common_type_of_disagreeing_columns():
    struct = StructType([StructField("a", LongType())])
    assert common_type(LongType(), DoubleType()) == DoubleType()
    assert common_type(LongType(), StringType()) == StringType()
    assert common_type(StringType(), struct) == StringType()
    assert common_type(MapType(StringType(), StringType()), struct) == StringType()
    assert common_type(ArrayType(LongType()), ArrayType(StringType())) \
        == ArrayType(StringType())
    assert common_type(MapType(StringType(), LongType()), MapType(StringType(), DoubleType())) \
        == MapType(StringType(), DoubleType())
    assert merge_structs([struct, StructType([StructField("b", StringType()),
                                              StructField("a", struct)])]) \
        == StructType([StructField("a", StringType()), StructField("b", StringType())])
