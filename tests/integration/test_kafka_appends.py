"""Appends to Kafka whose producer is replaced while they run."""

from __future__ import annotations

import time

import gevent
import pytest

from app.storage.engine import StorageUnavailable
from app.storage.kafka.producer import PRODUCE_SLICE


def test_an_append_whose_producer_was_retired_while_it_yielded_is_an_outage(
        kafka_engine, kafka_topic):
    """Once every broker is reported down, the producer is retired at once, also under
    an append that yielded between slices of a large batch; its poll thread closes it,
    and the append's next produce raised RuntimeError (a 500)."""
    kafka, topic = kafka_engine, kafka_topic
    kafka.append_many(topic, {0: [b"{}"]})  # the producer is running
    running = kafka._appender._running
    assert running is not None

    def retire_and_wait_until_closed() -> None:
        kafka._appender.retire()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # blocking: the append must not go on meanwhile
            try:
                running.producer.flush(0)
            except RuntimeError:  # "Producer has been closed"
                return
            time.sleep(0.01)
        raise AssertionError("the retired producer was not closed")

    gevent.spawn(retire_and_wait_until_closed)  # runs at the append's first yield
    with pytest.raises(StorageUnavailable, match="replaced during the append"):
        kafka.append_many(topic, {0: [b"{}"] * (2 * PRODUCE_SLICE)})
    # The next append starts a new producer.
    assert isinstance(kafka.append_many(topic, {0: [b"{}"]})[0], list)
