"""The ``nakadi`` format against the session's real broker, on both engines."""

from __future__ import annotations

import json
import uuid

import pytest
import requests
from pyspark.errors import AnalysisException, StreamingQueryException

from deploy.localstack import free_port
from tests.helpers.broker import ONE_PARTITION, business_event, new_event_type, post, publish_to
from workers.pipeline.client import BrokerClient
from workers.pipeline.ranges import OffsetPlanner
from workers.pipeline.rows import derived_eid


def offset(n: int) -> str:
    return f"001-0001-{n:018d}" if n >= 0 else "001-0001--1"


@pytest.fixture
def four_partitions(base_url, default_storage) -> str:
    """A user_defined event type with 4 partitions holding 5, 7, 0 and 3 events."""
    name = new_event_type(base_url, partition_strategy="user_defined")
    for partition, count in ((0, 5), (1, 7), (3, 3)):
        publish_to(base_url, name, partition, count, start=partition * 100)
    return name


def nakadi(spark, base_url: str, name: str, **options):
    return (spark.read.format("nakadi").option("url", base_url).option("event_type", name)
            .options(**options).load())


def positions(frame) -> list[tuple[str, str]]:
    return sorted((r["partition"], r["offset"]) for r in frame.select("partition", "offset")
                  .collect())


def test_earliest_to_latest_reads_every_event_once_with_its_offset(spark, base_url,
                                                                   four_partitions):
    rows = nakadi(spark, base_url, four_partitions).collect()
    assert sorted((r["partition"], r["offset"], r["amount"]) for r in rows) == sorted(
        [("0", offset(n), float(n)) for n in range(5)]
        + [("1", offset(n), float(100 + n)) for n in range(7)]
        + [("3", offset(n), float(300 + n)) for n in range(3)])
    assert {r["event_type"] for r in rows} == {four_partitions}
    assert all(r["eid"] == r["metadata"]["eid"] for r in rows)


def test_exactly_the_range_asked_per_partition(spark, base_url, four_partitions):
    frame = nakadi(spark, base_url, four_partitions,
                   startingOffsets=json.dumps({"0": offset(1), "1": "earliest", "3": "latest"}),
                   endingOffsets=json.dumps({"0": offset(3), "1": offset(0)}))
    assert positions(frame) == [("0", offset(2)), ("0", offset(3)), ("1", offset(0))]


def test_large_ranges_split_into_more_spark_partitions_without_gaps(spark, base_url,
                                                                   four_partitions):
    frame = nakadi(spark, base_url, four_partitions, eventsPerSplit="2")
    # 5, 7 and 3 events in splits of 2: 3 + 4 + 2 input partitions
    assert frame.rdd.getNumPartitions() == 9
    assert positions(frame) == sorted(
        [("0", offset(n)) for n in range(5)] + [("1", offset(n)) for n in range(7)]
        + [("3", offset(n)) for n in range(3)])


def test_an_empty_range_is_no_rows(spark, base_url, four_partitions):
    assert nakadi(spark, base_url, four_partitions, startingOffsets="latest").count() == 0


def test_raw_rows_are_the_events_as_stored(spark, base_url, default_storage):
    name = new_event_type(base_url)
    events = [business_event(n, note={"any": [1, "two"]}) for n in range(3)]
    assert post(base_url, name, events).status_code == 200
    rows = nakadi(spark, base_url, name, raw="true").collect()
    raw = {r["eid"]: json.loads(r["raw"]) for r in rows}
    for event in events:
        stored = raw[event["metadata"]["eid"]]
        assert stored["note"] == event["note"] and stored["order_number"] == event["order_number"]
        assert stored["metadata"]["event_type"] == name


