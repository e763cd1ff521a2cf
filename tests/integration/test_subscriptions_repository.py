"""The ``subscriptions`` table's rules, on the session's PostgreSQL."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import gevent
import psycopg2
import pytest

from app.domain.subscription import InitialCursor, Subscription
from app.repository import event_types as event_types_repository
from app.repository import subscriptions as repository

AUTHORIZATION = {"admins": [{"data_type": "user", "value": "alice"}],
                 "readers": [{"data_type": "user", "value": "bob"}]}


@pytest.fixture
def event_types(pool):
    """Names of bare event type rows (enough for subscriptions to refer to), removed
    afterwards with the subscriptions reading them."""
    names = [f"repo.test-{uuid.uuid4().hex[:10]}" for _ in range(3)]
    for name in names:
        pool.execute("INSERT INTO event_types (name, document) VALUES (%s, '{}')", (name,))
    yield names
    pool.execute("DELETE FROM subscriptions WHERE event_types && %s::text[]", (names,))
    pool.execute("DELETE FROM event_types WHERE name = ANY(%s)", (names,))


def subscription(event_types, owner: str = "app", group: str = "default",
                 **fields) -> Subscription:
    now = datetime.now(UTC)
    fields = {"read_from": "end", "created_at": now, "updated_at": now, **fields}
    return Subscription(id=str(uuid.uuid4()), owning_application=owner,
                        event_types=tuple(sorted(event_types)), consumer_group=group, **fields)


def test_the_key_takes_event_types_as_a_set(pool, event_types):
    first = subscription(event_types[:2], read_from="cursors",
                         initial_cursors=(InitialCursor(event_types[0], "0", "begin"),),
                         authorization=AUTHORIZATION)
    stored, created = repository.insert_subscription(pool, first)
    assert created and stored == first and stored.authorization == AUTHORIZATION
    again, created = repository.insert_subscription(
        pool, subscription(event_types[1::-1], read_from="begin"))
    assert not created and again == first
    assert repository.find_by_key(pool, "app", event_types[1::-1], "default") == first
    assert repository.find_by_key(pool, "app", event_types[:1], "default") is None
    other, created = repository.insert_subscription(pool, subscription(event_types[:2],
                                                                       group="other"))
    assert created and other.id != first.id


def test_key_digests_do_not_mix_up_the_parts():
    digest = repository.key_digest
    assert digest("a", ["x", "y"], "g") == digest("a", ["y", "x"], "g")
    assert digest("a", ["x,y"], "g") != digest("a", ["x", "y"], "g")
    assert digest("a,b", ["x"], "g") != digest("a", ["b,x"], "g")
    assert digest("a", ["x"], "g") != digest("g", ["x"], "a")


def test_concurrent_inserts_of_one_key_store_one(pool, event_types):
    attempts = [gevent.spawn(repository.insert_subscription, pool, subscription(event_types))
                for _ in range(10)]
    gevent.joinall(attempts, raise_error=True)
    results = [attempt.value for attempt in attempts]
    assert sorted(created for _, created in results) == [False] * 9 + [True]
    assert len({stored.id for stored, _ in results}) == 1
    assert pool.fetch_all("SELECT count(*) FROM subscriptions WHERE event_types = %s",
                          (sorted(event_types),)) == [(1,)]


def test_missing_event_types_are_named_and_nothing_is_stored(pool, event_types):
    wanted = subscription([event_types[0], "no.such"])
    with pytest.raises(repository.EventTypesMissing) as missing:
        repository.insert_subscription(pool, wanted)
    assert missing.value.names == ("no.such",)
    assert repository.get_subscription(pool, wanted.id) is None


def test_get_by_id(pool, event_types):
    stored, _ = repository.insert_subscription(pool, subscription(event_types[:1]))
    assert repository.get_subscription(pool, stored.id) == stored
    assert repository.get_subscription(pool, stored.id.upper()) == stored
    for malformed in ("x", "", stored.id + "0", "\x00", stored.id.replace("-", "")):
        assert repository.get_subscription(pool, malformed) is None


def test_listing_filters_and_tells_whether_more_follow(pool, event_types):
    a, b, c = event_types
    start = datetime.now(UTC)
    made = []
    for n, types in enumerate(([a], [a, b], [b, c], [a, b, c])):
        wanted = replace(subscription(types, owner="lister"),
                         created_at=start + timedelta(seconds=n))
        made.append(repository.insert_subscription(pool, wanted)[0].id)

    def ids(owner, types, offset=0, limit=10):
        page = repository.list_subscriptions(pool, owner, types, offset, limit)
        return [found.id for found in page.items], page.has_more

    assert ids("lister", []) == (made[::-1], False)
    assert ids("lister", [a, b]) == ([made[3], made[1]], False)
    assert ids(None, [b, c]) == ([made[3], made[2]], False)
    assert ids("nobody", [a]) == ([], False)
    assert ids("lister", [], 0, 3) == (made[:0:-1], True)
    assert ids("lister", [], 3, 3) == ([made[0]], False)


def test_authorization_updates_move_updated_at_only_on_change(pool, event_types):
    stored, _ = repository.insert_subscription(
        pool, subscription(event_types[:1], authorization=AUTHORIZATION))
    later = stored.updated_at + timedelta(seconds=5)
    same = repository.update_authorization(pool, stored.id, dict(AUTHORIZATION), later)
    assert same.updated_at == stored.updated_at
    changed = {**AUTHORIZATION, "readers": [{"data_type": "*", "value": "*"}]}
    updated = repository.update_authorization(pool, stored.id, changed, later)
    assert updated.authorization == changed and updated.updated_at == later
    assert updated.created_at == stored.created_at
    assert repository.update_authorization(pool, str(uuid.uuid4()), changed, later) is None


def test_delete(pool, event_types):
    stored, _ = repository.insert_subscription(pool, subscription(event_types[:1]))
    assert repository.delete_subscription(pool, stored.id)
    assert not repository.delete_subscription(pool, stored.id)
    assert repository.get_subscription(pool, stored.id) is None


def test_an_event_type_read_by_a_subscription_cannot_be_deleted(pool, event_types):
    stored, _ = repository.insert_subscription(pool, subscription(event_types[:2]))
    with pytest.raises(event_types_repository.EventTypeInUse, match=stored.id):
        event_types_repository.delete_event_type(pool, event_types[1], 0)
    assert pool.fetch_all("SELECT count(*) FROM event_types WHERE name = %s",
                          (event_types[1],)) == [(1,)]


def _waiting_for_a_lock(pool) -> bool:
    return pool.fetch_all("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                          " AND datname = current_database()")[0][0] > 0


def test_a_deletion_waits_for_a_create_in_progress_and_then_refuses(pool, settings,
                                                                    event_types):
    name = event_types[0]
    creating = psycopg2.connect(settings.database_url)
    try:
        with creating.cursor() as cursor:  # what a create holds until it commits
            cursor.execute("SELECT name FROM event_types WHERE name = ANY(%s) FOR KEY SHARE",
                           ([name],))
            cursor.execute(
                "INSERT INTO subscriptions (id, owning_application, event_types, consumer_group,"
                " read_from, key_digest) VALUES (%s, 'app', %s, 'default', 'end', %s)",
                (str(uuid.uuid4()), [name], repository.key_digest("app", [name], "default")))
        deletion = gevent.spawn(event_types_repository.delete_event_type, pool, name, 0)
        deadline = time.monotonic() + 10
        while not _waiting_for_a_lock(pool):
            assert time.monotonic() < deadline, "the deletion never waited for the lock"
            gevent.sleep(0.01)
        creating.commit()
    finally:
        creating.close()
    deletion.join(timeout=10)
    assert isinstance(deletion.exception, event_types_repository.EventTypeInUse)
