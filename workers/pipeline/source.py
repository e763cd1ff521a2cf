"""The ``nakadi`` Spark data source: batch and streaming reads of one event type.

    spark.dataSource.register(NakadiDataSource)
    spark.read.format("nakadi").option("url", "http://localhost:8080")
         .option("event_type", "order.created").load()

Every Spark input partition is one offset range of one event-type partition,
read through one low-level stream; offsets in Spark's plans and checkpoints
are the broker's own offset strings per partition.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from workers.allocator import keep_large_blocks
from workers.pipeline.arrow_lines import ArrowLines
from workers.pipeline.client import BrokerClient, BrokerError
from workers.pipeline.ranges import (
    EARLIEST,
    LATEST,
    OffsetPlanner,
    OffsetRange,
    parse_offsets,
    read_range,
)
from workers.pipeline.rows import arrow_schema, record_batch
from workers.pipeline.schema_mapping import Layout, event_layout, row_schema

# About Spark's 128 MB file split at ~250 bytes an event. Every Spark task costs a
# stream, a Python worker's set-up and a Parquet file whose dictionaries start
# afresh: 100,000-event splits cost the benchmark's Spark ~40% more CPU.
DEFAULT_EVENTS_PER_SPLIT = 500_000
DEFAULT_BATCH_LIMIT = 5000


def _positive(options: Mapping[str, str], name: str) -> int | None:
    """An option that must be a positive integer when given."""
    text = options.get(name)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise BrokerError(f"option {name} must be a positive integer, not {text!r}")
    return value


@dataclass(frozen=True)
class SourceOptions:
    """The data source's options, checked (option names are case-insensitive)."""
    url: str
    event_type: str
    token: str | None
    token_file: str | None
    raw: bool
    starting: dict[str, str] | str
    ending: dict[str, str] | str
    max_events_per_trigger: int | None
    events_per_split: int
    batch_limit: int
    subscription_id: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool = False) -> SourceOptions:
        for required in ("url", "event_type"):
            if not options.get(required):
                raise BrokerError(f"the nakadi data source needs the option {required}")
        raw = (options.get("raw") or "false").lower()
        if raw not in ("true", "false"):
            raise BrokerError(f"option raw must be true or false, not {raw!r}")
        return cls(
            url=options["url"], event_type=options["event_type"],
            token=options.get("token"), token_file=options.get("token_file"),
            raw=raw == "true",
            starting=parse_offsets(options.get("startingOffsets"),
                                   LATEST if streaming else EARLIEST, "startingOffsets"),
            ending=parse_offsets(options.get("endingOffsets"), LATEST, "endingOffsets"),
            max_events_per_trigger=_positive(options, "maxEventsPerTrigger"),
            events_per_split=_positive(options, "eventsPerSplit") or DEFAULT_EVENTS_PER_SPLIT,
            batch_limit=_positive(options, "batchLimit") or DEFAULT_BATCH_LIMIT,
            subscription_id=options.get("subscription_id") or None)

    def client(self) -> BrokerClient:
        return BrokerClient(self.url, self.token, self.token_file)

    def layout(self, event_type: dict | None = None) -> Layout:
        """The columns of the event type as the broker defines it now (or as
        ``event_type``, its definition, says)."""
        if event_type is None:
            event_type = self.client().event_type(self.event_type)
        schema = event_type.get("schema", {}).get("schema", "{}")
        try:
            parsed = json.loads(schema) if isinstance(schema, str) else schema
        except ValueError:
            raise BrokerError(f"the schema of {self.event_type!r} is not JSON") from None
        return event_layout(event_type.get("category", "undefined"), parsed, self.raw)


