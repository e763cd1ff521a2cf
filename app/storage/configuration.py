"""Storage objects as the API sends and receives them (``/storages``), checked.

``{"id": "kafka-2", "storage_type": "kafka", "kafka_configuration":
{"bootstrap_servers": "broker-1:9092,broker-2:9092"}}`` or ``{"id": "pg-2",
"storage_type": "postgres", "postgres_configuration": {"database_url":
"postgresql://..."}}`` (without ``database_url`` a ``postgres`` storage keeps its
log in the metadata database). Nakadi's ZooKeeper fields of
``kafka_configuration`` (``zk_address``...) are accepted and ignored: this broker
talks to Kafka through its bootstrap servers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from app.repository.storages import Storage

STORAGE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,35}")
BROKER = re.compile(r"[A-Za-z0-9_.\-]+:([0-9]{1,5})|\[[0-9A-Fa-f:.]+\]:([0-9]{1,5})")
DATABASE_URL = re.compile(r"^postgres(ql)?://")
TYPES = ("kafka", "postgres")


class StorageInvalid(ValueError):
    """A storage body that cannot be used; the message names the field (a 422)."""


def _configuration(body: Mapping[str, Any], storage_type: str) -> Mapping[str, Any]:
    for other in TYPES:
        if other != storage_type and body.get(f"{other}_configuration") is not None:
            raise StorageInvalid(f"{other}_configuration: only a storage of storage_type "
                                 f"'{other}' has it; this one is '{storage_type}'")
    field = f"{storage_type}_configuration"
    configuration = body.get(field)
    if configuration is None and storage_type == "postgres":
        return {}
    if not isinstance(configuration, Mapping):
        raise StorageInvalid(f"{field}: is required and must be an object")
    return configuration


def _bootstrap_servers(configuration: Mapping[str, Any]) -> str:
    servers = configuration.get("bootstrap_servers")
    if not isinstance(servers, str) or not servers.strip():
        raise StorageInvalid("kafka_configuration.bootstrap_servers: is required: the Kafka "
                             "brokers to connect to, as 'host:port[,host:port...]'")
    for server in servers.split(","):
        match = BROKER.fullmatch(server.strip())
        port = match and int(match.group(1) or match.group(2))
        if not port or port > 65535:
            raise StorageInvalid(f"kafka_configuration.bootstrap_servers: {server.strip()!r} "
                                 "is not host:port with a port from 1 to 65535")
    return ",".join(server.strip() for server in servers.split(","))


def _database_url(configuration: Mapping[str, Any]) -> dict[str, str]:
    url = configuration.get("database_url")
    if url is None:
        return {}
    if not isinstance(url, str) or not DATABASE_URL.match(url):
        raise StorageInvalid("postgres_configuration.database_url: must be a PostgreSQL URL, "
                             "postgresql://user@host:port/database, of a database migrated "
                             "for this broker; leave it out to use the metadata database")
    try:
        urlsplit(url).port  # noqa: B018 - reading the port checks the whole address
    except ValueError as error:  # libpq reads some URLs that Python's parser, and so the
        # password masking of the view, cannot
        raise StorageInvalid(f"postgres_configuration.database_url: cannot be read as a URL "
                             f"({error}): percent-encode '[', ']', '@' and '/' in the user "
                             "name and password, and give a port from 1 to 65535") from None
    return {"database_url": url}


def storage_from_body(body: Any) -> Storage:
    """The storage a POST body describes (not the default one)."""
    if not isinstance(body, Mapping):
        raise StorageInvalid('the body must be a Storage object: {"id": ..., "storage_type": '
                             '"kafka" or "postgres", and its "<type>_configuration"}')
    storage_id = body.get("id")
    if not isinstance(storage_id, str) or not STORAGE_ID.fullmatch(storage_id):
        raise StorageInvalid("id: is required: 1 to 36 letters, digits, '.', '_' or '-', "
                             "starting with a letter or digit")
    storage_type = body.get("storage_type")
    if storage_type not in TYPES:
        raise StorageInvalid(f"storage_type: must be one of {', '.join(TYPES)}, "
                             f"got {storage_type!r}")
    configuration = _configuration(body, storage_type)
    if storage_type == "kafka":
        checked = {"bootstrap_servers": _bootstrap_servers(configuration)}
    else:
        checked = _database_url(configuration)
    return Storage(storage_id, storage_type, checked, False)


SECRET_PARAMETERS = frozenset({"password", "sslpassword"})
"""libpq's connection parameters that hold a secret, which a URL may also carry in
its query (``postgresql://u@host/db?password=...``)."""


def _without_password(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:  # stored before database_url was checked as a URL
        scheme, _, rest = url.partition("://")
        return f"{scheme}://***@{rest.rpartition('@')[2]}"
    if parts.password is not None:
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{parts.username}:***@{host}")
    query = [(name, "***" if name in SECRET_PARAMETERS else value)
             for name, value in parse_qsl(parts.query, keep_blank_values=True)]
    if any(name in SECRET_PARAMETERS for name, _ in query):
        parts = parts._replace(query=urlencode(query, safe="*"))
    return urlunsplit(parts)


def storage_view(storage: Storage) -> dict[str, Any]:
    """The Storage object of the API (passwords masked); ``default`` says where new
    event types go."""
    configuration = dict(storage.configuration)
    if "database_url" in configuration:
        configuration["database_url"] = _without_password(configuration["database_url"])
    return {"id": storage.id, "storage_type": storage.storage_type,
            f"{storage.storage_type}_configuration": configuration,
            "default": storage.is_default}
