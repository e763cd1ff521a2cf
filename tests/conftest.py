"""Real services for the whole test session: PostgreSQL, ZooKeeper and the
Kafka-protocol broker, started once on free ports (so a running ``make run`` is
left alone) under a temporary data directory.

The services hold two metadata databases: the session's own, whose default storage
is ``postgres``, and one whose default storage is ``kafka``, for tests that run on
each engine in turn (``default_storage`` in tests/api/conftest.py). Neither default
changes during the session."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg2
import pytest
from confluent_kafka.admin import AdminClient

from app.config import Settings
from app.repository.database import ConnectionPool, make_green
from app.repository.storages import get_storage, register_local_storages
from deploy.localstack import LocalStack, free_port
from sql.migrate import migrate

KAFKA_DEFAULT_DATABASE = "nakadi_kafka_default"


@pytest.fixture(scope="session")
def stack_env() -> Iterator[dict[str, str]]:
    """``NAKADI_*`` variables pointing at the session's services."""
    data_dir = Path(tempfile.mkdtemp(prefix="nakadi-test-"))
    data_dir.chmod(0o755)  # PostgreSQL runs as its own user when we are root
    stack = LocalStack(data_dir, free_port(), free_port(), free_port())
    env = stack.start({})
    env["NAKADI_ZOOKEEPER_ROOT"] = "/nakadi-test"
    # The session's gunicorns never purge expired events nor sweep pending topic
    # removals: the tests of those jobs run them themselves and must not race a
    # worker's run (which would purge or remove first, or hold the lock meanwhile).
    env["NAKADI_RETENTION_CHECK_INTERVAL_S"] = "86400"
    env["NAKADI_TOPIC_SWEEP_INTERVAL_S"] = "86400"
    # Subscription lag in /metrics: refreshed often enough for tests to see it move.
    env["NAKADI_SUBSCRIPTION_LAG_INTERVAL_S"] = "1"
    conn = psycopg2.connect(env["NAKADI_DATABASE_URL"])
    migrate(conn)
    conn.close()
    try:
        yield env
    finally:
        stack.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def kafka_default_env(stack_env: dict[str, str]) -> dict[str, str]:
    """``NAKADI_*`` variables for the session's services with a metadata database of
    its own (and a ZooKeeper root of its own) whose default storage is ``kafka``."""
    admin = psycopg2.connect(stack_env["NAKADI_DATABASE_URL"])
    admin.autocommit = True
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {KAFKA_DEFAULT_DATABASE}")
    admin.close()
    database_url = stack_env["NAKADI_DATABASE_URL"].rsplit("/", 1)[0] + "/" + KAFKA_DEFAULT_DATABASE
    conn = psycopg2.connect(database_url)
    migrate(conn)
    conn.close()
    return stack_env | {"NAKADI_DATABASE_URL": database_url,
                        "NAKADI_DEFAULT_STORAGE": "kafka",
                        "NAKADI_ZOOKEEPER_ROOT": "/nakadi-test-kafka-default"}


@pytest.fixture(scope="session")
def settings(stack_env: dict[str, str]) -> Settings:
    return Settings.from_env(stack_env)


@pytest.fixture(scope="session")
def pool(settings: Settings) -> Iterator[ConnectionPool]:
    make_green()
    pool = ConnectionPool(settings.database_url, 20)
    register_local_storages(pool, settings)
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def kafka_default_pool(kafka_default_env: dict[str, str]) -> Iterator[ConnectionPool]:
    """A pool on the database whose default storage is ``kafka``."""
    make_green()
    pool = ConnectionPool(kafka_default_env["NAKADI_DATABASE_URL"], 20)
    register_local_storages(pool, Settings.from_env(kafka_default_env))
    yield pool
    pool.close()


@pytest.fixture
def server_env(stack_env: dict[str, str]) -> dict[str, str]:
    """The environment for a gunicorn serving the session's stack."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NAKADI_")}
    env.update(stack_env)
    return env


def topic_listed(pool, storage_id: str, topic: str) -> bool:
    """Whether the storage still lists the topic. Asks for the list of topics, never
    for the topic itself: librdkafka 2.16 crashes the process when a consumer fetches
    from a topic while it is deleted (see the README's known issues)."""
    storage = get_storage(pool, storage_id)
    if storage.storage_type == "kafka":
        admin = AdminClient({"bootstrap.servers": storage.configuration["bootstrap_servers"]})
        return topic in admin.list_topics(timeout=10).topics
    return pool.fetch_all("SELECT count(*) FROM log_topics WHERE name = %s", (topic,)) == [(1,)]
