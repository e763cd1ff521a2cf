"""Group commit on the postgres engine: concurrent appends share one statement, and
one that cannot be stored fails alone, leaving nothing half-written."""

from __future__ import annotations

import time
import uuid

import gevent
import pytest

from app.repository.storages import get_storage
from app.storage.engine import BEFORE_FIRST, StorageError
from app.storage.engines import build_engine
from app.storage.postgres_appender import GroupAppender


@pytest.fixture
def topics(postgres_engine):
    names = [f"test-{uuid.uuid4().hex[:12]}" for _ in range(2)]
    for name in names:
        postgres_engine.create_topic(name, partitions=3, retention_ms=3_600_000)
    yield names
    for name in names:
        postgres_engine.delete_topic(name)


def test_an_append_to_a_missing_partition_stores_nothing(postgres_engine, topics):
    with pytest.raises(StorageError):
        postgres_engine.append_many(topics[0], {0: [b'{"n":1}'], 7: [b'{"n":2}']})
    assert postgres_engine.append(topics[0], 0, [b'{"n":3}']) == [0]


def test_a_failing_append_fails_alone_in_a_shared_statement(postgres_engine, topics, pool):
    live, doomed = topics
    postgres_engine.append(doomed, 0, [b'{"n":0}'])  # this engine caches the topic's id
    other_process = build_engine(get_storage(pool, "postgres"), pool)
    other_process.delete_topic(doomed)
    other_process.close()

    # Spawned together, the appends queue before a writer runs: they share a statement.
    appends = [gevent.spawn(postgres_engine.append_many, live, {0: [b'{"n":1}'], 2: [b'{"n":2}']}),
               gevent.spawn(postgres_engine.append_many, doomed, {1: [b'{"n":3}']}),
               gevent.spawn(postgres_engine.append_many, live, {1: [b'{"n":4}']})]
    gevent.joinall(appends)
    assert appends[0].value == {0: [0], 2: [0]}
    assert isinstance(appends[1].exception, StorageError)
    assert appends[2].value == {1: [0]}
    stored = {p: [e.payload for e in postgres_engine.read(live, p, BEFORE_FIRST, 10)]
              for p in range(3)}
    assert stored == {0: [b'{"n":1}'], 1: [b'{"n":4}'], 2: [b'{"n":2}']}


def test_payloads_of_appends_sharing_a_statement_come_back_byte_for_byte(postgres_engine,
                                                                        topics):
    # Payloads travel as text and are stored as UTF-8 bytes: escapes, quotes,
    # backslashes and non-ASCII characters must come back as they went in.
    awkward = [b'{"a":"tab\\tquote\\"back\\\\slash"}',
               '{"name":"Jos\u00e9 \u2603 \U0001f600"}'.encode(),
               b'{"nl":"line\\nbreak","rs":"\\u001e"}', b'{}']
    appends = [gevent.spawn(postgres_engine.append_many, topics[0], {0: awkward, 1: awkward[:1]}),
               gevent.spawn(postgres_engine.append_many, topics[1], {2: awkward[::-1]})]
    gevent.joinall(appends)
    assert [a.value for a in appends] == [{0: [0, 1, 2, 3], 1: [0]}, {2: [0, 1, 2, 3]}]
    assert [e.payload for e in postgres_engine.read(topics[0], 0, BEFORE_FIRST, 10)] == awkward
    assert [e.payload for e in postgres_engine.read(topics[1], 2, BEFORE_FIRST, 10)] == \
        awkward[::-1]


def test_while_appends_share_transactions_the_writer_waits_for_the_worker(pool, topics):
    """A transaction's own costs are most of what PostgreSQL spends on a small append:
    after a transaction that carried several appends, the writer lets every greenlet
    that can run go first, so that requests already received join the next
    transaction; it does not wait for appends nobody is making yet. After a
    transaction of a single append, the next goes at once."""
    topic_id = pool.fetch_all("SELECT id FROM log_topics WHERE name = %s", (topics[0],))[0][0]
    appender = GroupAppender(pool, linger_s=5.0)
    sizes: list[int] = []
    write = appender._write
    appender._write = lambda taken: sizes.append(len(taken)) or write(taken)  # type: ignore

    def still_parsing() -> dict[int, int]:  # a request a few turns from its append
        for _ in range(3):
            gevent.sleep(0)
        return appender.append(topic_id, {1: [b'{"n":3}']})

    try:
        started = time.monotonic()
        appender.append(topic_id, {0: [b'{"n":0}']})
        assert time.monotonic() - started < 2.5, "a single append waited for company"
        gevent.joinall([gevent.spawn(appender.append, topic_id, {0: [b'{"n":1}']})
                        for _ in range(2)])  # queued together: one transaction of two
        started = time.monotonic()
        lingered = [gevent.spawn(appender.append, topic_id, {1: [b'{"n":2}']}),
                    gevent.spawn(still_parsing)]
        gevent.joinall(lingered, raise_error=True)
        assert time.monotonic() - started < 2.5, "the writer lingered with nothing to run"
        assert sizes == [1, 2, 2]
        assert [offsets[1] for offsets in (g.value for g in lingered)] == [0, 1]
    finally:
        appender.close()


def test_a_busy_worker_keeps_the_writer_waiting_no_longer_than_the_linger(pool, topics):
    topic_id = pool.fetch_all("SELECT id FROM log_topics WHERE name = %s", (topics[0],))[0][0]
    appender = GroupAppender(pool, linger_s=0.3)
    spinning = True

    def busy() -> None:  # a greenlet always ready to run, as under a flood of requests
        while spinning:
            gevent.sleep(0)

    try:
        gevent.joinall([gevent.spawn(appender.append, topic_id, {0: [b'{"n":1}']})
                        for _ in range(2)])  # a transaction of two: the next one lingers
        spinner = gevent.spawn(busy)
        started = time.monotonic()
        appender.append(topic_id, {0: [b'{"n":2}']})
        took = time.monotonic() - started
        assert not spinner.dead
        assert 0.25 <= took < 3.0, took
    finally:
        spinning = False
        appender.close()
