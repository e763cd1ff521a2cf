"""A single statement runs in a transaction of its own (``ConnectionPool.statement``):
one round trip, with no BEGIN and COMMIT around it, and the connection goes back to
the pool as transactional as it came."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg2
import pytest

from app.repository.database import ConnectionPool


@pytest.fixture
def one_connection(settings) -> Iterator[ConnectionPool]:
    """A pool of one, so every call below reuses the same connection."""
    pool = ConnectionPool(settings.database_url, 1)
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def table(pool: ConnectionPool) -> Iterator[str]:
    name = f"statements_{uuid.uuid4().hex[:8]}"
    pool.execute(f"CREATE TABLE {name} (n integer PRIMARY KEY)")
    try:
        yield name
    finally:
        pool.execute(f"DROP TABLE {name}")


def test_a_read_is_the_first_and_only_command_of_its_transaction(one_connection):
    # With BEGIN sent first, the read would start after its transaction did.
    assert one_connection.fetch_all(
        "SELECT transaction_timestamp() = statement_timestamp()") == [(True,)]


def test_a_statement_that_fails_undoes_itself_only(one_connection, pool, table):
    one_connection.execute(f"INSERT INTO {table} VALUES (1)")
    with pytest.raises(psycopg2.errors.UniqueViolation):
        one_connection.execute(f"INSERT INTO {table} VALUES (2), (1)")
    assert one_connection.execute(f"INSERT INTO {table} VALUES (3)") == 1
    assert pool.fetch_all(f"SELECT n FROM {table} ORDER BY n") == [(1,), (3,)]


def test_a_transaction_on_a_connection_that_ran_statements_is_still_all_or_nothing(
        one_connection, pool, table):
    one_connection.fetch_all("SELECT 1")
    with (pytest.raises(psycopg2.errors.UniqueViolation),
          one_connection.transaction() as cursor):
        cursor.execute(f"INSERT INTO {table} VALUES (1)")
        cursor.execute(f"INSERT INTO {table} VALUES (1)")
    with pytest.raises(ZeroDivisionError), one_connection.transaction() as cursor:
        cursor.execute(f"INSERT INTO {table} VALUES (2)")
        raise ZeroDivisionError
    assert pool.fetch_all(f"SELECT n FROM {table}") == []
