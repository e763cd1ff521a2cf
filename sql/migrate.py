"""Applies the ordered ``sql/NNN_name.sql`` migrations that a database lacks.

Run as ``python -m sql.migrate`` (uses ``NAKADI_DATABASE_URL``); the server also
calls ``migrate()`` at start-up. Each migration runs in its own transaction
and is recorded in ``schema_migrations``; an advisory lock keeps several
instances starting at once from applying the same one twice.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

import psycopg2.extensions

MIGRATIONS_DIR = Path(__file__).parent
MIGRATION_NAME = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")
LOCK_KEY = 0x6E616B6164  # any constant shared by every instance

log = logging.getLogger(__name__)


def available_migrations() -> list[tuple[int, str, Path]]:
    """(version, name, path) of every migration file, in order."""
    found = []
    for path in MIGRATIONS_DIR.glob("*.sql"):
        match = MIGRATION_NAME.match(path.name)
        if not match:
            raise ValueError(f"migration file {path.name} is not named NNN_name.sql")
        found.append((int(match.group(1)), match.group(2), path))
    found.sort()
    versions = [version for version, _, _ in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"two migrations share a number: {versions}")
    return found


ENCODINGS = ("UTF8", "SQL_ASCII")
"""Database encodings that store any event: the postgres engine reads payloads as
UTF-8 text (``convert_from``), which another encoding could not represent."""


class UnsuitableDatabase(Exception):
    """The database cannot hold the broker's data; the message says why."""


def migrate(conn: psycopg2.extensions.connection) -> list[str]:
    """Apply the missing migrations; returns the names of those applied."""
    applied_now = []
    conn.autocommit = False
    with conn.cursor() as cursor:
        cursor.execute("SHOW server_encoding")
        [(encoding,)] = cursor.fetchall()
        if encoding not in ENCODINGS:
            raise UnsuitableDatabase(
                f"the database's encoding is {encoding}; events need UTF8: create the "
                "database with ENCODING 'UTF8' (createdb -E UTF8 -T template0)")
        cursor.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.commit()
        try:
            cursor.execute("SELECT version FROM schema_migrations")
            done = {row[0] for row in cursor.fetchall()}
            for version, name, path in available_migrations():
                if version in done:
                    continue
                cursor.execute(path.read_text())
                cursor.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (version, name),
                )
                conn.commit()
                applied_now.append(f"{version:03d}_{name}")
                log.info("applied migration %03d_%s", version, name)
        except BaseException:
            conn.rollback()
            raise
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
            conn.commit()
    return applied_now


def main() -> int:
    from app.config import Settings
    from app.repository.database import connect

    settings = Settings.from_env()
    conn = connect(settings.database_url)
    try:
        applied = migrate(conn)
    finally:
        conn.close()
    print(f"applied: {', '.join(applied)}" if applied else "database is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
