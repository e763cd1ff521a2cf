import contextlib
import uuid
from dataclasses import replace

import gevent
import psycopg2
import pytest

from app.dependencies import DependencyUnavailable
from app.domain.event_type import EventType, EventTypeSchema
from app.repository import event_types as repository
from app.repository.database import ConnectionPool
from app.repository.event_type_cache import EventTypeCache
from app.repository.event_types import CHANGES_CHANNEL
from app.repository.notified_cache import NotifiedCache
from tests.helpers.waiting import wait_until


@pytest.fixture
def stored(pool):
    name = f"cache.test-{uuid.uuid4().hex[:8]}"
    event_type = EventType(name, "app", "undefined", EventTypeSchema("json_schema", "{}"))
    repository.insert_event_type(pool, event_type, "postgres", f"topic-{name}", 2)
    yield event_type
    with contextlib.suppress(repository.EventTypeChanged):  # the test deleted it
        repository.delete_event_type(pool, name, 0)


def test_cache_serves_event_type_with_timeline_and_follows_changes(pool, stored):
    cache = EventTypeCache(pool)
    other_worker = EventTypeCache(pool)
    try:
        event_type, timelines = cache.get(stored.name)
        other_worker.get(stored.name)
        assert event_type == stored
        timeline = timelines.active
        assert (timeline.order, timeline.storage_id, timeline.partitions) == (1, "postgres", 2)
        assert cache.get(stored.name)[0] is event_type, "second read comes from memory"

        changed = replace(stored, schema=replace(stored.schema, version="1.1.0"))
        repository.update_event_type(pool, changed, new_schema_version=True,
                                     evolved_from=stored)
        for worker in (cache, other_worker):
            wait_until(lambda w=worker: w.get(stored.name)[0].schema.version == "1.1.0")

        repository.delete_event_type(pool, stored.name, 0)
        wait_until(lambda: cache.get(stored.name) is None)
        assert cache.get("no-such-event-type") is None
    finally:
        cache.close()
        other_worker.close()


def test_greenlets_missing_the_same_event_type_at_once_share_one_read(pool, stored):
    reads: list[str] = []

    def counted(pool_, name):
        reads.append(name)
        return repository.event_type_with_timelines(pool_, name)

    cache = NotifiedCache(pool, CHANGES_CHANNEL, counted)
    try:
        askers = [gevent.spawn(cache.get, stored.name) for _ in range(50)]
        gevent.joinall(askers, raise_error=True)
        assert {asker.value[0] for asker in askers} == {stored}
        assert reads == [stored.name]
        assert cache.get(stored.name)[0] == stored
        assert reads == [stored.name], "kept once read"
    finally:
        cache.close()


def test_a_change_made_from_what_is_no_longer_stored_is_refused(pool, stored):
    first = replace(stored, owning_application="first")
    repository.update_event_type(pool, first, new_schema_version=False, evolved_from=stored)
    with pytest.raises(repository.EventTypeChanged) as changed:
        repository.update_event_type(pool, replace(stored, owning_application="second"),
                                     new_schema_version=False, evolved_from=stored)
    assert changed.value.current == first
    assert repository.get_event_type(pool, stored.name) == first

    repository.delete_event_type(pool, stored.name, 0)
    with pytest.raises(repository.EventTypeChanged) as deleted:
        repository.update_event_type(pool, replace(first, owning_application="third"),
                                     new_schema_version=False, evolved_from=first)
    assert deleted.value.current is None
    assert repository.get_event_type(pool, stored.name) is None


def test_what_was_kept_serves_while_the_database_cannot_be_read(pool, stored):
    """A PostgreSQL outage loses the listening connection: the entries kept until then
    still serve while reads fail (a kafka event type's publishing and streams do not
    need PostgreSQL), and what was never kept is a DependencyUnavailable."""
    own = ConnectionPool(pool.dsn, 2, pool.timeout_s)  # a worker's own connections
    outage = {"on": False}
    reads: list[str] = []

    def load(pool_, name):
        reads.append(name)
        if outage["on"]:
            raise psycopg2.OperationalError("server closed the connection unexpectedly")
        return repository.event_type_with_timelines(pool_, name)

    others = listening_backends(pool)
    cache = NotifiedCache(own, CHANGES_CHANNEL, load)
    try:
        assert cache.get(stored.name)[0] == stored
        for backend in listening_backends(pool) - others:
            pool.execute("SELECT pg_terminate_backend(%s)", (backend,))
        outage["on"] = True
        wait_until(lambda: cache.get(stored.name) is not None and reads.count(stored.name) > 1)
        assert cache.get(stored.name)[0] == stored
        with pytest.raises(DependencyUnavailable, match="PostgreSQL"):
            cache.get("never.kept")

        outage["on"] = False
        # Listening again (one connection for every channel of the pool's process).
        again = own.notifications.listener(CHANGES_CHANNEL, lambda _: None, lambda: None)
        wait_until(again.ensure_listening, timeout=15, what="listening again")
        again.close()
        changed = replace(stored, owning_application="changed")
        repository.update_event_type(pool, changed, new_schema_version=False,
                                     evolved_from=stored)
        wait_until(lambda: cache.get(stored.name)[0] == changed, timeout=15)
        outage["on"] = True
        repository.update_event_type(pool, stored, new_schema_version=False,
                                     evolved_from=changed)
        # The NOTIFY of a change drops the entry, and with it what could stand in for it.
        wait_until(lambda: raises_unavailable(cache, stored.name), timeout=15)
    finally:
        cache.close()
        own.close()


def raises_unavailable(cache: NotifiedCache, name: str) -> bool:
    try:
        cache.get(name)
    except DependencyUnavailable:
        return True
    return False


def listening_backends(pool: ConnectionPool) -> set[int]:
    return {pid for (pid,) in pool.fetch_all(
        "SELECT pid FROM pg_stat_activity WHERE query LIKE %s", (f"LISTEN {CHANGES_CHANNEL}%",))}
