"""The security settings in PostgreSQL and the per-process cache that follows them."""

from __future__ import annotations

import pytest

from app.domain.event_type import AuthorizationAttribute as A
from app.domain.security import AdminAuthorization, BlacklistType, Feature, SecuritySettings
from app.repository import security_settings as repository
from app.security.settings_cache import SecuritySettingsCache
from tests.helpers.waiting import wait_until


@pytest.fixture
def clean(pool):
    yield
    with pool.transaction() as cursor:
        for table in ("nakadi_admins", "blacklist", "feature_toggles"):
            cursor.execute(f"DELETE FROM {table}")
        cursor.execute(repository.NOTIFY_CHANGE)


def test_nothing_stored_means_configured_admins_no_blacklist_no_features(pool, clean):
    assert repository.load_settings(pool) == SecuritySettings()


def test_settings_are_stored_and_read_back(pool, clean):
    admins = AdminAuthorization((A("user", "a"),), (A("user", "a"), A("*", "*")),
                                (A("service", "s"),))
    repository.replace_admins(pool, admins)
    repository.block(pool, BlacklistType.PRODUCER_APP, "spammer")
    repository.block(pool, BlacklistType.PRODUCER_APP, "spammer")
    repository.set_feature(pool, Feature.DISABLE_EVENT_TYPE_CREATION, True)
    repository.set_feature(pool, Feature.DISABLE_EVENT_TYPE_DELETION, False)
    stored = repository.load_settings(pool)
    assert stored.admins is not None
    assert set(stored.admins.readers) == {A("user", "a"), A("*", "*")}
    assert stored.admins.writers == (A("service", "s"),)
    assert stored.blacklist == {(BlacklistType.PRODUCER_APP, "spammer")}
    assert stored.enabled_features == {Feature.DISABLE_EVENT_TYPE_CREATION}
    repository.unblock(pool, BlacklistType.PRODUCER_APP, "spammer")
    assert repository.load_settings(pool).blacklist == frozenset()


def test_every_process_follows_a_change_made_anywhere(pool, clean):
    caches = [SecuritySettingsCache(pool), SecuritySettingsCache(pool)]
    try:
        for cache in caches:
            assert not cache.current().is_blocked(BlacklistType.CONSUMER_ET, "orders")
        repository.block(pool, BlacklistType.CONSUMER_ET, "orders")
        for cache in caches:
            wait_until(lambda c=cache: c.current().is_blocked(BlacklistType.CONSUMER_ET,
                                                              "orders"),
                       timeout=5, what="the cache hears the change")
    finally:
        for cache in caches:
            cache.close()
