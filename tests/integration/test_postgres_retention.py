import uuid

import pytest

from app.domain.event_type import KEEP_FOREVER
from app.storage.engine import BEFORE_FIRST, PartitionBounds


def age_chunks(pool, topic: str, interval: str) -> None:
    """Make every event of the topic as old as ``interval`` (PostgreSQL's syntax)."""
    pool.execute(
        f"UPDATE log_chunks SET appended_at = now() - interval '{interval}'"
        " WHERE topic_id = (SELECT id FROM log_topics WHERE name = %s)", (topic,))


def test_purge_removes_only_events_older_than_retention(postgres_engine, pool):
    topic = f"retention-{uuid.uuid4().hex[:8]}"
    postgres_engine.create_topic(topic, partitions=2, retention_ms=60_000)
    try:
        postgres_engine.append(topic, 0, [b'{"old": %d}' % n for n in range(25)])
        postgres_engine.append(topic, 0, [b'{"new": %d}' % n for n in range(5)])
        postgres_engine.append(topic, 1, [b'{"new": 1}'])
        # Age the first 25 events of partition 0 past the retention time.
        pool.execute(
            "UPDATE log_chunks SET appended_at = now() - interval '2 minutes'"
            " WHERE topic_id = (SELECT id FROM log_topics WHERE name = %s)"
            " AND partition = 0 AND last_offset < 25", (topic,))
        removed = postgres_engine.purge_expired()  # logged: a count, not a Decimal
        assert isinstance(removed, int) and removed >= 25
        assert postgres_engine.bounds(topic) == [
            PartitionBounds(0, 25, 29), PartitionBounds(1, 0, 0)]
        assert postgres_engine.read(topic, 0, BEFORE_FIRST, 100)[0].offset == 25
        # Appends continue after the purged offsets.
        assert postgres_engine.append(topic, 0, [b"{}"]) == [30]
    finally:
        postgres_engine.delete_topic(topic)


@pytest.mark.parametrize(("retention_ms", "age", "bounds"), [
    # Fully expired: empty bounds after its last offset.
    (60_000, "2 minutes", PartitionBounds(0, 3, 2)),
    # A compacted event type's topic: its keys' latest events must stay (they went
    # after the retention time, as any event).
    (KEEP_FOREVER, "400 days", PartitionBounds(0, 0, 2)),
])
def test_what_a_purge_leaves_of_a_partition_of_old_events(postgres_engine, pool, retention_ms,
                                                          age, bounds):
    topic = f"retention-{uuid.uuid4().hex[:8]}"
    postgres_engine.create_topic(topic, partitions=1, retention_ms=retention_ms)
    try:
        postgres_engine.append(topic, 0, [b"{}"] * 3)
        age_chunks(pool, topic, age)
        postgres_engine.purge_expired()
        assert postgres_engine.bounds(topic) == [bounds]
    finally:
        postgres_engine.delete_topic(topic)


def test_purge_runs_in_one_process_at_a_time(settings, postgres_engine, pool):
    from app.services import Services
    from workers.retention import LOCK_KEY, purge_once

    topic = f"retention-{uuid.uuid4().hex[:8]}"
    postgres_engine.create_topic(topic, partitions=1, retention_ms=60_000)
    services = Services(settings)
    try:
        postgres_engine.append(topic, 0, [b"{}"] * 2)
        age_chunks(pool, topic, "2 minutes")
        with pool.connection() as holder, holder.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
            assert purge_once(services) == 0, "another process holds the lock"
            cursor.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
            holder.commit()
        assert purge_once(services) >= 2
        assert postgres_engine.bounds(topic) == [PartitionBounds(0, 2, 1)]
    finally:
        services.close()
        postgres_engine.delete_topic(topic)
