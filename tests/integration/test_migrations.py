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


@pytest.fixture
def new_database(settings):
    """Makes databases (``CREATE DATABASE`` options after the name) and returns their
    URLs; drops them afterwards."""
    admin = psycopg2.connect(settings.database_url)
    admin.autocommit = True
    names: list[str] = []

    def create(options: str) -> str:
        names.append(f"test_{uuid.uuid4().hex[:8]}")
        with admin.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE {names[-1]} {options}")
        return settings.database_url.rsplit("/", 1)[0] + "/" + names[-1]

    try:
        yield create
    finally:
        with admin.cursor() as cursor:
            for name in names:
                cursor.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.close()


def database_before(new_database, monkeypatch, version: int
                    ) -> tuple[str, psycopg2.extensions.connection]:
    """A new database with the migrations before ``version`` applied, as one made
    before that migration existed: its URL and a connection for the test to close.
    ``migrate`` on it applies the rest."""
    database_url = new_database("ENCODING 'UTF8' TEMPLATE template0")
    conn = psycopg2.connect(database_url)
    before = [m for m in available_migrations() if m[0] < version]
    monkeypatch.setattr("sql.migrate.available_migrations", lambda: before)
    try:
        migrate(conn)
    except BaseException:
        conn.close()
        raise
    finally:
        monkeypatch.undo()
    return database_url, conn


def test_a_database_that_cannot_store_every_character_is_refused(new_database):
    conn = psycopg2.connect(new_database(
        "ENCODING 'LATIN1' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"))
    try:
        with pytest.raises(UnsuitableDatabase, match="encoding is LATIN1; events need UTF8"):
            migrate(conn)
        with conn.cursor() as cursor:
            cursor.execute("SELECT to_regclass('schema_migrations')")
            assert cursor.fetchone() == (None,)
    finally:
        conn.close()


def test_events_stored_a_row_each_become_chunks_with_their_offsets(new_database,
                                                                    monkeypatch):
    from app.repository.database import ConnectionPool
    from app.storage.engine import BEFORE_FIRST
    from app.storage.postgres import PostgresEngine

    database_url, conn = database_before(new_database, monkeypatch, 8)
    try:
        with conn, conn.cursor() as cursor:
            cursor.execute("INSERT INTO log_topics (name, partitions, retention_ms)"
                           " VALUES ('old', 1, 60000) RETURNING id")
            [(topic_id,)] = cursor.fetchall()
            cursor.execute("INSERT INTO log_partitions VALUES (%s, 0, 5)", (topic_id,))
            # Offsets 0..2 were purged; one payload has a line break between its tokens.
            cursor.executemany(
                "INSERT INTO log_events (topic_id, partition, event_offset, payload)"
                " VALUES (%s, 0, %s, %s)",
                [(topic_id, 3, b'{"n":3}'), (topic_id, 4, b'{"n":\n4}')])
        assert migrate(conn)[0] == "008_log_chunks"
        with conn.cursor() as cursor:
            cursor.execute("SELECT to_regclass('log_events')")
            assert cursor.fetchone() == (None,)
    finally:
        conn.close()

    pool = ConnectionPool(database_url, 2)
    engine = PostgresEngine(pool)
    try:
        assert [(e.offset, e.payload) for e in engine.read("old", 0, BEFORE_FIRST, 10)] == \
            [(3, b'{"n":3}'), (4, b'{"n": 4}')]
        assert engine.append("old", 0, [b'{"n":5}']) == [5]
    finally:
        engine.close()
        pool.close()


def test_topics_of_compacted_event_types_made_before_are_compacted_from_then_on(
        new_database, monkeypatch):
    _, conn = database_before(new_database, monkeypatch, 10)
    try:
        with conn, conn.cursor() as cursor:
            cursor.execute("INSERT INTO storages (id, storage_type, configuration)"
                           " VALUES ('pg', 'postgres', '{}')")
            for name, policy in (("kept", "compact"), ("aged", "delete")):
                cursor.execute("INSERT INTO event_types (name, document) VALUES (%s, %s)",
                               (name, f'{{"cleanup_policy": "{policy}"}}'))
                cursor.execute("INSERT INTO timelines VALUES (%s, %s, 1, 'pg', %s, 1)",
                               (str(uuid.uuid4()), name, f"topic-{name}"))
                cursor.execute("INSERT INTO log_topics (name, partitions, retention_ms)"
                               " VALUES (%s, 1, 60000) RETURNING id", (f"topic-{name}",))
                [(topic_id,)] = cursor.fetchall()
                cursor.execute("INSERT INTO log_chunks (topic_id, partition, first_offset,"
                               " last_offset, payloads) VALUES (%s, 0, 0, 1, %s)",
                               (topic_id, '{"a":1}\n{"a":2}'))
        assert migrate(conn)[:2] == ["010_postgres_compaction", "011_chunk_holes"]
        with conn.cursor() as cursor:
            cursor.execute("SELECT name, compacted FROM log_topics ORDER BY name")
            assert cursor.fetchall() == [("topic-aged", False), ("topic-kept", True)]
            # A compaction before 011 may have emptied lines of any chunk of theirs.
            cursor.execute("SELECT t.name, c.holes FROM log_chunks c"
                           " JOIN log_topics t ON t.id = c.topic_id ORDER BY t.name")
            assert cursor.fetchall() == [("topic-aged", False), ("topic-kept", True)]
    finally:
        conn.close()
