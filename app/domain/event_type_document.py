"""The JSON form of an event type: the stored document and the response body are the same.

`event_type_from_document` is the one place that builds an EventType from it (a stored document
or an already validated request body; what is missing takes the spec's default);
`event_type_document` is the one place that renders it, with the spec's fields in the order
responses always had. The fields of later Nakadi versions appear only when set, so event types
that do not use them look exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.domain.event_type import (
    DEFAULT_RETENTION_TIME_MS,
    INITIAL_SCHEMA_VERSION,
    AuthorizationAttribute,
    EventOwnerSelector,
    EventType,
    EventTypeAuthorization,
    EventTypeOptions,
    EventTypeSchema,
    EventTypeStatistics,
)
from app.registry.timestamps import rfc3339

Document = Mapping[str, Any]
_AUTHORIZATION_SECTIONS = ("admins", "readers", "writers")
_STATISTICS = ("messages_per_minute", "message_size", "read_parallelism", "write_parallelism")


def _moment(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value)


def _stamp(moment: datetime | None) -> str | None:
    return None if moment is None else rfc3339(moment)


def schema_from_document(document: Document) -> EventTypeSchema:
    return EventTypeSchema(
        type=document["type"],
        schema=document["schema"],
        version=document.get("version") or INITIAL_SCHEMA_VERSION,
        created_at=_moment(document.get("created_at")),
    )


def schema_document(schema: EventTypeSchema) -> dict[str, Any]:
    """An EventTypeSchema as stored and shown."""
    return {
        "type": schema.type,
        "schema": schema.schema,
        "version": schema.version,
        "created_at": _stamp(schema.created_at),
    }


def _authorization(document: Document | None) -> EventTypeAuthorization | None:
    if document is None:
        return None
    sections = {
        section: tuple(
            AuthorizationAttribute(item["data_type"], item["value"])
            for item in document.get(section) or ()
        )
        for section in _AUTHORIZATION_SECTIONS
    }
    return EventTypeAuthorization(**sections)


def _statistics(document: Document | None) -> EventTypeStatistics | None:
    if document is None:
        return None
    return EventTypeStatistics(**{name: document[name] for name in _STATISTICS})


def _owner_selector(document: Document | None) -> EventOwnerSelector | None:
    if document is None:
        return None
    return EventOwnerSelector(document["type"], document["name"], document["value"])


def _string_map(document: Document | None) -> dict[str, str] | None:
    return None if document is None else dict(document)


def event_type_from_document(document: Document) -> EventType:
    """The event type a stored document (or validated request body) describes."""
    options = document.get("options") or {}
    return EventType(
        name=document["name"],
        owning_application=document["owning_application"],
        category=document["category"],
        schema=schema_from_document(document["schema"]),
        enrichment_strategies=tuple(document.get("enrichment_strategies") or ()),
        partition_strategy=document.get("partition_strategy") or "random",
        compatibility_mode=document.get("compatibility_mode") or "forward",
        partition_key_fields=tuple(document.get("partition_key_fields") or ()),
        cleanup_policy=document.get("cleanup_policy") or "delete",
        default_statistic=_statistics(document.get("default_statistic")),
        options=EventTypeOptions(options.get("retention_time") or DEFAULT_RETENTION_TIME_MS),
        authorization=_authorization(document.get("authorization")),
        ordering_key_fields=tuple(document.get("ordering_key_fields") or ()),
        ordering_instance_ids=tuple(document.get("ordering_instance_ids") or ()),
        audience=document.get("audience"),
        event_owner_selector=_owner_selector(document.get("event_owner_selector")),
        annotations=_string_map(document.get("annotations")),
        labels=_string_map(document.get("labels")),
        created_at=_moment(document.get("created_at")),
        updated_at=_moment(document.get("updated_at")),
    )


def _attributes(attributes: tuple[AuthorizationAttribute, ...]) -> list[dict[str, str]]:
    return [{"data_type": item.data_type, "value": item.value} for item in attributes]


def event_type_document(event_type: EventType) -> dict[str, Any]:
    """An event type as stored and shown (the spec's EventType)."""
    statistic = event_type.default_statistic
    authorization = event_type.authorization
    document: dict[str, Any] = {
        "name": event_type.name,
        "owning_application": event_type.owning_application,
        "category": event_type.category,
        "enrichment_strategies": list(event_type.enrichment_strategies),
        "partition_strategy": event_type.partition_strategy,
        "compatibility_mode": event_type.compatibility_mode,
        "schema": schema_document(event_type.schema),
        "partition_key_fields": list(event_type.partition_key_fields),
        "cleanup_policy": event_type.cleanup_policy,
        "default_statistic": None
        if statistic is None
        else {name: getattr(statistic, name) for name in _STATISTICS},
        "options": {"retention_time": event_type.options.retention_time},
        "authorization": None
        if authorization is None
        else {
            section: _attributes(getattr(authorization, section))
            for section in _AUTHORIZATION_SECTIONS
        },
        "ordering_key_fields": list(event_type.ordering_key_fields),
        "ordering_instance_ids": list(event_type.ordering_instance_ids),
        "audience": event_type.audience,
    }
    selector = event_type.event_owner_selector
    if selector is not None:
        document["event_owner_selector"] = {
            "type": selector.type,
            "name": selector.name,
            "value": selector.value,
        }
    if event_type.annotations is not None:
        document["annotations"] = dict(event_type.annotations)
    if event_type.labels is not None:
        document["labels"] = dict(event_type.labels)
    document["created_at"] = _stamp(event_type.created_at)
    document["updated_at"] = _stamp(event_type.updated_at)
    return document
