"""The ``nakadi_admins``, ``blacklist`` and ``feature_toggles`` tables. Every change
sends a NOTIFY on ``CHANGES_CHANNEL`` in its own transaction."""

from __future__ import annotations

import psycopg2.extensions

from app.domain.event_type import AuthorizationAttribute
from app.domain.security import (
    AdminAuthorization,
    AdminPermission,
    BlacklistType,
    Feature,
    SecuritySettings,
)
from app.repository.database import ConnectionPool

CHANGES_CHANNEL = "nakadi_security_settings"
NOTIFY_CHANGE = "SELECT pg_notify('nakadi_security_settings', '')"


def load_settings(pool: ConnectionPool) -> SecuritySettings:
    """All three settings, read in one transaction."""
    with pool.transaction() as cursor:
        cursor.execute("SELECT permission, data_type, value FROM nakadi_admins"
                       " ORDER BY permission, data_type, value")
        admin_rows = cursor.fetchall()
        cursor.execute("SELECT type, name FROM blacklist")
        blacklist = frozenset((BlacklistType(kind), name) for kind, name in cursor.fetchall())
        cursor.execute("SELECT feature FROM feature_toggles WHERE enabled")
        known = {feature.value: feature for feature in Feature}
        enabled = frozenset(known[row[0]] for row in cursor.fetchall() if row[0] in known)
    admins = None
    if admin_rows:
        lists: dict[str, list[AuthorizationAttribute]] = {p.value: [] for p in AdminPermission}
        for permission, data_type, value in admin_rows:
            lists[permission].append(AuthorizationAttribute(data_type, value))
        admins = AdminAuthorization(**{name: tuple(items) for name, items in lists.items()})
    return SecuritySettings(admins, blacklist, enabled)


def replace_admins(pool: ConnectionPool, admins: AdminAuthorization) -> None:
    with pool.transaction() as cursor:
        cursor.execute("LOCK TABLE nakadi_admins IN EXCLUSIVE MODE")
        cursor.execute("DELETE FROM nakadi_admins")
        for permission in AdminPermission:
            for attribute in set(admins.attributes(permission)):
                cursor.execute(
                    "INSERT INTO nakadi_admins (permission, data_type, value)"
                    " VALUES (%s, %s, %s)",
                    (permission.value, attribute.data_type, attribute.value))
        cursor.execute(NOTIFY_CHANGE)


def _changed(cursor: psycopg2.extensions.cursor) -> None:
    if cursor.rowcount:
        cursor.execute(NOTIFY_CHANGE)


def block(pool: ConnectionPool, kind: BlacklistType, name: str) -> None:
    with pool.transaction() as cursor:
        cursor.execute("INSERT INTO blacklist (type, name) VALUES (%s, %s)"
                       " ON CONFLICT DO NOTHING", (kind.value, name))
        _changed(cursor)


def unblock(pool: ConnectionPool, kind: BlacklistType, name: str) -> None:
    with pool.transaction() as cursor:
        cursor.execute("DELETE FROM blacklist WHERE type = %s AND name = %s",
                       (kind.value, name))
        _changed(cursor)


def set_feature(pool: ConnectionPool, feature: Feature, enabled: bool) -> None:
    with pool.transaction() as cursor:
        cursor.execute(
            "INSERT INTO feature_toggles (feature, enabled) VALUES (%s, %s)"
            " ON CONFLICT (feature) DO UPDATE SET enabled = excluded.enabled, updated_at = now()"
            " WHERE feature_toggles.enabled IS DISTINCT FROM excluded.enabled",
            (feature.value, enabled))
        _changed(cursor)
