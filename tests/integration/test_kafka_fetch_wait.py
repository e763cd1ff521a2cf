"""An idle kafka stream reader asks the broker for new events as often as the stream
fetch wait lets it: the setting is what thousands of idle streams cost the brokers."""

from __future__ import annotations

import json
import threading
import uuid
from collections import defaultdict

from app.repository.storages import get_storage
from app.storage.kafka import KafkaEngine


def idle_fetches_per_second(pool, wait_ms: int) -> float:
    """Fetch requests per second of the busiest consumer of an engine whose stream
    readers wait ``wait_ms``, with one idle reader open for ~3 s (librdkafka's stats)."""
    fetches: dict[str, list[int]] = defaultdict(list)
    lock = threading.Lock()

    def stats(document: str) -> None:
        report = json.loads(document)
        if report["type"] == "consumer":
            with lock:
                fetches[report["name"]].append(
                    sum(broker["req"].get("Fetch", 0) for broker in report["brokers"].values()))

    servers = get_storage(pool, "kafka").configuration["bootstrap_servers"]
    engine = KafkaEngine(servers, {"statistics.interval.ms": 500, "stats_cb": stats},
                         stream_fetch_wait_ms=wait_ms)
    topic = f"test-{uuid.uuid4().hex[:12]}"
    engine.create_topic(topic, partitions=1, retention_ms=3_600_000)
    try:
        reader = engine.reader(topic, {0: -1})
        try:
            assert reader.poll(10, timeout=3.2) == []
        finally:
            reader.close()
    finally:
        engine.delete_topic(topic)
        engine.close()
    with lock:
        # The reader's consumer reported the longest; counts are cumulative per 0.5 s.
        counts = max(fetches.values(), key=len)
    assert len(counts) >= 4, counts
    return (counts[-1] - counts[1]) / ((len(counts) - 2) * 0.5)


def test_an_idle_reader_fetches_as_often_as_the_fetch_wait_lets_it(pool):
    short, long = idle_fetches_per_second(pool, 20), idle_fetches_per_second(pool, 250)
    assert long <= 6  # at most 4 held fetches a second, and a little slack
    assert short >= 3 * long  # ~47 a second on an idle machine
