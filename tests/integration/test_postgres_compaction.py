"""The postgres engine compacts the topics of compacted event types: each key's latest
event stays, at its offset; the events it replaced are gone for every reader."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from unittest.mock import patch

import gevent
import orjson
import pytest

from app.domain.event_type import KEEP_FOREVER
from app.storage.engine import BEFORE_FIRST, PartitionBounds, stored_events
from app.storage.postgres import MERGE_EMPTIED, spans
from tests.helpers.waiting import wait_until
from tests.integration.test_postgres_chunks import chunks


def keyed(key: str, n: int) -> bytes:
    return orjson.dumps({"n": n, "metadata": {"partition_compaction_key": key}})


@pytest.fixture
def compacted_topic(postgres_engine) -> Iterator[str]:
    """A new compacted topic of 2 partitions; the compacted topics other tests left are
    compacted first, so that what a test's compaction counts is its own."""
    postgres_engine.compact(0)
    topic = f"compacted-{uuid.uuid4().hex[:8]}"
    postgres_engine.create_topic(topic, partitions=2, retention_ms=KEEP_FOREVER, compacted=True)
    yield topic
    postgres_engine.delete_topic(topic)


def offsets_and_payloads(engine, topic: str, partition: int, after: int = BEFORE_FIRST
                         ) -> list[tuple[int, bytes]]:
    return [(e.offset, e.payload) for e in engine.read(topic, partition, after, 10_000)]


def test_each_keys_latest_event_stays_at_its_offset(postgres_engine, compacted_topic):
    appends = [["a", "b", "a"], ["c", "b"], ["a"]]  # three chunks: offsets 0-2, 3-4, 5
    payloads = [keyed(key, n) for n, key in enumerate(k for keys in appends for k in keys)]
    start = 0
    for keys in appends:
        postgres_engine.append(compacted_topic, 0, payloads[start:start + len(keys)])
        start += len(keys)
    postgres_engine.append(compacted_topic, 1, [keyed("a", 0)])

    assert postgres_engine.compact(0) == 3
    latest = [(3, payloads[3]), (4, payloads[4]), (5, payloads[5])]
    assert offsets_and_payloads(postgres_engine, compacted_topic, 0) == latest
    assert offsets_and_payloads(postgres_engine, compacted_topic, 0, after=3) == latest[1:]
    assert offsets_and_payloads(postgres_engine, compacted_topic, 1) == [(0, keyed("a", 0))]
    # Offsets and bounds stay; appends go on after them.
    assert postgres_engine.bounds(compacted_topic)[0] == PartitionBounds(0, 0, 5)
    assert postgres_engine.append(compacted_topic, 0, [keyed("c", 6)]) == [6]
    assert postgres_engine.compact(0) == 1  # c at 3
    assert [o for o, _ in offsets_and_payloads(postgres_engine, compacted_topic, 0)] == [4, 5, 6]


def test_a_chunk_compaction_rewrote_keeps_no_line_ends(postgres_engine, compacted_topic,
                                                     pool):
    """They would no longer fit its lines: readers split such chunks."""
    postgres_engine.append(compacted_topic, 0, [keyed("a", 0), keyed("b", 1), keyed("a", 2)])
    assert postgres_engine.compact(0) == 1
    assert pool.fetch_all("SELECT holes, line_ends FROM log_chunks WHERE topic_id ="
                          " (SELECT id FROM log_topics WHERE name = %s)", (compacted_topic,)) \
        == [(True, None)]
    assert [o for o, _ in offsets_and_payloads(postgres_engine, compacted_topic, 0)] == [1, 2]


def test_chunks_left_empty_become_one(postgres_engine, compacted_topic, pool):
    for n in range(5):
        postgres_engine.append(compacted_topic, 0, [keyed("k", n)])
    assert postgres_engine.compact(0) == 4
    assert chunks(pool, compacted_topic) == [(0, 0, 3), (0, 4, 4)]
    assert offsets_and_payloads(postgres_engine, compacted_topic, 0) == [(4, keyed("k", 4))]
    assert offsets_and_payloads(postgres_engine, compacted_topic, 0, after=1) == \
        [(4, keyed("k", 4))]


def test_a_reader_crosses_thousands_of_removed_events_at_once(postgres_engine,
                                                              compacted_topic):
    """Reads that find only removed events are not the end of the partition: the
    reader reads on, without waiting for an append."""
    postgres_engine.append(compacted_topic, 0, [keyed("k", n) for n in range(4500)])
    postgres_engine.append(compacted_topic, 0, [keyed("other", 0)])
    assert postgres_engine.compact(0) == 4499
    reader = postgres_engine.reader(compacted_topic, {0: BEFORE_FIRST})
    try:
        events = stored_events(reader.poll(10, timeout=5.0))
        events += stored_events(reader.poll(10, timeout=0.1))
    finally:
        reader.close()
    assert [(e.offset, e.payload) for e in events] == \
        [(4499, keyed("k", 4499)), (4500, keyed("other", 0))]


