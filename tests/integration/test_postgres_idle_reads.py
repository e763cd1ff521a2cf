"""An idle stream on the postgres storage costs no query per poll: once a read found
nothing, the reader reads again only after an append to its topic was notified (or
notifications may have been missed). With 1,000 idle streams each reading twice a
second, the queries had held publishing to a few events/s and delayed keep-alives
by seconds (bench_soak). Nor do streams opening together at the end of a topic read
more than they need."""

from __future__ import annotations

import gevent

from app.storage.engine import PartitionBounds, stored_events
from app.storage.postgres import BOUNDS, PostgresEngine


def test_an_idle_reader_reads_again_only_after_an_append_is_notified(
        postgres_engine, postgres_topic, reads):
    engine: PostgresEngine = postgres_engine
    reader = engine.reader(postgres_topic, {0: -1, 1: -1})
    assert reader.poll(10, 0.2) == []
    after_first = len(reads)
    for _ in range(5):
        assert reader.poll(10, 0.1) == []
    assert len(reads) == after_first, "an idle reader kept querying"

    engine.append_many(postgres_topic, {1: [b'{"n": 1}']})
    events = stored_events(reader.poll(10, 2.0))
    assert [(event.partition, event.offset) for event in events] == [(1, 0)]
    assert len(reads) > after_first

    engine._watch._wake_all()  # notifications may have been missed: look again
    before = len(reads)
    assert reader.poll(10, 0.1) == []
    assert len(reads) > before
    reader.close()


def test_a_reader_starting_at_the_newest_events_just_read_skips_its_first_read(
        postgres_engine, postgres_topic, reads):
    # A stream opened at the end reads the bounds first; a thousand such streams opening
    # together spent a tenth of their time on a first read that could find nothing.
    engine: PostgresEngine = postgres_engine
    engine.append_many(postgres_topic, {0: [b'{"n": 0}']})
    # A fresh engine, as in a worker just started: the bounds start listening for appends
    # (else a storm of streams on a new worker read their bounds before any of them did).
    newest = {bounds.partition: bounds.newest for bounds in engine.bounds(postgres_topic)}
    assert newest == {0: 0, 1: -1}
    at_end = engine.reader(postgres_topic, newest)
    assert at_end.poll(10, 0.2) == []
    assert reads == [], "a reader at the known end read anyway"
    engine.append_many(postgres_topic, {1: [b'{"n": 1}']})
    assert [(e.partition, e.offset) for e in stored_events(at_end.poll(10, 2.0))] == [(1, 0)]
    at_end.close()

    behind = engine.reader(postgres_topic, {0: -1, 1: 0})  # not at the end: reads at once
    assert [(e.partition, e.offset) for e in stored_events(behind.poll(10, 0.2))] == [(0, 0)]
    behind.close()


def test_a_reader_at_the_end_gets_what_was_appended_after_the_bounds_were_read(
        postgres_engine, postgres_topic):
    # Whether the append is heard of before the reader starts or after, it is read.
    engine: PostgresEngine = postgres_engine
    for n in range(5):
        newest = {bounds.partition: bounds.newest for bounds in engine.bounds(postgres_topic)}
        engine.append_many(postgres_topic, {0: [b'{"n": %d}' % n]})
        reader = engine.reader(postgres_topic, newest)
        assert [e.payload for e in stored_events(reader.poll(10, 2.0))] == [b'{"n": %d}' % n]
        reader.close()


def test_streams_opening_at_once_share_a_read_of_the_bounds(postgres_engine, postgres_topic,
                                                             monkeypatch):
    engine: PostgresEngine = postgres_engine
    engine.append_many(postgres_topic, {0: [b'{"n": 0}']})
    asked: list[object] = []
    query = engine._query

    def counted(statement, params, **kwargs):
        if statement == BOUNDS:
            asked.append(params)
        return query(statement, params, **kwargs)
    monkeypatch.setattr(engine, "_query", counted)
    opening = [gevent.spawn(engine.bounds, postgres_topic) for _ in range(20)]
    gevent.joinall(opening, raise_error=True)
    assert all(greenlet.value == [PartitionBounds(0, 0, 0), PartitionBounds(1, 0, -1)]
               for greenlet in opening)
    assert len(asked) == 1
