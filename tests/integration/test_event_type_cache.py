import contextlib
import uuid
from dataclasses import replace

import gevent
import pytest

from app.domain.event_type import EventType, EventTypeSchema
from app.repository import event_types as repository
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
