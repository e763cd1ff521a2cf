"""Settings read from ``NAKADI_*`` environment variables.

Every default makes the local stack (``make run``) work with no configuration.
README.md has the table of variables; keep the two in step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

from app.registry.settings import RegistrySettings
from app.security.subjects import parse_attribute_list, parse_realms

MAX_FETCH_WAIT_MS = 10_000


@dataclass(frozen=True)
class Settings:
    database_url: str = "postgresql://nakadi@127.0.0.1:5433/nakadi"
    database_pool_size: int = 20
    database_timeout_s: float = 5.0
    zookeeper: str = "127.0.0.1:2181"
    zookeeper_root: str = "/nakadi"
    zookeeper_timeout_s: float = 5.0
    kafka_bootstrap_servers: str = "127.0.0.1:9092"
    kafka_timeout_s: float = 10.0
    # How long Kafka may hold a stream's fetch that found nothing (librdkafka's
    # fetch.wait.max.ms): what an idle stream costs the brokers, and with brokers that
    # answer a held fetch only when it runs out (Tansu), how late new events arrive.
    kafka_stream_fetch_wait_ms: int = 20
    # Whether the brokers answer ListOffsets(latest) with the log end, as Apache Kafka
    # does (Tansu does not when a record batch holds several records): bounds then
    # need no consumer and fetch of their own.
    kafka_exact_list_offsets: bool = False
    # A file of librdkafka properties (TLS, SASL...) for every Kafka client.
    kafka_client_properties: str = ""
    default_storage: str = "postgres"
    log_level: str = "INFO"
    retention_check_interval_s: float = 60.0
    compaction_interval_s: float = 600.0
    topic_sweep_interval_s: float = 30.0
    timeline_switch_timeout_s: float = 5.0
    timeline_publish_wait_s: float = 15.0
    default_partitions: int = RegistrySettings.default_partitions
    max_partitions: int = RegistrySettings.max_partitions
    min_retention_ms: int = RegistrySettings.min_retention_time_ms
    max_retention_ms: int = RegistrySettings.max_retention_time_ms
    default_retention_ms: int = RegistrySettings.default_retention_time_ms
    max_schema_bytes: int = RegistrySettings.max_schema_bytes
    max_batch_bytes: int = 50_000_000
    # Every other request body (event types, subscriptions, cursors...): what is stored
    # from one is served again by every listing, and parsing it holds the worker.
    max_body_bytes: int = 8_000_000
    # Events in one publish request: each costs a worker CPU that no other request or
    # stream of it gets meanwhile, and a 422 answers with an item per event.
    max_batch_events: int = 100_000
    # How long a request body may stop arriving (no byte) before the request is a 408,
    # as nginx's client_body_timeout: a client that stalls mid-body holds a greenlet
    # and a connection for as long as it likes otherwise.
    request_body_timeout_s: float = 30.0
    # How long the writing of a response (not a stream) may take before the connection is
    # shut down, as nginx's send_timeout: a client that stops reading a large response
    # holds a greenlet for good otherwise.
    response_send_timeout_s: float = 60.0
    max_streams_per_partition: int = 10
    max_subscription_partitions: int = 100
    # Security (app/security): authentication is off while no token-info URL is set.
    oauth2_tokeninfo_url: str = ""
    oauth2_tokeninfo_timeout_s: float = 2.0
    oauth2_realms: str = "/employees=user,/services=service"
    oauth2_cache_size: int = 10_000
    oauth2_cache_ttl_s: float = 60.0
    oauth2_read_scope: str = ""
    oauth2_write_scope: str = ""
    oauth2_admin_scope: str = ""
    oauth2_config_scope: str = ""
    admins: str = ""
    # Monitoring (app/monitoring): counting on the request paths; the salt of the
    # callers' hashed names in KPI events.
    metrics_enabled: bool = True
    subscription_lag_interval_s: float = 30.0
    kpi_salt: str = ""

    def __post_init__(self) -> None:
        # Malformed security lists stop the start, naming the variable.
        parse_attribute_list(self.admins, "NAKADI_ADMINS")
        parse_realms(self.oauth2_realms)
        _ = self.kafka_client_config  # an unusable properties file stops the start too
        if not 1 <= self.kafka_stream_fetch_wait_ms <= MAX_FETCH_WAIT_MS:
            raise ValueError(f"NAKADI_KAFKA_STREAM_FETCH_WAIT_MS={self.kafka_stream_fetch_wait_ms}"
                             f" is not between 1 and {MAX_FETCH_WAIT_MS} (milliseconds)")

    @cached_property
    def kafka_client_config(self) -> dict[str, str]:
        """The librdkafka properties of ``NAKADI_KAFKA_CLIENT_PROPERTIES``."""
        if not self.kafka_client_properties:
            return {}
        # Imported here: the kafka package loads librdkafka, which settings need not.
        from app.storage.kafka.client_properties import read_client_properties

        return read_client_properties(self.kafka_client_properties)

    @cached_property
    def registry(self) -> RegistrySettings:
        """The bounds event types are checked against."""
        return RegistrySettings(
            min_retention_time_ms=self.min_retention_ms,
            max_retention_time_ms=self.max_retention_ms,
            default_retention_time_ms=self.default_retention_ms,
            default_partitions=self.default_partitions,
            max_partitions=self.max_partitions,
            max_schema_bytes=self.max_schema_bytes,
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``NAKADI_<FIELD>`` variables, falling back to defaults."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in fields(cls):
            raw = environ.get(f"NAKADI_{field.name.upper()}")
            if raw is None:
                continue
            convert: type = type(field.default)
            try:
                values[field.name] = _boolean(raw) if convert is bool else convert(raw)
            except ValueError:
                raise ValueError(
                    f"NAKADI_{field.name.upper()}={raw!r} is not a valid {convert.__name__}"
                ) from None
        return cls(**values)


def _boolean(raw: str) -> bool:
    """``true``/``false`` (also ``1``/``0``, ``yes``/``no``, ``on``/``off``)."""
    value = raw.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(raw)
