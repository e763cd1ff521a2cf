"""One engine per configured storage, created lazily in each worker process
(librdkafka clients and connections do not survive gunicorn's fork)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from app.repository.database import ConnectionPool
from app.repository.storages import Storage, get_storage, list_storages
from app.storage.engine import StorageEngine, StorageError

DEFAULT_KAFKA_TIMEOUT_S = 10.0
DEFAULT_KAFKA_STREAM_FETCH_WAIT_MS = 20

log = logging.getLogger(__name__)


def build_engine(storage: Storage, pool: ConnectionPool,
                 kafka_timeout_s: float = DEFAULT_KAFKA_TIMEOUT_S,
                 kafka_client_config: Mapping[str, str] | None = None,
                 kafka_stream_fetch_wait_ms: int = DEFAULT_KAFKA_STREAM_FETCH_WAIT_MS,
                 kafka_exact_list_offsets: bool = False) -> StorageEngine:
    """The engine for one storage row. A ``postgres`` storage without its own
    ``database_url`` keeps its log in the metadata database; a ``kafka`` storage's
    clients get ``kafka_client_config`` (how to connect: TLS, SASL), its stream
    readers' fetches wait up to ``kafka_stream_fetch_wait_ms`` for new events, and
    ``kafka_exact_list_offsets`` says its brokers' ListOffsets give the log end."""
    if storage.storage_type == "postgres":
        from app.storage.postgres import PostgresEngine

        database_url = storage.configuration.get("database_url")
        if database_url and database_url != pool.dsn:
            pool = ConnectionPool(database_url, pool.max_size, pool.timeout_s)
        return PostgresEngine(pool, storage.id)
    if storage.storage_type == "kafka":
        from app.storage.kafka import KafkaEngine

        return KafkaEngine(storage.configuration["bootstrap_servers"], kafka_client_config,
                           timeout=kafka_timeout_s,
                           stream_fetch_wait_ms=kafka_stream_fetch_wait_ms,
                           exact_list_offsets=kafka_exact_list_offsets,
                           storage_id=storage.id)
    raise StorageError(f"storage {storage.id} has unknown type {storage.storage_type}")


class Engines:
    """The engines of this process, by storage id."""

    def __init__(self, pool: ConnectionPool,
                 kafka_timeout_s: float = DEFAULT_KAFKA_TIMEOUT_S,
                 kafka_client_config: Mapping[str, str] | None = None,
                 kafka_stream_fetch_wait_ms: int = DEFAULT_KAFKA_STREAM_FETCH_WAIT_MS,
                 kafka_exact_list_offsets: bool = False) -> None:
        self._pool = pool
        self._kafka_timeout_s = kafka_timeout_s
        self._kafka_client_config = kafka_client_config
        self._kafka_stream_fetch_wait_ms = kafka_stream_fetch_wait_ms
        self._kafka_exact_list_offsets = kafka_exact_list_offsets
        self._engines: dict[str, StorageEngine] = {}

    def get(self, storage_id: str) -> StorageEngine:
        engine = self._engines.get(storage_id)
        if engine is None:
            storage = get_storage(self._pool, storage_id)
            if storage is None:
                raise StorageError(f"there is no storage {storage_id}")
            engine = self._engines[storage_id] = build_engine(
                storage, self._pool, self._kafka_timeout_s, self._kafka_client_config,
                self._kafka_stream_fetch_wait_ms, self._kafka_exact_list_offsets)
        return engine

    def all(self) -> dict[str, StorageEngine]:
        """Every configured storage's engine, by id."""
        return {storage.id: self.get(storage.id) for storage in list_storages(self._pool)}

    def warm_up(self) -> None:
        """Warm every configured storage's engine up (each worker, as it starts). Only
        a head start: whatever is out of reach now is the first request's to meet."""
        try:
            for engine in self.all().values():
                engine.warm_up()
        except Exception as error:  # the database or a storage is down: requests will say
            log.info("storages not warmed up: %r", error)

    def close(self) -> None:
        for engine in self._engines.values():
            engine.close()
        self._engines.clear()
