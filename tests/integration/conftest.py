from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from app.coordination.zookeeper import ZooKeeper
from app.repository.database import ConnectionPool
from app.repository.storages import get_storage
from app.storage.engine import StorageEngine
from app.storage.engines import build_engine


def _built(pool: ConnectionPool, storage_id: str) -> Iterator[StorageEngine]:
    built = build_engine(get_storage(pool, storage_id), pool)
    yield built
    built.close()


@pytest.fixture(scope="session", params=["postgres", "kafka"])
def engine(request, pool: ConnectionPool) -> Iterator[StorageEngine]:
    """Each storage engine in turn, as the local stack registers it."""
    yield from _built(pool, request.param)


def _fresh_topic(engine: StorageEngine, partitions: int) -> Iterator[str]:
    name = f"test-{uuid.uuid4().hex[:12]}"
    engine.create_topic(name, partitions=partitions, retention_ms=3_600_000)
    yield name
    engine.delete_topic(name)


@pytest.fixture
def topic(engine: StorageEngine) -> Iterator[str]:
    """A fresh topic with 3 partitions, deleted afterwards."""
    yield from _fresh_topic(engine, 3)


@pytest.fixture
def second_topic(engine: StorageEngine) -> Iterator[str]:
    """Another fresh topic with 3 partitions (a following timeline's)."""
    yield from _fresh_topic(engine, 3)


@pytest.fixture
def postgres_engine(pool: ConnectionPool) -> Iterator[StorageEngine]:
    yield from _built(pool, "postgres")


@pytest.fixture
def postgres_topic(postgres_engine: StorageEngine) -> Iterator[str]:
    """A fresh topic with 2 partitions on the postgres engine, deleted afterwards."""
    yield from _fresh_topic(postgres_engine, 2)


@pytest.fixture
def kafka_engine(pool: ConnectionPool) -> Iterator[StorageEngine]:
    yield from _built(pool, "kafka")


@pytest.fixture
def kafka_topic(kafka_engine: StorageEngine) -> Iterator[str]:
    """A fresh topic with 1 partition on the kafka engine, deleted afterwards."""
    yield from _fresh_topic(kafka_engine, 1)


@pytest.fixture
def reads(postgres_engine):
    """The arguments of every read of the postgres engine's readers, in order."""
    done = []
    read_many = postgres_engine._read_many

    def counted(*args, **kwargs):
        done.append(args)
        return read_many(*args, **kwargs)

    postgres_engine._read_many = counted
    yield done
    postgres_engine._read_many = read_many


@pytest.fixture
def zookeeper(settings):
    """A ZooKeeper client of the session's ensemble, as a worker has it."""
    yield from _zookeeper_client(settings)


@pytest.fixture
def other_client(settings):
    """A second client, as another instance of the broker would have."""
    yield from _zookeeper_client(settings)


def _zookeeper_client(settings):
    connection = ZooKeeper(settings.zookeeper, settings.zookeeper_root,
                           settings.zookeeper_timeout_s)
    yield connection.client()
    connection.close()
