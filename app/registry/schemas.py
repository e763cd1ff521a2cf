"""Marshmallow schemas for the event type bodies of the API, mirroring the spec's objects.

`load_event_type` turns a request body into an event type dict (the shape every registry
function works on, and the shape stored), filling defaults; `dump_event_type` turns a stored
event type into a response body carrying every field the spec defines.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from marshmallow import Schema, ValidationError, fields, pre_load, validate

from app.registry.choices import (
    AUDIENCES,
    CATEGORIES,
    CLEANUP_POLICIES,
    COMPATIBILITY_MODES,
    DEFAULT_CLEANUP_POLICY,
    DEFAULT_COMPATIBILITY_MODE,
    DEFAULT_PARTITION_STRATEGY,
    DEFAULT_RETENTION_TIME_MS,
    ENRICHMENT_STRATEGIES,
    INITIAL_SCHEMA_VERSION,
    PARTITION_STRATEGIES,
    SCHEMA_TYPES,
)
from app.registry.errors import EventTypeInvalid, FieldError
from app.registry.settings import RegistrySettings
from app.registry.timestamps import rfc3339

_MESSAGES = {
    "required": "is required",
    "null": "must not be null",
}


def _one_of(choices: tuple[str, ...]) -> validate.OneOf:
    return validate.OneOf(choices, error="must be one of: {choices} (got {input!r})")


def _string(
    *, required: bool = False, choices: tuple[str, ...] | None = None, dump_default: Any = None
) -> fields.String:
    return fields.String(
        required=required,
        allow_none=not required,
        dump_default=dump_default,
        validate=_one_of(choices) if choices else None,
        error_messages={**_MESSAGES, "invalid": "must be a string"},
    )


def _integer(*, required: bool = False) -> fields.Integer:
    return fields.Integer(
        strict=True,
        required=required,
        allow_none=not required,
        error_messages={**_MESSAGES, "invalid": "must be an integer"},
    )


def _strings(choices: tuple[str, ...] | None = None) -> fields.List:
    return fields.List(
        _string(required=True, choices=choices),
        allow_none=True,
        dump_default=list,
        error_messages={**_MESSAGES, "invalid": "must be an array of strings"},
    )


def _nested(
    schema: type[Schema], *, required: bool = False, dump_default: Any = None
) -> fields.Nested:
    return fields.Nested(
        schema,
        required=required,
        allow_none=not required,
        dump_default=dump_default,
        error_messages=_MESSAGES,
    )


class Timestamp(fields.Field):
    """A read-only RFC 3339 timestamp: datetimes are formatted, stored strings pass through."""

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return rfc3339(value) if isinstance(value, datetime) else value


class _Body(Schema):
    error_messages = {
        "unknown": "is not a field of this object",
        "type": "must be a JSON object",
    }
    # Fields a client may send back from a GET response: accepted and ignored on load.
    read_only_fields: tuple[str, ...] = ()

    @pre_load
    def _drop_read_only_fields(self, data: Any, **kwargs: Any) -> Any:
        if isinstance(data, dict) and self.read_only_fields:
            return {key: value for key, value in data.items() if key not in self.read_only_fields}
        return data


class AuthorizationAttributeBody(_Body):
    data_type = _string(required=True)
    value = _string(required=True)


def _attributes() -> fields.List:
    return fields.List(
        fields.Nested(AuthorizationAttributeBody, required=True, error_messages=_MESSAGES),
        required=True,
        validate=validate.Length(min=1, error="must list at least one attribute"),
        error_messages={**_MESSAGES, "invalid": "must be an array of attributes"},
    )


class EventTypeAuthorizationBody(_Body):
    admins = _attributes()
    readers = _attributes()
    writers = _attributes()


class EventTypeStatisticsBody(_Body):
    messages_per_minute = _integer(required=True)
    message_size = _integer(required=True)
    read_parallelism = _integer(required=True)
    write_parallelism = _integer(required=True)


class EventTypeOptionsBody(_Body):
    retention_time = _integer()


def _default_options() -> dict[str, int]:
    return {"retention_time": DEFAULT_RETENTION_TIME_MS}


class EventTypeSchemaBody(_Body):
    """The spec's EventTypeSchema; also the items of the `/schemas` listing."""

    read_only_fields = ("version", "created_at")

    type = _string(required=True, choices=SCHEMA_TYPES)
    schema = _string(required=True)
    version = fields.String(dump_only=True, dump_default=INITIAL_SCHEMA_VERSION)
    created_at = Timestamp(dump_only=True, dump_default=None)


