"""The pure parts of publishing: reading batches, partitioning, enrichment."""

import json

import pytest

from app.domain.event_type import EventType, EventTypeSchema
from app.domain.timeline import Timeline
from app.publishing.batch import (
    MAX_EVENT_BYTES,
    MAX_STORED_NESTING,
    BatchUnreadable,
    EventTooDeep,
    NotABatch,
    TooManyEvents,
    dumps,
    parse_batch,
)
from app.publishing.enrichment import EnrichmentFailed, enrich
from app.publishing.partitioning import PartitioningFailed, hash_partition, partitioner
from app.publishing.publisher import BatchRejected, publish
from app.registry import timestamps

LIMIT = 100


def parse(body: bytes):
    return parse_batch(body, LIMIT)


def test_small_batches_parse_without_sizes():
    assert parse(b' [{"a": 1}, {"b": [true, null]}] ') == (
        [{"a": 1}, {"b": [True, None]}], None)
    assert parse(b"[]") == ([], None)


def test_integers_beyond_64_bits_survive_exactly():
    events, _ = parse(b'[{"id": 123456789012345678901234567890, "f": 0.5}]')
    assert events[0]["id"] == 123456789012345678901234567890
    assert dumps(events[0]) == b'{"id":123456789012345678901234567890,"f":0.5}'


def nested(depth: int, inner: object = 1) -> object:
    value = inner
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("inner", [1, 10**30])  # orjson, and the standard library's writer
def test_events_nest_at_most_as_deeply_as_they_are_stored(inner):
    """Bodies are read to about 1,000 levels, orjson writes 254: deeper events used to be
    a 500 when stored (and, with a big integer, were stored up to ~900 levels)."""
    assert dumps(nested(MAX_STORED_NESTING - 1, inner)) == \
        b"[" * (MAX_STORED_NESTING - 1) + str(inner).encode() + b"]" * (MAX_STORED_NESTING - 1)
    with pytest.raises(EventTooDeep, match=f"more than {MAX_STORED_NESTING} levels"):
        dumps({"a": nested(MAX_STORED_NESTING, inner)})
    # orjson stops at the big integer first; the standard library would write the rest.
    with pytest.raises(EventTooDeep):
        dumps({"n": 10**30, "a": nested(MAX_STORED_NESTING)})


@pytest.mark.parametrize("body", [b"", b"[", b"{not json", b"[1,]", b"[1] x", b"[NaN]"])
def test_unreadable_bodies(body):
    with pytest.raises(BatchUnreadable):
        parse(body)


@pytest.mark.parametrize("body", [b"{}", b'"events"', b"42", b"null"])
def test_json_that_is_not_an_array(body):
    with pytest.raises(NotABatch):
        parse(body)


def test_large_batches_report_each_events_size_as_sent():
    small = '{"n": 1}'
    padded = '{"pad": "' + "é" * 300_000 + '" }'  # é is two bytes
    big = '{"pad": "' + "x" * (MAX_EVENT_BYTES - 11) + '"}'
    body = f"[ {small} ,\n{padded},{big}\t]".encode()
    events, sizes = parse(body)
    assert events[0] == {"n": 1}
    assert sizes == [len(small), len(padded.encode()), MAX_EVENT_BYTES]


def test_large_bodies_that_are_broken_or_not_arrays():
    filler = "x" * MAX_EVENT_BYTES
    with pytest.raises(BatchUnreadable):
        parse(f'[{{"a": "{filler}"}}, oops]'.encode())
    with pytest.raises(BatchUnreadable):
        parse(f'[{{"a": "{filler}"}}] trailing'.encode())
    with pytest.raises(NotABatch):
        parse(json.dumps({"a": filler}).encode())


def test_a_batch_of_as_many_events_as_allowed_is_read_and_one_more_is_refused():
    events, _ = parse(b"[" + b",".join([b"{}"] * LIMIT) + b"]")
    assert len(events) == LIMIT
    with pytest.raises(TooManyEvents, match=f"more than {LIMIT} events"):
        parse(b"[" + b",".join([b"1"] * (LIMIT + 1)) + b"]")


def test_a_long_body_is_read_no_further_than_the_events_allowed():
    """Long bodies are walked event by event, in Python: the walk stops at the limit
    instead of reading millions of tiny events first."""
    filler = "x" * MAX_EVENT_BYTES
    body = f'[{{"a": "{filler}"}}' + ", 1" * LIMIT + ", oops]"  # broken after the limit
    with pytest.raises(TooManyEvents):
        parse(body.encode())


def event_type(strategy="random", category="business", keys=()):
    return EventType("t", "app", category, EventTypeSchema("json_schema", "{}"),
                     partition_strategy=strategy, partition_key_fields=tuple(keys))


PINNED = [1, 5, 3, 0, 2, 6, 5, 1]


