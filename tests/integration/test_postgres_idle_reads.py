"""An idle stream on the postgres storage costs no query per poll: once a read found
nothing, the reader reads again only after an append to its topic was notified (or
notifications may have been missed). With 1,000 idle streams each reading twice a
second, the queries had held publishing to a few events/s and delayed keep-alives
by seconds (bench_soak)."""

from __future__ import annotations

import uuid

from app.storage.postgres import PostgresEngine


def test_an_idle_reader_reads_again_only_after_an_append_is_notified(postgres_engine):
    engine: PostgresEngine = postgres_engine
    topic = f"test-{uuid.uuid4().hex[:12]}"
    engine.create_topic(topic, partitions=2, retention_ms=3_600_000)
    reads = []
    read_many = engine._read_many

    def counted(*args, **kwargs):
        reads.append(args)
        return read_many(*args, **kwargs)

    engine._read_many = counted  # type: ignore[method-assign]
    try:
        reader = engine.reader(topic, {0: -1, 1: -1})
        assert reader.poll(10, 0.2) == []
        after_first = len(reads)
        for _ in range(5):
            assert reader.poll(10, 0.1) == []
        assert len(reads) == after_first, "an idle reader kept querying"

        engine.append_many(topic, {1: [b'{"n": 1}']})
        events = reader.poll(10, 2.0)
        assert [(event.partition, event.offset) for event in events] == [(1, 0)]
        assert len(reads) > after_first

        engine._watch._wake_all()  # notifications may have been missed: look again
        before = len(reads)
        assert reader.poll(10, 0.1) == []
        assert len(reads) > before
        reader.close()
    finally:
        engine._read_many = read_many  # type: ignore[method-assign]
        engine.delete_topic(topic)
