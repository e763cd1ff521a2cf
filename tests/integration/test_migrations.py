import uuid

import psycopg2
import pytest

from sql.migrate import UnsuitableDatabase, available_migrations, migrate


def test_migrations_are_recorded_and_applying_again_changes_nothing(settings):
    conn = psycopg2.connect(settings.database_url)
    try:
        assert migrate(conn) == []
        with conn.cursor() as cursor:
            cursor.execute("SELECT version, name FROM schema_migrations ORDER BY version")
            recorded = cursor.fetchall()
        assert recorded == [(version, name) for version, name, _ in available_migrations()]
    finally:
        conn.close()


def test_a_database_that_cannot_store_every_character_is_refused(settings):
    name = f"latin1_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(settings.database_url)
    admin.autocommit = True
    try:
        with admin.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {name} ENCODING 'LATIN1' TEMPLATE template0"
                           " LC_COLLATE 'C' LC_CTYPE 'C'")
        conn = psycopg2.connect(settings.database_url.rsplit("/", 1)[0] + "/" + name)
        try:
            with pytest.raises(UnsuitableDatabase, match="encoding is LATIN1; events need UTF8"):
                migrate(conn)
            with conn.cursor() as cursor:
                cursor.execute("SELECT to_regclass('schema_migrations')")
                assert cursor.fetchone() == (None,)
        finally:
            conn.close()
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.close()
