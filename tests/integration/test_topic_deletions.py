"""Removing the topics of deleted event types, including those a worker left behind."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from app.services import Services
from tests.conftest import topic_listed
from workers.topic_deletions import delete_due_topics


@pytest.fixture
def services(settings) -> Iterator[Services]:
    built = Services(settings)
    yield built
    built.close()


def pending(pool, engine, due_in_s: float) -> str:
    """A topic of the engine with its removal recorded, due in ``due_in_s`` seconds.
    (The local stack names each storage after its type.)"""
    topic = f"deleting-{uuid.uuid4().hex[:12]}"
    engine.create_topic(topic, partitions=1, retention_ms=60_000)
    pool.execute(
        "INSERT INTO topic_deletions (storage_id, topic, due_at)"
        " VALUES (%s, %s, now() + make_interval(secs => %s))",
        (engine.storage_type, topic, due_in_s))
    return topic


def pending_rows(pool, topic: str) -> int:
    return pool.fetch_all("SELECT count(*) FROM topic_deletions WHERE topic = %s", (topic,))[0][0]


def test_due_topics_are_removed_and_later_ones_wait(pool, engine, services):
    due = pending(pool, engine, -1)
    later = pending(pool, engine, 3600)
    try:
        delete_due_topics(services)
        assert not topic_listed(pool, engine.storage_type, due)
        assert pending_rows(pool, due) == 0
        assert topic_listed(pool, engine.storage_type, later)
        assert pending_rows(pool, later) == 1
    finally:
        pool.execute("DELETE FROM topic_deletions WHERE topic = %s", (later,))
        engine.delete_topic(later)


def test_a_removal_another_process_holds_is_left_to_it(pool, engine, services):
    topic = pending(pool, engine, -1)
    with pool.transaction() as other_process:
        other_process.execute(
            "SELECT 1 FROM topic_deletions WHERE topic = %s FOR UPDATE", (topic,))
        delete_due_topics(services)
        assert topic_listed(pool, engine.storage_type, topic)
    delete_due_topics(services)
    assert not topic_listed(pool, engine.storage_type, topic)
    assert pending_rows(pool, topic) == 0


# The failure is injected with a PostgreSQL trigger, so this runs on that engine only.
def test_a_failed_removal_stays_pending_for_the_next_sweep(pool, postgres_engine, services):
    topic = pending(pool, postgres_engine, -1)
    pool.execute(
        "CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'disk on fire'; END $$;"
        "CREATE TRIGGER refuse_delete BEFORE DELETE ON log_topics FOR EACH ROW"
        " WHEN (OLD.name = %s) EXECUTE FUNCTION refuse_delete()", (topic,))
    try:
        delete_due_topics(services)
        assert topic_listed(pool, "postgres", topic)
        assert pending_rows(pool, topic) == 1
    finally:
        pool.execute("DROP TRIGGER refuse_delete ON log_topics; DROP FUNCTION refuse_delete()")
    delete_due_topics(services)
    assert not topic_listed(pool, "postgres", topic)
    assert pending_rows(pool, topic) == 0