class NakadiDataSource(DataSource):
    """Format ``nakadi``: the events of one event type as rows (see the README's
    Pipeline section for the options)."""

    @classmethod
    def name(cls) -> str:
        return "nakadi"

    def schema(self) -> StructType:
        return row_schema(SourceOptions.parse(self.options).layout())

    def reader(self, schema: StructType) -> DataSourceReader:
        return NakadiBatchReader(SourceOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        reader = NakadiStreamReader(SourceOptions.parse(self.options, streaming=True))
        # The schema changed since Spark asked for it:
        if row_schema(reader.layout).simpleString() != schema.simpleString():
            raise BrokerError(schema_changed(reader.options.event_type, "",
                                             reader.schema_version))
        return reader


class _RangeReader:
    """What batch and stream readers share: the layout, and reading one range."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        definition = options.client().event_type(options.event_type)
        self.layout = options.layout(definition)
        self.schema_version: str | None = definition.get("schema", {}).get("version")
        self.planner = OffsetPlanner(options.client(), options.event_type,
                                     compacted=definition.get("cleanup_policy") == "compact")

    def input_partitions(self, start: Mapping[str, str],
                         end: Mapping[str, str]) -> list[InputPartition]:
        return [InputPartition(span) for span in
                self.planner.ranges(start, end, self.options.events_per_split)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        span: OffsetRange | None = partition.value
        if span is None:  # Spark reads one empty partition when a batch has no ranges
            return
        keep_large_blocks()  # lines of a few MB, read and split in this Python worker
        schema = arrow_schema(self.layout)
        client = self.options.client()
        exact = any(node.holds_json for _, _, node in self.layout.columns)
        lines = ArrowLines(self.layout, schema)
        name = self.options.event_type
        for offsets, events in read_range(client, name, span, self.options.batch_limit,
                                          exact, lines.decode if lines.usable else None):
            if isinstance(events, pa.RecordBatch):
                yield lines.record_batch(name, span.partition, offsets, events)
            else:
                yield record_batch(self.layout, schema, name, span.partition, offsets, events)


class NakadiBatchReader(_RangeReader, DataSourceReader):
    """Exactly the events from ``startingOffsets`` (exclusive) to ``endingOffsets``
    (inclusive), resolved once when the query is planned."""

    def partitions(self) -> list[InputPartition]:
        start = self.planner.resolve(self.options.starting, EARLIEST)
        end = self.planner.resolve(self.options.ending, LATEST)
        return self.input_partitions(start, end)


class NakadiStreamReader(_RangeReader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over per-partition offsets; Spark keeps the offsets in its
    checkpoint, so a restarted query replays an unfinished batch exactly."""

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self.target: dict[str, str] | None = None
        self.followed: dict | None = None  # where the subscription's cursors were set

    def initialOffset(self) -> dict:
        """``startingOffsets``, or where the subscription starts (its committed offsets,
        else its ``read_from``)."""
        starting = self.options.starting
        if self.options.subscription_id:
            starting = self.planner.client.subscription_start(self.options.subscription_id,
                                                              self.options.event_type)
        return self.planner.resolve(starting, EARLIEST)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_events_per_trigger:
            return ReadMaxRows(self.options.max_events_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self.planner.resolve(LATEST, LATEST)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """Where the next batch ends. Its events must fit the query's columns: the
        schema version is checked after the end is known, so an event published
        under a newer schema before that end ends the query instead (its columns
        come from the schema as it was when the query started)."""
        self.follow(start)
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = self.planner.advance(start, budget, self.target)
        if self.schema_version is not None and not self.options.raw and end != start:
            now = self.planner.client.event_type(self.options.event_type).get(
                "schema", {}).get("version")
            if now != self.schema_version:
                raise BrokerError(schema_changed(self.options.event_type,
                                                 self.schema_version, now))
        return end

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return self.input_partitions(start, end)

    def follow(self, start: dict) -> None:
        """With a subscription, moves its cursors to ``start``, so that
        ``/subscriptions/{id}/stats`` shows what is not in the sink yet. Spark asks
        ``latestOffset`` only once the batches before have been written (and recorded
        in the checkpoint): at every trigger, and once more after an ``availableNow``
        query's last batch. ``commit``, which Spark calls only when it plans a batch
        with new events, left the cursors a batch behind for good once a query
        stopped or idled. Spark's checkpoint stays the record of progress; a failed
        update is only logged and the next trigger tries again."""
        if not self.options.subscription_id or start == self.followed:
            return
        try:
            self.planner.client.reset_cursors(self.options.subscription_id,
                                              self.options.event_type, start)
            self.followed = dict(start)
        except BrokerError as error:
            logging.getLogger(__name__).warning("subscription cursors not updated: %s", error)


SCHEMA_CHANGED = "changed since the query started"


def schema_changed(event_type: str, before: str | None, now: str | None) -> str:
    """The error that ends a streaming query whose event type's schema changed."""
    versions = f" from version {before} to {now}" if before and now else ""
    return (f"the schema of {event_type!r}{versions} {SCHEMA_CHANGED}; start the query "
            "again (from its checkpoint) to read the new schema's columns")
