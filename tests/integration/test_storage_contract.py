"""The contract every storage engine keeps; runs against each engine."""

from __future__ import annotations

import itertools
import json
import time
import uuid

import gevent
import pytest

from app.storage.engine import BEFORE_FIRST, PartitionBounds, StorageError, stored_events


def payload(n: int, size: int = 200) -> bytes:
    body = json.dumps({"n": n, "text": "é€✓ \"quoted\"\n"})
    return (body[:-1] + ', "pad": "' + "x" * max(0, size - len(body) - 11) + '"}').encode()


def test_round_trip_keeps_payloads_and_numbers_offsets_from_zero(engine, topic):
    sent = [payload(n) for n in range(5)]
    assert engine.append(topic, 1, sent) == [0, 1, 2, 3, 4]
    events = engine.read(topic, 1, BEFORE_FIRST, 100)
    assert [e.payload for e in events] == sent
    assert [(e.partition, e.offset) for e in events] == [(1, n) for n in range(5)]


def test_appends_continue_the_partition_in_order(engine, topic):
    engine.append(topic, 0, [payload(0), payload(1)])
    assert engine.append(topic, 0, [payload(2)]) == [2]
    assert engine.append(topic, 2, [payload(9)]) == [0]
    events = engine.read(topic, 0, BEFORE_FIRST, 100)
    assert [json.loads(e.payload)["n"] for e in events] == [0, 1, 2]


