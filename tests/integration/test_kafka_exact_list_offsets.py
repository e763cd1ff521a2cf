"""Bounds from ListOffsets alone, for brokers that report the log end there
(``NAKADI_KAFKA_EXACT_LIST_OFFSETS``). Tansu does so while each record batch
holds one record, which is how these appends are sent."""

from __future__ import annotations

import uuid

from app.repository.storages import get_storage
from app.storage.engines import Engines
from app.storage.kafka import KafkaEngine


def test_bounds_ask_list_offsets_alone_and_agree_with_the_fetched_ends(pool):
    exact = Engines(pool, kafka_exact_list_offsets=True).get("kafka")
    fetching = KafkaEngine(get_storage(pool, "kafka").configuration["bootstrap_servers"])
    consumers = []
    make_consumer = exact._clients.consumer  # type: ignore[attr-defined]
    exact._clients.consumer = lambda *args: consumers.append(args) or make_consumer(*args)
    topic = f"test-{uuid.uuid4().hex[:12]}"
    fetching.create_topic(topic, partitions=3, retention_ms=3_600_000)
    try:
        assert [(b.oldest, b.newest) for b in exact.bounds(topic)] == [(0, -1)] * 3
        for n in range(3):
            fetching.append(topic, 0, [b'{"n": %d}' % n])
        fetching.append(topic, 2, [b'{"n": 0}'])
        expected = [(0, 2), (0, -1), (0, 0)]
        assert [(b.oldest, b.newest) for b in fetching.bounds(topic)] == expected
        assert [(b.oldest, b.newest) for b in exact.bounds(topic)] == expected
        assert consumers == []
    finally:
        fetching.delete_topic(topic)
        exact.close()
        fetching.close()
