"""Marshmallow schemas for the event type bodies of requests, mirroring the spec's objects.

`load_event_type` turns a request body into an EventType, filling defaults; `load_schema`
turns one into an EventTypeSchema. Only the shape is checked here (types, required fields,
closed lists of values); the rules across fields are `validation`'s. Responses are rendered by
`app.domain.event_type_document`.
"""

from __future__ import annotations

from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate

from app.domain.event_type import MAX_AUTHORIZATION_ATTRIBUTES, EventType, EventTypeSchema
from app.domain.event_type_document import event_type_from_document
from app.registry.choices import (
    AUDIENCES,
    CATEGORIES,
    CLEANUP_POLICIES,
    COMPATIBILITY_MODES,
    DEFAULT_CLEANUP_POLICY,
    DEFAULT_COMPATIBILITY_MODE,
    DEFAULT_PARTITION_STRATEGY,
    ENRICHMENT_STRATEGIES,
    EVENT_OWNER_SELECTOR_TYPES,
    PARTITION_STRATEGIES,
    SCHEMA_TYPES,
)
from app.registry.errors import EventTypeInvalid, FieldError
from app.registry.settings import RegistrySettings

_STRING_MAPS = ("annotations", "labels")
_MESSAGES: dict[str, str | list[Any] | dict[Any, Any]] = {
    "required": "is required",
    "null": "must not be null",
}


def _one_of(choices: tuple[str, ...]) -> validate.OneOf:
    return validate.OneOf(choices, error="must be one of: {choices} (got {input!r})")


def _string(*, required: bool = False, choices: tuple[str, ...] | None = None) -> fields.String:
    return fields.String(
        required=required,
        allow_none=not required,
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
        error_messages={**_MESSAGES, "invalid": "must be an array of strings"},
    )


def _string_map() -> fields.Dict:
    """`annotations` and `labels`: an object whose values are strings, keys not empty."""
    return fields.Dict(
        keys=fields.String(validate=validate.Length(min=1, error="a key must not be empty")),
        values=fields.String(
            required=True, error_messages={**_MESSAGES, "invalid": "must be a string"}
        ),
        allow_none=True,
        error_messages={**_MESSAGES, "invalid": "must be an object of string values"},
    )


def _nested(schema: type[Schema], *, required: bool = False) -> fields.Nested:
    return fields.Nested(
        schema, required=required, allow_none=not required, error_messages=_MESSAGES
    )


class _Body(Schema):
    """A spec object in a request. Fields it does not define are ignored, at every level:
    clients of newer Nakadi versions send fields this broker does not know, and read-only
    fields (`created_at`, `schema.version`) come back when a GET body is PUT back."""

    class Meta:
        unknown = EXCLUDE

    error_messages = {"type": "must be a JSON object"}


class AuthorizationAttributeBody(_Body):
    data_type = _string(required=True)
    value = _string(required=True)