def test_concurrent_appenders_get_gap_free_unique_offsets(engine, topic):
    def appender(writer: int) -> list[int]:
        offsets = []
        for batch in range(10):
            offsets += engine.append(
                topic, 0, [payload(writer * 1000 + batch * 10 + i) for i in range(10)])
        return offsets

    writers = [gevent.spawn(appender, w) for w in range(4)]
    gevent.joinall(writers, raise_error=True)
    all_offsets = sorted(o for w in writers for o in w.value)
    assert all_offsets == list(range(400))
    events = engine.read(topic, 0, BEFORE_FIRST, 1000)
    assert [e.offset for e in events] == list(range(400))
    numbers = [json.loads(e.payload)["n"] for e in events]
    for w in range(4):
        mine = [n for n in numbers if n // 1000 == w]
        assert mine == sorted(mine), "each appender's events keep their order"
        assert len(mine) == 100


def test_reads_from_the_middle_and_from_the_end(engine, topic):
    engine.append(topic, 0, [payload(n) for n in range(10)])
    middle = engine.read(topic, 0, 4, 3)
    assert [e.offset for e in middle] == [5, 6, 7]
    assert engine.read(topic, 0, 9, 10) == []
    assert [e.offset for e in engine.read(topic, 0, 7, 10)] == [8, 9]


def test_bounds_of_empty_and_filled_partitions(engine, topic):
    assert engine.bounds(topic) == [PartitionBounds(p, 0, -1) for p in range(3)]
    engine.append(topic, 1, [payload(n) for n in range(7)])
    engine.append(topic, 1, [payload(7), payload(8)])
    engine.append(topic, 2, [payload(0)])
    assert engine.bounds(topic) == [
        PartitionBounds(0, 0, -1), PartitionBounds(1, 0, 8), PartitionBounds(2, 0, 0)]


def test_newest_at_least_is_never_past_the_newest_and_follows_appends(engine, topic):
    """A commit's check asks this first: where it is a lower bound (Tansu: the first
    offset of the newest record batch) it must never pass the newest event."""
    assert engine.newest_at_least(topic) == {0: -1, 1: -1, 2: -1}
    for n in range(1, 6):
        engine.append(topic, 1, [payload(k) for k in range(n)])
        engine.append(topic, 2, [payload(0)])
        newest = {b.partition: b.newest for b in engine.bounds(topic)}
        cheap = engine.newest_at_least(topic)
        assert all(-1 <= cheap[p] <= newest[p] for p in range(3))
        assert cheap[0] == -1
        assert cheap[1] >= newest[1] - n + 1  # at least the start of the last append
        assert cheap[2] == newest[2]  # a one-event append is its own batch


def test_bounds_see_every_acknowledged_append_while_calls_on_topics_interleave(engine, topic):
    """Bounds calls may share clients (kafka keeps its snapshot consumers): each
    still shows every append acknowledged before it, whatever topic came before."""
    other = f"test-{uuid.uuid4().hex[:12]}"
    engine.create_topic(other, partitions=3, retention_ms=3_600_000)
    ends = {topic: [0, 0, 0], other: [0, 0, 0]}
    try:
        def append_and_check(name: str, rounds: int) -> None:
            for n in range(rounds):
                partition = n % 3
                offsets = engine.append_many(name, {partition: [payload(k) for k in range(
                    1 + n % 4)]})[partition]
                ends[name][partition] = offsets[-1] + 1
                assert [b.newest + 1 for b in engine.bounds(name)] == ends[name]

        gevent.joinall([gevent.spawn(append_and_check, name, 30) for name in (topic, other)],
                       raise_error=True)
    finally:
        engine.delete_topic(other)


def test_deleted_topic_is_gone_and_its_name_reusable(engine, topic):
    engine.append(topic, 0, [payload(1)])
    engine.delete_topic(topic)
    with pytest.raises(StorageError):
        engine.bounds(topic)
    engine.delete_topic(topic)  # deleting again is not an error
    engine.create_topic(topic, partitions=2, retention_ms=60_000)
    assert engine.bounds(topic) == [PartitionBounds(0, 0, -1), PartitionBounds(1, 0, -1)]
    assert engine.append(topic, 0, [payload(2)]) == [0]


def test_creating_an_existing_topic_fails(engine, topic):
    with pytest.raises(StorageError):
        engine.create_topic(topic, partitions=3, retention_ms=60_000)


def test_waiting_read_is_woken_by_an_append_within_200ms(engine, topic):
    engine.read(topic, 0, BEFORE_FIRST, 1)  # warm up connections and metadata
    appended_at = {}

    def append_later():
        gevent.sleep(0.3)
        appended_at["t"] = time.monotonic()
        engine.append(topic, 0, [payload(42)])

    writer = gevent.spawn(append_later)
    events = engine.read(topic, 0, BEFORE_FIRST, 10, wait=5.0)
    woken_after = time.monotonic() - appended_at["t"]
    writer.join()
    assert [json.loads(e.payload)["n"] for e in events] == [42]
    assert woken_after < 0.2


def test_waiting_read_returns_nothing_when_nothing_comes(engine, topic):
    started = time.monotonic()
    assert engine.read(topic, 2, BEFORE_FIRST, 10, wait=0.3) == []
    assert 0.25 <= time.monotonic() - started < 2


def test_reader_over_partitions_delivers_each_event_once(engine, topic):
    for p in range(3):
        engine.append(topic, p, [payload(p * 100 + n) for n in range(20)])
    reader = engine.reader(topic, {0: BEFORE_FIRST, 1: 9, 2: 19})
    try:
        seen = []
        while True:
            batch = stored_events(reader.poll(7, timeout=0.5))
            if not batch:
                break
            assert len(batch) <= 7
            seen += [(e.partition, e.offset) for e in batch]
        assert sorted(seen) == [(0, n) for n in range(20)] + [(1, n) for n in range(10, 20)]
        for p in (0, 1):
            offsets = [o for part, o in seen if part == p]
            assert offsets == sorted(offsets)
    finally:
        reader.close()
        reader.close()


def test_reader_is_woken_by_an_append_within_200ms(engine, topic):
    reader = engine.reader(topic, {0: BEFORE_FIRST, 1: BEFORE_FIRST})
    try:
        assert reader.poll(10, timeout=0.2) == []
        appended_at = {}

        def append_later():
            gevent.sleep(0.3)
            appended_at["t"] = time.monotonic()
            engine.append(topic, 1, [payload(7)])

        writer = gevent.spawn(append_later)
        events = stored_events(reader.poll(10, timeout=5.0))
        woken_after = time.monotonic() - appended_at["t"]
        writer.join()
        assert [(e.partition, e.offset) for e in events] == [(1, 0)]
        assert woken_after < 0.2
    finally:
        reader.close()


def test_one_megabyte_event_round_trips(engine, topic):
    big = payload(1, size=1_000_000)
    assert len(big) == 1_000_000
    engine.append(topic, 0, [big])
    assert engine.read(topic, 0, BEFORE_FIRST, 1)[0].payload == big


def test_append_to_unknown_topic_fails(engine):
    with pytest.raises(StorageError):
        engine.append("no-such-topic-anywhere", 0, [payload(1)])


def test_waiting_does_not_block_other_greenlets(engine, topic):
    ticks = []

    def ticker():
        for _ in range(10):
            ticks.append(time.monotonic())
            gevent.sleep(0.02)

    running = gevent.spawn(ticker)
    engine.read(topic, 0, BEFORE_FIRST, 10, wait=0.4)
    running.join()
    assert len(ticks) == 10
    assert max(b - a for a, b in itertools.pairwise(ticks)) < 0.15


def test_append_many_returns_offsets_per_partition_in_order(engine, topic):
    engine.append(topic, 1, [payload(0)])
    results = engine.append_many(topic, {
        2: [payload(20), payload(21)], 0: [payload(0)], 1: [payload(10), payload(11)], 3: []})
    assert results == {0: [0], 1: [1, 2], 2: [0, 1]}
    assert [json.loads(e.payload)["n"] for e in engine.read(topic, 1, BEFORE_FIRST, 10)] == [
        0, 10, 11]


def test_concurrent_append_many_over_shared_partitions(engine, topic):
    def appender(writer: int) -> None:
        for batch in range(5):
            order = [0, 1, 2] if writer % 2 else [2, 1, 0]
            engine.append_many(topic, {p: [payload(writer * 100 + batch)] * 3 for p in order})

    gevent.joinall([gevent.spawn(appender, w) for w in range(4)], raise_error=True)
    for partition in range(3):
        offsets = [e.offset for e in engine.read(topic, partition, BEFORE_FIRST, 1000)]
        assert offsets == list(range(60))


def test_append_many_to_unknown_topic_fails(engine):
    with pytest.raises(StorageError):
        engine.append_many("no-such-topic-anywhere", {0: [payload(1)], 1: [payload(2)]})


def test_topic_deleted_by_another_process_is_noticed(engine, pool):
    from app.repository.storages import get_storage
    from app.storage.engines import build_engine
    from app.storage.kafka import KafkaEngine

    storage = get_storage(pool, engine.storage_type)
    # Kafka notices only once its request times out: keep that short here.
    this_process = (KafkaEngine(storage.configuration["bootstrap_servers"], timeout=3)
                    if storage.storage_type == "kafka" else build_engine(storage, pool))
    other_process = build_engine(storage, pool)
    topic = f"test-{uuid.uuid4().hex[:12]}"
    try:
        this_process.create_topic(topic, partitions=1, retention_ms=60_000)
        this_process.append(topic, 0, [payload(1)])
        this_process.bounds(topic)  # this engine now knows the topic
        other_process.delete_topic(topic)
        with pytest.raises(StorageError):
            this_process.bounds(topic)
    finally:
        this_process.close()
        other_process.close()


def test_a_warmed_up_kafka_engine_appends_with_the_producer_it_started(pool, monkeypatch):
    """Each worker warms its engines up as it starts, so that its first publish finds a
    producer already connected, instead of waiting half a second to start one."""
    from app.repository.storages import get_storage
    from app.storage.engines import build_engine
    from app.storage.kafka.clients import Clients

    started: list[float] = []
    make_producer = Clients.producer

    def counted(self, timeout):
        started.append(timeout)
        return make_producer(self, timeout)

    monkeypatch.setattr(Clients, "producer", counted)
    engine = build_engine(get_storage(pool, "kafka"), pool)
    topic = f"test-{uuid.uuid4().hex[:12]}"
    try:
        engine.warm_up()
        assert len(started) == 1
        engine.create_topic(topic, partitions=1, retention_ms=60_000)
        assert engine.append(topic, 0, [payload(1)]) == [0]
        assert len(started) == 1
    finally:
        engine.delete_topic(topic)
        engine.close()


def test_kafka_clients_connect_as_the_properties_file_says(pool):
    """``NAKADI_KAFKA_CLIENT_PROPERTIES`` reaches every client: told to speak TLS to the
    local plaintext broker, the engine cannot get an answer from it."""
    from app.repository.storages import get_storage
    from app.storage.engines import build_engine

    storage = get_storage(pool, "kafka")
    plain = build_engine(storage, pool, 3)
    over_tls = build_engine(storage, pool, 3, {"security.protocol": "ssl"})
    try:
        plain.check()
        with pytest.raises(StorageError):
            over_tls.check()
    finally:
        plain.close()
        over_tls.close()
