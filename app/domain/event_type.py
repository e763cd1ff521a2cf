"""An event type: the schema and runtime properties of one stream of events (the spec's EventType).

Built from its JSON form (a request body or the stored document) and rendered back to it by
`app.domain.event_type_document`, the only code that knows the field names on the wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

INITIAL_SCHEMA_VERSION = "1.0.0"
# The spec's default; an installation's own default is RegistrySettings.default_retention_time_ms.
DEFAULT_RETENTION_TIME_MS = 345_600_000


# Attributes in one list of an authorization section (event types, subscriptions, the
# admin lists): real lists name a few teams or services; the bound keeps hostile ones
# from costing a statement per attribute, or a listing megabytes per subscription.
MAX_AUTHORIZATION_ATTRIBUTES = 1_000


@dataclass(frozen=True)
class AuthorizationAttribute:
    data_type: str
    value: str


@dataclass(frozen=True)
class EventTypeAuthorization:
    """Who may administer, read and write an event type (stored and shown; enforced by the
    security room)."""

    admins: tuple[AuthorizationAttribute, ...]
    readers: tuple[AuthorizationAttribute, ...]
    writers: tuple[AuthorizationAttribute, ...]


@dataclass(frozen=True)
class EventTypeStatistics:
    messages_per_minute: int
    message_size: int
    read_parallelism: int
    write_parallelism: int


@dataclass(frozen=True)
class EventTypeOptions:
    retention_time: int = DEFAULT_RETENTION_TIME_MS


@dataclass(frozen=True)
class EventOwnerSelector:
    """How the owner of each event is found (a later Nakadi field; stored and shown only)."""

    type: str
    name: str
    value: str


@dataclass(frozen=True)
class EventTypeSchema:
    """One version of an event type's schema; `version` and `created_at` are set by the broker."""

    type: str
    schema: str
    version: str = INITIAL_SCHEMA_VERSION
    created_at: datetime | None = None


KEEP_FOREVER = -1
"""A topic retention that removes no event by age (Kafka's ``retention.ms`` -1)."""


@dataclass(frozen=True)
class EventType:
    name: str
    owning_application: str
    category: str
    schema: EventTypeSchema
    enrichment_strategies: tuple[str, ...] = ()
    partition_strategy: str = "random"
    compatibility_mode: str = "forward"
    partition_key_fields: tuple[str, ...] = ()
    cleanup_policy: str = "delete"
    default_statistic: EventTypeStatistics | None = None
    options: EventTypeOptions = field(default_factory=EventTypeOptions)
    authorization: EventTypeAuthorization | None = None
    ordering_key_fields: tuple[str, ...] = ()
    ordering_instance_ids: tuple[str, ...] = ()
    audience: str | None = None
    # Fields of later Nakadi versions, absent (None) unless given.
    event_owner_selector: EventOwnerSelector | None = None
    annotations: Mapping[str, str] | None = None
    labels: Mapping[str, str] | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def compacted(self) -> bool:
        """Whether its storage keeps the newest event of each ``partition_compaction_key``
        (the compact cleanup policy)."""
        return self.cleanup_policy == "compact"

    @property
    def storage_retention_ms(self) -> int:
        """The retention its topics get: ``options.retention_time``, or when compacted
        ``KEEP_FOREVER`` (a key's latest event must stay, whatever its age)."""
        return KEEP_FOREVER if self.compacted else self.options.retention_time

    @property
    def has_metadata(self) -> bool:
        """Whether its events carry `metadata` (business and data events do)."""
        return self.category != "undefined"
