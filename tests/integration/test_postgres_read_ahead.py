"""While a partition has a backlog, a postgres reader sends its next read as soon as
one comes back, so that the server reads while the stream sends. The read ahead must
give what reading in turn gives: every event once and in order, appends made while it
ran, and its errors."""

from __future__ import annotations

import gevent
import pytest

from app.storage.engine import StorageError, stored_events
from app.storage.postgres import PostgresEngine


def _append(engine: PostgresEngine, topic: str, partition: int, first: int, count: int) -> None:
    engine.append_many(topic, {partition: [b'{"n": %d}' % n
                                           for n in range(first, first + count)]})


def test_a_reader_with_a_backlog_reads_ahead_and_gives_every_event_once_in_order(
        postgres_engine, postgres_topic, reads):
    for start in range(0, 3000, 500):
        _append(postgres_engine, postgres_topic, 0, start, 500)
        _append(postgres_engine, postgres_topic, 1, start, 500)
    reader = postgres_engine.reader(postgres_topic, {0: -1, 1: -1})
    first = stored_events(reader.poll(100, 1.0))
    assert len(first) == 100
    assert len(reads) == 2, "the next read was not sent while the first one is served"

    got = first
    while polled := reader.poll(700, 0.2):
        got += stored_events(polled)
    reader.close()
    for partition in (0, 1):
        events = [e for e in got if e.partition == partition]
        assert [e.offset for e in events] == list(range(3000))
        assert [e.payload for e in events] == [b'{"n": %d}' % n for n in range(3000)]


def test_an_append_made_while_the_read_ahead_found_nothing_is_read(
        postgres_engine, postgres_topic, reads):
    _append(postgres_engine, postgres_topic, 0, 0, 20)
    reader = postgres_engine.reader(postgres_topic, {0: -1, 1: -1})
    assert len(stored_events(reader.poll(10, 1.0))) == 10  # and a read ahead, which finds nothing
    assert len(reads) == 2
    _append(postgres_engine, postgres_topic, 1, 0, 1)
    gevent.sleep(0.3)  # the append is heard of before the next poll
    assert len(stored_events(reader.poll(10, 1.0))) == 10
    late = stored_events(reader.poll(10, 2.0))
    assert [(e.partition, e.offset, e.payload) for e in late] == [(1, 0, b'{"n": 0}')]
    reader.close()


def test_an_error_of_the_read_ahead_comes_out_of_the_poll_that_needs_it(
        postgres_engine, postgres_topic, monkeypatch):
    _append(postgres_engine, postgres_topic, 0, 0, 1000)
    read_many = postgres_engine._read_many
    calls = []

    def failing_after_the_first(*args):
        calls.append(args)
        if len(calls) > 1:
            raise StorageError("postgres: the read ahead failed")
        return read_many(*args)

    monkeypatch.setattr(postgres_engine, "_read_many", failing_after_the_first)
    reader = postgres_engine.reader(postgres_topic, {0: -1, 1: -1})
    served = stored_events(reader.poll(600, 1.0))
    assert len(calls) == 2
    served += stored_events(reader.poll(600, 1.0))  # what the first read brought
    assert [e.offset for e in served] == list(range(1000))
    with pytest.raises(StorageError, match="the read ahead failed"):
        reader.poll(600, 1.0)
    reader.close()