def test_data_events_have_their_operation_type_and_data(spark, base_url):
    schema = {"properties": {"sku": {"type": "string"},
                             "dims": {"type": "object", "properties": {"w": {"type": "integer"}}},
                             "tags": {"type": "array", "items": {"type": "string"}},
                             "attrs": {"type": "object"}}}
    name = new_event_type(base_url, category="data",
                          schema={"type": "json_schema", "schema": json.dumps(schema)})
    eid = str(uuid.uuid4())
    event = {"data_op": "C", "data_type": "article", "metadata": {
                 "eid": eid, "occurred_at": "2026-11-22T10:00:00Z"},
             "data": {"sku": "S-1", "dims": {"w": 3}, "tags": ["a"], "attrs": {"k": [1]}}}
    assert post(base_url, name, [event]).status_code == 200
    [row] = nakadi(spark, base_url, name).collect()
    assert (row["eid"], row["data_op"], row["data_type"]) == (eid, "C", "article")
    assert row["data"].asDict(recursive=True) == {"sku": "S-1", "dims": {"w": 3}, "tags": ["a"],
                                                  "attrs": '{"k":[1]}'}
    assert row["metadata"]["received_at"] and row["metadata"]["version"] == "1.0.0"


def test_undefined_events_get_ids_derived_from_their_position(spark, base_url):
    name = new_event_type(base_url, category="undefined", enrichment_strategies=[],
                          default_statistic=ONE_PARTITION)
    assert post(base_url, name, [{"order_number": "U-1"}, {"order_number": "U-2"}]).status_code \
        == 200
    rows = nakadi(spark, base_url, name).orderBy("offset").collect()
    assert [r["order_number"] for r in rows] == ["U-1", "U-2"]
    assert [r["eid"] for r in rows] == [derived_eid(name, "0", offset(n)) for n in range(2)]
    assert "metadata" not in rows[0].asDict()