def test_a_partition_is_compacted_again_once_events_came_and_its_interval_passed(
        postgres_engine, compacted_topic):
    postgres_engine.append(compacted_topic, 0, [keyed("k", 0), keyed("k", 1)])
    assert postgres_engine.compact(3600) == 1
    assert postgres_engine.compact(0) == 0  # nothing new
    postgres_engine.append(compacted_topic, 0, [keyed("k", 2)])
    assert postgres_engine.compact(3600) == 0  # compacted less than an hour ago
    assert postgres_engine.compact(0) == 1


def test_topics_of_other_event_types_are_not_compacted(postgres_engine, postgres_topic):
    postgres_engine.append(postgres_topic, 0, [keyed("k", n) for n in range(3)])
    postgres_engine.compact(0)
    assert len(postgres_engine.read(postgres_topic, 0, BEFORE_FIRST, 10)) == 3


def test_events_postgresql_cannot_read_keep_no_key_and_the_others_are_compacted(
        postgres_engine, compacted_topic):
    """An escaped NUL is valid JSON that PostgreSQL refuses to read: such an event stays,
    and its partition's compaction (and the next partitions') goes on without it."""
    nul = b'{"note":"\\u0000","metadata":{"partition_compaction_key":"a"}}'
    postgres_engine.append(compacted_topic, 0, [keyed("a", 0), nul, keyed("a", 2)])
    postgres_engine.append(compacted_topic, 1, [keyed("b", 0), keyed("b", 1)])
    assert postgres_engine.compact(0) == 2
    assert offsets_and_payloads(postgres_engine, compacted_topic, 0) == \
        [(1, nul), (2, keyed("a", 2))]
    assert offsets_and_payloads(postgres_engine, compacted_topic, 1) == [(1, keyed("b", 1))]


def test_statements_read_a_bounded_number_of_bytes_whatever_the_events_size():
    """Large events made one statement of 50,000 offsets outlast the statement timeout;
    statements now take chunks up to a number of bytes (or one larger chunk)."""
    sizes = [(9, 10), (19, 30), (29, 25), (39, 5), (49, 100), (59, 1)]
    with patch("app.storage.postgres.COMPACTION_BYTES", 40):
        assert spans(sizes, BEFORE_FIRST) == [(-1, 19), (19, 39), (39, 49), (49, 59)]
        assert spans(sizes, 29) == [(29, 39), (39, 49), (49, 59)]
        assert spans(sizes, 59) == []


def test_a_compaction_over_many_statements_and_many_chunks(postgres_engine, compacted_topic,
                                                           pool):
    """Events published one at a time are a chunk each: their compaction rewrites them
    many at once, and each statement reads a bounded share of them."""
    for n in range(60):
        postgres_engine.append(compacted_topic, 0, [keyed(f"k{n % 7}", n)])
    with patch("app.storage.postgres.COMPACTION_BYTES", 500):  # ~8 events a statement
        assert postgres_engine.compact(0) == 53
    assert offsets_and_payloads(postgres_engine, compacted_topic, 0) == \
        [(n, keyed(f"k{n % 7}", n)) for n in range(53, 60)]
    assert len(chunks(pool, compacted_topic)) == 8  # offsets 0-52 in one, then 7


def test_a_topic_deleted_while_compaction_merges_its_chunks_keeps_none_of_them(
        postgres_engine, compacted_topic, pool):
    """A merged chunk written after the deletion had removed the topic's chunks stayed
    for good (log_chunks has no foreign key). The merge is held open a second here."""
    for n in range(3):
        postgres_engine.append(compacted_topic, 0, [keyed("k", n)])
    [(topic_id,)] = pool.fetch_all("SELECT id FROM log_topics WHERE name = %s",
                                   (compacted_topic,))
    with patch("app.storage.postgres.MERGE_EMPTIED", MERGE_EMPTIED + "; SELECT pg_sleep(1)"):
        compaction = gevent.spawn(postgres_engine.compact, 0)
        wait_until(lambda: pool.fetch_all(
            "SELECT 1 FROM pg_stat_activity WHERE query LIKE '%%pg_sleep(1)' AND state = 'active'"
            " AND pid <> pg_backend_pid()"), what="the merge under way")
        postgres_engine.delete_topic(compacted_topic)
        compaction.get(timeout=10)
    assert pool.fetch_all("SELECT count(*) FROM log_chunks WHERE topic_id = %s",
                          (topic_id,)) == [(0,)]