class EventTypeBody(_Body):
    """The spec's EventType."""

    read_only_fields = ("created_at", "updated_at")

    name = _string(required=True)
    owning_application = _string(required=True)
    category = _string(required=True, choices=CATEGORIES)
    enrichment_strategies = _strings(ENRICHMENT_STRATEGIES)
    partition_strategy = _string(
        choices=PARTITION_STRATEGIES, dump_default=DEFAULT_PARTITION_STRATEGY
    )
    compatibility_mode = _string(
        choices=COMPATIBILITY_MODES, dump_default=DEFAULT_COMPATIBILITY_MODE
    )
    schema = _nested(EventTypeSchemaBody, required=True)
    partition_key_fields = _strings()
    cleanup_policy = _string(choices=CLEANUP_POLICIES, dump_default=DEFAULT_CLEANUP_POLICY)
    default_statistic = _nested(EventTypeStatisticsBody)
    options = _nested(EventTypeOptionsBody, dump_default=_default_options)
    authorization = _nested(EventTypeAuthorizationBody)
    ordering_key_fields = _strings()
    ordering_instance_ids = _strings()
    audience = _string(choices=AUDIENCES)
    created_at = Timestamp(dump_only=True, dump_default=None)
    updated_at = Timestamp(dump_only=True, dump_default=None)


def _flatten(messages: Any, path: str) -> list[FieldError]:
    if isinstance(messages, dict):
        errors: list[FieldError] = []
        for key, nested in messages.items():
            if key == "_schema":
                child = path
            elif isinstance(key, int):
                child = f"{path}[{key}]"
            else:
                child = f"{path}.{key}" if path else str(key)
            errors.extend(_flatten(nested, child))
        return errors
    if isinstance(messages, list):
        return [
            error
            for message in messages
            for error in (
                _flatten(message, path)
                if isinstance(message, dict | list)
                else [FieldError(path or "body", str(message))]
            )
        ]
    return [FieldError(path or "body", str(messages))]


def _with_defaults(
    loaded: dict[str, Any], settings: RegistrySettings, stored: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Fill what the client left out (or sent as null).

    On an update (`stored` given), fields that cannot be freely changed keep their stored value
    when omitted, so a client that does not know them cannot trip over their immutability.
    """
    previous: Mapping[str, Any] = stored or {}

    def kept(field: str, default: Any) -> Any:
        if loaded.get(field) is not None:
            return loaded[field]
        return previous.get(field) if previous.get(field) is not None else default

    options = loaded.get("options") or {}
    retention = options.get("retention_time")
    if retention is None:
        retention = (previous.get("options") or {}).get(
            "retention_time", settings.default_retention_time_ms
        )
    return {
        "name": loaded["name"],
        "owning_application": loaded["owning_application"],
        "category": loaded["category"],
        "enrichment_strategies": list(loaded.get("enrichment_strategies") or []),
        "partition_strategy": kept("partition_strategy", DEFAULT_PARTITION_STRATEGY),
        "compatibility_mode": kept("compatibility_mode", DEFAULT_COMPATIBILITY_MODE),
        "schema": {"type": loaded["schema"]["type"], "schema": loaded["schema"]["schema"]},
        "partition_key_fields": list(kept("partition_key_fields", [])),
        "cleanup_policy": kept("cleanup_policy", DEFAULT_CLEANUP_POLICY),
        "default_statistic": kept("default_statistic", None),
        "options": {"retention_time": retention},
        "authorization": loaded.get("authorization"),
        "ordering_key_fields": list(loaded.get("ordering_key_fields") or []),
        "ordering_instance_ids": list(loaded.get("ordering_instance_ids") or []),
        "audience": loaded.get("audience"),
    }


def load_event_type(
    body: Any, settings: RegistrySettings, stored: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The event type described by a request body, with defaults filled in.

    Checks the shape only (types, required fields, known fields and values); the rules across
    fields are `validation.validate_event_type`. Pass the stored event type as `stored` for a
    PUT. Raises EventTypeInvalid listing every problem.
    """
    if not isinstance(body, dict):
        raise EventTypeInvalid([FieldError("body", "must be a JSON object (an EventType)")])
    try:
        loaded = EventTypeBody().load(body)
    except ValidationError as error:
        raise EventTypeInvalid(_flatten(error.messages, "")) from None
    return _with_defaults(loaded, settings, stored)


def dump_event_type(event_type: Mapping[str, Any]) -> dict[str, Any]:
    """The response body for a stored event type."""
    return EventTypeBody().dump(event_type)


def dump_schema_version(schema_version: Mapping[str, Any]) -> dict[str, Any]:
    """The response body for one stored schema version (an EventTypeSchema)."""
    return EventTypeSchemaBody().dump(schema_version)