def test_hash_partition_is_stable_and_spreads():
    # Pinned values: a key must land in the same partition in every process, after
    # every restart and on every machine, so these never change.
    assert [hash_partition([f"order-{n}"], 8) for n in range(8)] == PINNED
    by_key = partitioner(event_type("hash", keys=["key"]), 8)
    assert [by_key({"key": f"order-{n}"}) for n in range(8)] == PINNED
    assert hash_partition(["order-1"], 1000) == 429
    spread = {hash_partition([f"order-{n}"], 8) for n in range(200)}
    assert spread == set(range(8))


def test_hash_uses_key_fields_relative_to_data_for_data_events():
    et = event_type("hash", "data", ["id"])
    first = partitioner(et, 16)({"data": {"id": "A1", "x": 1}})
    assert partitioner(et, 16)({"data": {"id": "A1", "x": 2}}) == first
    with pytest.raises(PartitioningFailed, match="'id' is missing"):
        partitioner(et, 16)({"data": {}})


def test_hash_keys_holding_integers_beyond_64_bits_or_nesting_too_deeply():
    """Both were 500s: orjson writes neither."""
    et = event_type("hash", keys=["a"])
    assert partitioner(et, 8)({"a": 10**20}) == partitioner(et, 8)({"a": 10**20})
    assert partitioner(et, 8)({"a": {"x": [-(10**25)]}}) in range(8)
    with pytest.raises(PartitioningFailed, match="levels deep"):
        partitioner(et, 8)({"a": nested(MAX_STORED_NESTING + 1)})


def test_hash_over_nested_business_fields():
    et = event_type("hash", keys=["customer.id", "region"])
    event = {"customer": {"id": 7}, "region": "eu"}
    assert partitioner(et, 4)(event) == hash_partition([7, "eu"], 4)
    with pytest.raises(PartitioningFailed, match=r"'customer\.id' is missing"):
        partitioner(et, 4)({"customer": 7, "region": "eu"})


@pytest.mark.parametrize(("metadata", "message"), [
    ({}, "required"), ({"partition": "4"}, "not a partition"),
    ({"partition": "-1"}, "not a partition"), ({"partition": 1}, "not a partition"),
    ({"partition": "01"}, "not a partition"), ({"partition": "3\n"}, "not a partition"),
])
def test_user_defined_partition_must_exist(metadata, message):
    with pytest.raises(PartitioningFailed, match=message):
        partitioner(event_type("user_defined"), 4)({"metadata": metadata})


def test_user_defined_partition_is_taken():
    assert partitioner(event_type("user_defined"), 4)({"metadata": {"partition": "3"}}) == 3


def test_random_partitions_cover_all():
    assert {partitioner(event_type(), 3)({}) for _ in range(200)} == {0, 1, 2}


def test_enrichment_sets_fields_and_refuses_overrides():
    event = {"metadata": {"eid": "e", "occurred_at": "x", "flow_id": "theirs"}}
    enrich(event, "t", "1.2.0", "flow-1", "2026-01-01T00:00:00.000Z")
    assert event["metadata"] == {"eid": "e", "occurred_at": "x", "flow_id": "flow-1",
                                 "received_at": "2026-01-01T00:00:00.000Z",
                                 "event_type": "t", "version": "1.2.0"}
    with pytest.raises(EnrichmentFailed, match="received_at"):
        enrich({"metadata": {"received_at": "x"}}, "t", "1.0.0", "f", "now")
    with pytest.raises(EnrichmentFailed, match="event_type"):
        enrich({"metadata": {"event_type": "other"}}, "t", "1.0.0", "f", "now")


def test_received_at_is_the_current_millisecond_across_second_boundaries():
    moments = iter([1_764_331_215_998_999_999, 1_764_331_215_999_500_000,
                    1_764_331_216_000_000_001, 1_764_331_216_001_000_000])
    assert [timestamps.rfc3339_now(lambda: next(moments)) for _ in range(4)] == [
        "2025-11-28T12:00:15.998Z", "2025-11-28T12:00:15.999Z",
        "2025-11-28T12:00:16.000Z", "2025-11-28T12:00:16.001Z"]


def test_a_schema_that_cannot_be_compiled_fails_the_batch_naming_why():
    """Creation refuses such schemas; one stored before it did is a 422, not a 500."""
    document = {"$ref": "#/properties/o", "properties": {"o": {"type": "object"}}}
    et = EventType("acme.unusable", "acme", "business",
                   EventTypeSchema("json_schema", json.dumps(document), "1.0.0"))
    timeline = Timeline("t", et.name, 0, "default", "topic", 1)
    appended = []
    with pytest.raises(BatchRejected) as rejected:
        publish(et, timeline, lambda payloads, keys: appended.append(payloads) or {},
                [{"metadata": {}}, {}], None, "flow")
    assert appended == []
    assert {(item.status, item.step) for item in rejected.value.items} == {
        ("failed", "validating")}
    detail = rejected.value.items[0].detail
    assert detail.startswith("the event type's schema cannot be used to validate events: ")
    assert "'#/properties/o' does not resolve" in detail
