"""Idle kafka stream readers hold no consumer (~600 KB and four threads each) and
still deliver every event once, in order, soon after it is appended."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Iterator

import gevent
import pytest
from confluent_kafka import KafkaError, KafkaException

from app.repository.storages import get_storage
from app.storage.engine import (
    BEFORE_FIRST,
    StorageError,
    StorageUnavailable,
    TopicNotFound,
    stored_events,
)
from app.storage.kafka import KafkaEngine
from app.storage.kafka.reader import KafkaStreamReader
from tests.helpers.waiting import wait_until

IDLE_AFTER_S = 0.5


@pytest.fixture
def kafka(pool) -> Iterator[KafkaEngine]:
    """An engine whose readers go idle after half a second without events."""
    built = KafkaEngine(get_storage(pool, "kafka").configuration["bootstrap_servers"],
                        idle_reader_s=IDLE_AFTER_S)
    yield built
    built.close()


@pytest.fixture
def topic(kafka: KafkaEngine) -> Iterator[str]:
    name = f"test-{uuid.uuid4().hex[:12]}"
    kafka.create_topic(name, partitions=3, retention_ms=3_600_000)
    yield name
    kafka.delete_topic(name)


def from_the_ends(kafka: KafkaEngine, topic: str) -> KafkaStreamReader:
    return kafka.reader(topic, {b.partition: b.newest for b in kafka.bounds(topic)})


def poll_until(reader: KafkaStreamReader, count: int, timeout: float = 5.0
               ) -> list[tuple[int, int, bytes]]:
    """(partition, offset, payload) of the next ``count`` events."""
    taken: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + timeout
    while len(taken) < count and time.monotonic() < deadline:
        taken += [tuple(event) for event in stored_events(reader.poll(count, 0.2))]
    return taken


def test_a_reader_from_the_ends_bounds_found_starts_without_a_consumer(kafka, topic):
    kafka.append(topic, 1, [b"old-1", b"old-2"])
    reader = from_the_ends(kafka, topic)
    try:
        assert reader.idle
        assert reader.poll(10, 0.3) == []
        appended = time.monotonic()
        kafka.append(topic, 1, [b"new-1", b"new-2"])
        kafka.append(topic, 2, [b"new-3"])
        assert sorted(poll_until(reader, 3)) == [
            (1, 2, b"new-1"), (1, 3, b"new-2"), (2, 0, b"new-3")]
        assert time.monotonic() - appended < 1.0
        assert not reader.idle
    finally:
        reader.close()


def test_a_reader_with_events_to_read_keeps_its_consumer(kafka, topic):
    kafka.append(topic, 0, [b"a", b"b"])
    kafka.bounds(topic)
    reader = kafka.reader(topic, {0: BEFORE_FIRST, 1: BEFORE_FIRST})
    try:
        assert not reader.idle
        assert poll_until(reader, 2) == [(0, 0, b"a"), (0, 1, b"b")]
    finally:
        reader.close()


def test_an_idle_reader_gives_its_consumer_up_and_misses_nothing(kafka, topic):
    """Rounds of: events appended, read, the reader idle, more appended. Every event
    comes once and in order, also those appended right as the reader goes idle."""
    reader = kafka.reader(topic, {0: BEFORE_FIRST, 1: BEFORE_FIRST, 2: BEFORE_FIRST})
    sent: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    got: list[tuple[int, int, bytes]] = []
    try:
        for round_ in range(4):
            partition = round_ % 3
            batch = [f"{round_}-{n}".encode() for n in range(3)]
            kafka.append(topic, partition, batch)
            sent[partition] += batch
            got += poll_until(reader, 3)
            assert not reader.idle
            went_idle = time.monotonic()
            while not reader.idle and time.monotonic() - went_idle < 5:
                got += [tuple(e) for e in stored_events(reader.poll(10, 0.1))]
            assert reader.idle
            assert time.monotonic() - went_idle < IDLE_AFTER_S + 1.5
        # Appended while the reader polls and goes idle: none lost.
        poller = gevent.spawn(poll_until, reader, 20, 8.0)
        for n in range(20):
            kafka.append(topic, 2, [f"late-{n}".encode()])
            sent[2].append(f"late-{n}".encode())
            gevent.sleep(0.05 * (n % 4))
        got += poller.get()
    finally:
        reader.close()
    for partition, payloads in sent.items():
        mine = [(offset, payload) for p, offset, payload in got if p == partition]
        assert mine == list(enumerate(payloads))


def test_closing_an_idle_reader_ends_its_waiting_poll(kafka, topic):
    reader = from_the_ends(kafka, topic)
    poll = gevent.spawn(reader.poll, 10, 10.0)
    gevent.sleep(0.3)
    started = time.monotonic()
    reader.close()
    with pytest.raises(StorageError, match="closed"):
        poll.get(timeout=2)
    assert time.monotonic() - started < 1.0


def test_an_idle_reader_s_poll_ends_once_the_brokers_are_reported_down(kafka, topic,
                                                                      monkeypatch):
    """Woken by the report, not by a timer of its own: it looked every 0.5 s before."""
    reader = from_the_ends(kafka, topic)
    poll = gevent.spawn(reader.poll, 10, 10.0)
    gevent.sleep(0.6)
    assert reader.idle and not poll.ready()

    def unanswered(timeout: float) -> None:
        raise StorageUnavailable("Kafka", "no broker answers")
    monkeypatch.setattr(kafka._topics, "check", unanswered)
    reported = time.monotonic()
    # From a native thread, as librdkafka reports it.
    kafka._threads.spawn(kafka._client_error, KafkaError(KafkaError._ALL_BROKERS_DOWN))
    with pytest.raises(StorageUnavailable, match="All broker connections are down"):
        poll.get(timeout=2)
    assert time.monotonic() - reported < 0.2
    reader.close()
    monkeypatch.undo()  # the brokers answer again, so the topic can be deleted
    wait_until(lambda: not kafka._availability.down, 5, what="the brokers answering")


def test_deleting_the_topic_of_an_idle_reader_ends_its_poll(kafka):
    name = f"test-{uuid.uuid4().hex[:12]}"
    kafka.create_topic(name, partitions=1, retention_ms=3_600_000)
    reader = from_the_ends(kafka, name)
    poll = gevent.spawn(reader.poll, 10, 10.0)
    gevent.sleep(0.3)
    kafka.delete_topic(name)
    with pytest.raises(TopicNotFound):
        poll.get(timeout=2)


def test_closing_the_engine_closes_its_idle_readers(pool, kafka, topic):
    engine = KafkaEngine(get_storage(pool, "kafka").configuration["bootstrap_servers"])
    try:
        reader = from_the_ends(engine, topic)
        poll = gevent.spawn(reader.poll, 10, 10.0)
        gevent.sleep(0.3)
    finally:
        engine.close()
    with pytest.raises(StorageError, match="closed"):
        poll.get(timeout=2)


def before_each_round(kafka: KafkaEngine, monkeypatch: pytest.MonkeyPatch,
                      before: Callable[[int], None]) -> list[float]:
    """Has ``before(n)`` run ahead of the idle watch's n-th round (from 1), in its pool
    thread; returns the list the rounds' start times go to."""
    topics = kafka._topics
    answer = topics.latest_offsets
    rounds: list[float] = []

    def answer_after(partitions, timeout):
        rounds.append(time.monotonic())
        before(len(rounds))
        return answer(partitions, timeout)

    monkeypatch.setattr(topics, "latest_offsets", answer_after)
    return rounds