def test_streaming_takes_at_most_max_events_per_trigger_and_restarts_from_its_checkpoint(
        spark, base_url, four_partitions, tmp_path):
    def run() -> list[int]:
        query = (spark.readStream.format("nakadi").option("url", base_url)
                 .option("event_type", four_partitions).option("startingOffsets", "earliest")
                 .option("maxEventsPerTrigger", "4").load()
                 .writeStream.format("parquet").option("path", str(tmp_path / "out"))
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

    sizes = run()
    assert max(sizes) <= 4 and sum(sizes) == 15
    publish_to(base_url, four_partitions, 2, 2)
    assert run() == [2]
    everything = positions(spark.read.parquet(str(tmp_path / "out")))
    assert everything == sorted(
        [("0", offset(n)) for n in range(5)] + [("1", offset(n)) for n in range(7)]
        + [("2", offset(n)) for n in range(2)] + [("3", offset(n)) for n in range(3)])


def test_a_subscription_follows_the_sink_up_to_the_last_batch(spark, base_url, four_partitions,
                                                            tmp_path):
    """Spark commits a batch to its source only when it plans one with new events, so
    the cursors of a query's last batch were never set: stats showed it unconsumed for
    good, and a query started afresh at the cursors read it again."""
    response = requests.post(f"{base_url}/subscriptions", json={
        "owning_application": "sink", "event_types": [four_partitions], "read_from": "begin"})
    assert response.status_code in (200, 201), response.text
    subscription = response.json()["id"]

    def run(sink: str) -> int:  # a new sink: a file sink keeps a log of its own
        query = (spark.readStream.format("nakadi").option("url", base_url)
                 .option("event_type", four_partitions).option("subscription_id", subscription)
                 .option("maxEventsPerTrigger", "4").load()
                 .writeStream.format("parquet").option("path", str(tmp_path / sink))
                 .option("checkpointLocation", str(tmp_path / sink / "_checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        return sum(p["numInputRows"] for p in query.recentProgress)

    def unconsumed() -> int:
        stats = requests.get(f"{base_url}/subscriptions/{subscription}/stats").json()
        return sum(p.get("unconsumed_events", 0) for p in stats["items"][0]["partitions"])

    assert run("first") == 15
    assert unconsumed() == 0
    publish_to(base_url, four_partitions, 2, 2)
    assert unconsumed() == 2
    assert run("second") == 2  # a new checkpoint starts at the cursors
    assert unconsumed() == 0
    assert positions(spark.read.parquet(str(tmp_path / "second"))) == [
        ("2", offset(0)), ("2", offset(1))]


def test_an_event_type_of_a_hundred_partitions_is_read_whole(spark, base_url, default_storage):
    """A cursor per partition in one ``cursors`` query parameter made a request line
    of ~7 KB, which the broker refuses (414) beyond 4094 bytes."""
    name = new_event_type(base_url, partition_strategy="user_defined",
                          default_statistic={"messages_per_minute": 100, "message_size": 100,
                                             "read_parallelism": 100,
                                             "write_parallelism": 100})
    for partition in (7, 63, 99):
        publish_to(base_url, name, partition, 2, start=partition * 100)
    assert positions(nakadi(spark, base_url, name)) == sorted(
        (str(p), offset(n)) for p in (7, 63, 99) for n in range(2))

    planner = OffsetPlanner(BrokerClient(base_url), name)
    start = planner.resolve("earliest", "earliest")
    assert len(start) == 100
    end = planner.advance(start, None)  # what a streaming query's next batch takes
    assert planner.distances(start, end) == {str(p): 2 if p in (7, 63, 99) else 0
                                             for p in range(100)}


def one_line_error(error: Exception) -> str:
    text = str(error)
    assert "Traceback" not in text
    return text


def test_a_streaming_query_s_error_is_its_sentence_without_a_python_traceback(
        spark, base_url, four_partitions, tmp_path):
    query = (spark.readStream.format("nakadi").option("url", base_url)
             .option("event_type", four_partitions).option("startingOffsets", '{"7": "earliest"}')
             .load().writeStream.format("noop")
             .option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    with pytest.raises(StreamingQueryException) as caught:
        query.awaitTermination()
    assert f"event type {four_partitions!r} has no partition 7" in one_line_error(caught.value)


def test_an_unknown_event_type_is_a_clear_error(spark, base_url):
    with pytest.raises(AnalysisException) as caught:
        nakadi(spark, base_url, "no.such.type")
    assert f"event type 'no.such.type' does not exist at {base_url}" in one_line_error(
        caught.value)


def test_a_broker_that_is_down_is_a_clear_error(spark):
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(AnalysisException) as caught:
        nakadi(spark, url, "orders")
    assert f"cannot reach the broker at {url}" in one_line_error(caught.value)
    assert "connection refused" in str(caught.value)


def test_a_bad_url_is_a_clear_error(spark):
    with pytest.raises(AnalysisException) as caught:
        nakadi(spark, "localhost:8080", "orders")
    assert "the broker url 'localhost:8080' is not an http:// or https:// URL" in \
        one_line_error(caught.value)


def test_an_offset_the_event_type_does_not_have_is_a_clear_error(spark, base_url,
                                                                 four_partitions):
    with pytest.raises(AnalysisException) as caught:
        nakadi(spark, base_url, four_partitions,
               startingOffsets=json.dumps({"7": offset(0)})).collect()
    assert "has no partition 7" in one_line_error(caught.value)


def test_a_compacted_event_type_gives_each_event_that_stays_once_with_its_offset(
        spark, base_url, compacted_event_type):
    name, survivors = compacted_event_type
    rows = nakadi(spark, base_url, name, eventsPerSplit="7").collect()
    assert sorted((r["eid"], r["offset"]) for r in rows) == sorted(survivors.items())
    assert sorted(r["amount"] for r in rows) == [30.0, 31.0, 32.0, 33.0, 34.0]
    # A range ends at its end offset; one whose end compaction emptied, before the
    # next event.
    partial = nakadi(spark, base_url, name, endingOffsets=json.dumps({"0": offset(16)}))
    assert positions(partial) == [("0", offset(15)), ("0", offset(16))]
    assert nakadi(spark, base_url, name,
                  endingOffsets=json.dumps({"0": offset(12)})).count() == 0
