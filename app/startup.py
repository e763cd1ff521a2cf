"""What the gunicorn master does once before forking workers: check that every
dependency answers, apply migrations and register the configured storages.

It uses only short-lived clients, closed (threads and all) before the fork."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import psycopg2
from confluent_kafka import KafkaException
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from app.config import Settings
from app.repository.database import ConnectionPool, connect
from app.repository.storages import register_local_storages
from app.storage.kafka.clients import Clients
from sql.migrate import migrate

CHECK_TIMEOUT_S = 5.0


class DependencyUnavailable(Exception):
    """A dependency did not answer; the message names it and its address, in one line."""


def _address(dsn: str) -> str:
    parts = urlsplit(dsn)
    return f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path}"


def _check_tcp(name: str, servers: str, shown: str | None = None) -> None:
    """Pass when any of the comma-separated host:port servers accepts a connection;
    the error names them as ``shown`` (default: ``servers``)."""
    errors = []
    for server in servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=CHECK_TIMEOUT_S):
                return
        except (OSError, ValueError) as error:
            errors.append(f"{server.strip()}: {error}")
    raise DependencyUnavailable(
        f"{name} at {shown or servers} is unreachable ({'; '.join(errors)})")


def prepare(settings: Settings) -> list[str]:
    """Check dependencies, then migrate and register storages; returns the
    migrations applied. Nothing is written unless every dependency answers."""
    try:
        conn = connect(settings.database_url)
    except psycopg2.OperationalError as error:
        reason = str(error).strip().splitlines()[0]
        raise DependencyUnavailable(
            f"PostgreSQL at {_address(settings.database_url)} is unreachable ({reason})"
        ) from None
    except psycopg2.ProgrammingError:
        # libpq's "invalid dsn" quotes the part it could not read: often the password.
        raise ValueError(
            "NAKADI_DATABASE_URL is not a connection URL libpq can read (are special "
            "characters of the user name and password percent-encoded, and is every "
            "query parameter one libpq knows?)") from None
    try:
        _check_zookeeper(settings.zookeeper)
        if settings.kafka_bootstrap_servers:
            _check_tcp("Kafka", settings.kafka_bootstrap_servers)
            _check_kafka_client_config(settings)
        applied = migrate(conn)
    finally:
        conn.close()

    pool = ConnectionPool(settings.database_url, 1)
    try:
        register_local_storages(pool, settings)
    finally:
        pool.close()
    return applied


def _check_kafka_client_config(settings: Settings) -> None:
    """librdkafka refuses a property it does not know, or a value it cannot use, when
    a client is made: make one the way the workers will (``ValueError`` naming the file
    and librdkafka's reason otherwise)."""
    if not settings.kafka_client_config:
        return
    try:
        producer = Clients(settings.kafka_bootstrap_servers, settings.kafka_client_config,
                           lambda _error: None).producer(CHECK_TIMEOUT_S)
    except KafkaException as error:
        raise ValueError(f"NAKADI_KAFKA_CLIENT_PROPERTIES ({settings.kafka_client_properties})"
                         f": {error.args[0].str()}") from None
    producer.close()


def _check_zookeeper(hosts: str) -> None:
    # A refused connection fails at once; kazoo alone would retry until its timeout.
    _check_tcp("ZooKeeper", hosts.split("/", 1)[0], hosts)
    zookeeper = KazooClient(hosts=hosts, timeout=CHECK_TIMEOUT_S)
    try:
        zookeeper.start(timeout=CHECK_TIMEOUT_S)
    except KazooTimeoutError:
        raise DependencyUnavailable(
            f"ZooKeeper at {hosts} is unreachable (no session in {CHECK_TIMEOUT_S:.0f}s)"
        ) from None
    finally:
        zookeeper.stop()
        zookeeper.close()
