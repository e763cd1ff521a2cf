import psycopg2

from sql.migrate import available_migrations, migrate


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