def busy(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU."""
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


def test_the_watch_asks_less_often_when_its_rounds_cost_much(kafka, topic, monkeypatch):
    """A round over thousands of partitions costs the worker ~40 ms of CPU: the watch
    keeps its share of the worker's time small by spacing such rounds out."""
    rounds = before_each_round(kafka, monkeypatch,
                               lambda _: busy(0.05))  # as much as ~2,000 partitions cost
    reader = from_the_ends(kafka, topic)
    try:
        assert reader.poll(10, 2.5) == []
        kafka.append(topic, 0, [b"late"])
        assert poll_until(reader, 1, timeout=3.0) == [(0, 0, b"late")]
    finally:
        reader.close()
    gaps = [later - earlier for earlier, later in itertools.pairwise(rounds)]
    assert 2 <= len(rounds) <= 6, rounds
    assert min(gaps) >= 0.9, gaps


def test_a_round_that_waited_for_a_frozen_broker_does_not_put_the_next_off(
        kafka, topic, monkeypatch):
    """Waiting costs the worker nothing. Spaced by wall time, a round that waited out
    a broker frozen for 5 s put the next off by 95 s: every idle stream of the worker
    then kept sending keep-alives from old positions long after the broker was back."""
    def frozen_first(round_number: int) -> None:
        if round_number == 1:
            time.sleep(1.0)  # a broker that does not answer (the request times out)
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))

    before_each_round(kafka, monkeypatch, frozen_first)
    reader = from_the_ends(kafka, topic)
    try:
        assert reader.poll(10, 1.2) == []
        kafka.append(topic, 0, [b"after"])
        appended = time.monotonic()
        assert poll_until(reader, 1, timeout=3.0) == [(0, 0, b"after")]
        assert time.monotonic() - appended < 1.0
    finally:
        reader.close()


def test_a_consumer_opened_for_an_interrupted_poll_is_closed_with_the_reader(kafka, topic,
                                                                           monkeypatch):
    """A stream killed while its reader wakes up (the client went away) must not leave
    a consumer fetching in the background: ~600 KB and four threads, for good."""
    started, opened = [], []
    open_consumer = kafka._open_consumer

    def slow_open(name, following):
        started.append(name)
        time.sleep(0.3)
        consumer = open_consumer(name, following)
        opened.append(consumer)
        return consumer

    monkeypatch.setattr(kafka, "_open_consumer", slow_open)
    reader = from_the_ends(kafka, topic)
    kafka.append(topic, 0, [b"wakes it"])
    poll = gevent.spawn(reader.poll, 10, 5.0)
    with gevent.Timeout(3):
        while not started:  # the watch woke it: its consumer is being opened
            gevent.sleep(0.01)
    poll.kill()
    reader.close()
    assert len(opened) == 1
    with pytest.raises(RuntimeError, match="closed"):
        opened[0].consume(1, 0)