def _attributes() -> fields.List:
    return fields.List(
        fields.Nested(AuthorizationAttributeBody, required=True, error_messages=_MESSAGES),
        required=True,
        validate=[validate.Length(min=1, error="must list at least one attribute"),
                  validate.Length(max=MAX_AUTHORIZATION_ATTRIBUTES, error="must list at most "
                                  f"{MAX_AUTHORIZATION_ATTRIBUTES} attributes")],
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


class EventOwnerSelectorBody(_Body):
    type = _string(required=True, choices=EVENT_OWNER_SELECTOR_TYPES)
    name = _string(required=True)
    value = _string(required=True)


class EventTypeSchemaBody(_Body):
    """The spec's EventTypeSchema (`version` and `created_at` are the broker's)."""

    type = _string(required=True, choices=SCHEMA_TYPES)
    schema = _string(required=True)


class EventTypeBody(_Body):
    """The spec's EventType, with the fields of later Nakadi versions this broker keeps."""

    name = _string(required=True)
    owning_application = _string(required=True)
    category = _string(required=True, choices=CATEGORIES)
    enrichment_strategies = _strings(ENRICHMENT_STRATEGIES)
    partition_strategy = _string(choices=PARTITION_STRATEGIES)
    compatibility_mode = _string(choices=COMPATIBILITY_MODES)
    schema = _nested(EventTypeSchemaBody, required=True)
    partition_key_fields = _strings()
    cleanup_policy = _string(choices=CLEANUP_POLICIES)
    default_statistic = _nested(EventTypeStatisticsBody)
    options = _nested(EventTypeOptionsBody)
    authorization = _nested(EventTypeAuthorizationBody)
    ordering_key_fields = _strings()
    ordering_instance_ids = _strings()
    audience = _string(choices=AUDIENCES)
    event_owner_selector = _nested(EventOwnerSelectorBody)
    annotations = _string_map()
    labels = _string_map()


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


def _name_map_entries(messages: Any) -> Any:
    """marshmallow reports a bad entry of `annotations` or `labels` as {key: {"key"|"value":
    [...]}}; name it `annotations.key` instead."""
    if not isinstance(messages, dict):
        return messages
    named = dict(messages)
    for field in _STRING_MAPS:
        entries = named.get(field)
        if isinstance(entries, dict):
            named[field] = {
                # `_schema` names the map itself: an empty key has no name of its own.
                key or "_schema": [message for part in errors.values() for message in part]
                if isinstance(errors, dict)
                else errors
                for key, errors in entries.items()
            }
    return named


def _load(schema: Schema, body: Any, what: str, prefix: str = "") -> dict[str, Any]:
    if not isinstance(body, dict):
        raise EventTypeInvalid([FieldError(prefix or "body", f"must be a JSON object ({what})")])
    try:
        return schema.load(body)
    except ValidationError as error:
        raise EventTypeInvalid(_flatten(_name_map_entries(error.messages), prefix)) from None


def _with_defaults(
    loaded: dict[str, Any], settings: RegistrySettings, stored: EventType | None
) -> dict[str, Any]:
    """The loaded body in document form, with what the client left out (or sent as null) filled.

    On an update (`stored` given), fields that cannot be freely changed keep their stored value
    when omitted, so a client that does not know them cannot trip over their immutability.
    """

    def kept(field: str, default: Any) -> Any:
        if loaded.get(field) is not None:
            return loaded[field]
        previous = getattr(stored, field) if stored is not None else None
        return default if previous is None else previous

    retention = (loaded.get("options") or {}).get("retention_time")
    if retention is None:
        retention = (
            stored.options.retention_time
            if stored is not None
            else settings.default_retention_time_ms
        )
    statistic = loaded.get("default_statistic")
    if statistic is None and stored is not None and stored.default_statistic is not None:
        statistic = vars(stored.default_statistic)
    strategy = kept("partition_strategy", DEFAULT_PARTITION_STRATEGY)
    # The stored keys belong to the hash strategy: kept for another, the refusal would
    # name keys the client never sent instead of the strategy it asked for.
    keys = (kept("partition_key_fields", []) if strategy == "hash"
            else loaded.get("partition_key_fields") or [])
    return {
        **loaded,
        "enrichment_strategies": loaded.get("enrichment_strategies") or [],
        "partition_strategy": strategy,
        "compatibility_mode": kept("compatibility_mode", DEFAULT_COMPATIBILITY_MODE),
        "partition_key_fields": keys,
        "cleanup_policy": kept("cleanup_policy", DEFAULT_CLEANUP_POLICY),
        "default_statistic": statistic,
        "options": {"retention_time": retention},
    }


def load_event_type(
    body: Any, settings: RegistrySettings, stored: EventType | None = None
) -> EventType:
    """The event type described by a request body, with defaults filled in.

    Checks the shape only (types, required fields and values); the rules across fields are
    `validation.validate_event_type`. Pass the stored event type as `stored` for a PUT.
    Raises EventTypeInvalid listing every problem.
    """
    loaded = _load(EventTypeBody(), body, "an EventType")
    return event_type_from_document(_with_defaults(loaded, settings, stored))


def load_schema(body: Any) -> EventTypeSchema:
    """The EventTypeSchema of a request body (its version and creation time are not read)."""
    loaded = _load(EventTypeSchemaBody(), body, "an EventTypeSchema", "schema")
    return EventTypeSchema(type=loaded["type"], schema=loaded["schema"])
