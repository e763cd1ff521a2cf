"""The rules an event type must satisfy on create and on update, beyond its shape.

`check_event_type` is the whole check of a request body; `validate_event_type` applies the
rules to an already loaded event type and returns every FieldError found (empty when valid).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from app.domain.event_type import EventType
from app.registry.errors import EventTypeInvalid, FieldError
from app.registry.json_schema import (
    SchemaTextInvalid,
    has_field,
    meta_schema_problem,
    parse_schema_text,
    pointer,
    ref_cycle,
    ref_problems,
    walk,
)
from app.registry.linear_regex import pattern_problem
from app.registry.schemas import load_event_type
from app.registry.settings import RegistrySettings
from app.registry.validator_cache import SchemaUnusable, compile_validator

NAME_PATTERN = re.compile(r"[a-zA-Z][-0-9a-zA-Z_]*(\.[0-9a-zA-Z][-0-9a-zA-Z_]*)*")
KEYWORDS_REFUSED_IN_COMPATIBLE_MODE = (
    "additionalProperties",
    "additionalItems",
    "not",
    "patternProperties",
)
CATEGORIES_WITH_METADATA = ("business", "data")

Rule = Callable[[EventType, RegistrySettings], list[FieldError]]


def check_event_type(
    body: Any, settings: RegistrySettings, stored: EventType | None = None
) -> EventType:
    """The valid event type a POST (or, with `stored`, a PUT) body describes.

    Raises EventTypeInvalid (answer 422) listing every problem. On a PUT, pass the result to
    `evolution.evolve_event_type` for the update rules.
    """
    event_type = load_event_type(body, settings, stored)
    errors = validate_event_type(event_type, settings)
    if errors:
        raise EventTypeInvalid(errors)
    return event_type


def validate_event_type(event_type: EventType, settings: RegistrySettings) -> list[FieldError]:
    """Every rule broken by `event_type` (a loaded event type with defaults filled)."""
    errors: list[FieldError] = []
    for rule in _FIELD_RULES:
        errors.extend(rule(event_type, settings))
    schema_errors = _schema(event_type, settings)
    errors.extend(schema_errors)
    if not schema_errors:
        try:
            effective = compile_validator(event_type).schema
        except SchemaUnusable as error:
            errors.append(
                FieldError("schema.schema", f"cannot be used to validate events: {error}")
            )
        else:
            errors.extend(_fields_in_schema(event_type, effective))
    errors.extend(_field_lists_without_schema(event_type))
    return errors


def _name(event_type: EventType, settings: RegistrySettings) -> list[FieldError]:
    name = event_type.name
    if len(name) > settings.max_name_length:
        return [FieldError("name", f"must be at most {settings.max_name_length} characters long")]
    if NAME_PATTERN.fullmatch(name) is None:
        return [FieldError("name", f"must match the pattern {NAME_PATTERN.pattern} (got {name!r})")]
    return []


def _owning_application(event_type: EventType, settings: RegistrySettings) -> list[FieldError]:
    if not event_type.owning_application.strip():
        return [FieldError("owning_application", "must not be empty")]
    return []


def _enrichment_strategies(event_type: EventType, settings: RegistrySettings) -> list[FieldError]:
    category, strategies = event_type.category, event_type.enrichment_strategies
    if len(set(strategies)) != len(strategies):
        return [FieldError("enrichment_strategies", "must not list a strategy twice")]
    if category in CATEGORIES_WITH_METADATA and "metadata_enrichment" not in strategies:
        return [
            FieldError(
                "enrichment_strategies",
                f"must include metadata_enrichment for the {category} category",
            )
        ]
    if category == "undefined" and "metadata_enrichment" in strategies:
        return [
            FieldError(
                "enrichment_strategies",
                "metadata_enrichment is not possible for the undefined category "
                "(its events have no metadata)",
            )
        ]
    return []


def _partition_strategy(event_type: EventType, settings: RegistrySettings) -> list[FieldError]:
    if event_type.partition_strategy == "user_defined" and event_type.category == "undefined":
        return [
            FieldError(
                "partition_strategy",
                "user_defined is only available for the business and data categories "
                "(the partition is read from metadata.partition)",
            )
        ]
    return []


def _cleanup_policy(event_type: EventType, settings: RegistrySettings) -> list[FieldError]:
    if event_type.cleanup_policy == "compact" and event_type.category == "undefined":
        return [
            FieldError(
                "cleanup_policy",
                "compact is not available for the undefined category "
                "(the compaction key is metadata.partition_compaction_key)",
            )
        ]
    return []


def _retention_time(event_type: EventType, settings: RegistrySettings) -> list[FieldError]:
    retention = event_type.options.retention_time
    low, high = settings.min_retention_time_ms, settings.max_retention_time_ms
    if not low <= retention <= high:
        return [
            FieldError(
                "options.retention_time",
                f"must be between {low} and {high} milliseconds (got {retention})",
            )
        ]
    return []


def _default_statistic(event_type: EventType, settings: RegistrySettings) -> list[FieldError]:
    statistic = event_type.default_statistic
    if statistic is None:
        return []
    return [
        FieldError(f"default_statistic.{field}", f"must be a positive integer (got {value})")
        for field, value in vars(statistic).items()
        if value < 1
    ]


def _authorization(event_type: EventType, settings: RegistrySettings) -> list[FieldError]:
    authorization = event_type.authorization
    if authorization is None:
        return []
    errors: list[FieldError] = []
    for section in ("admins", "readers", "writers"):
        for index, attribute in enumerate(getattr(authorization, section)):
            for key in ("data_type", "value"):
                if not getattr(attribute, key).strip():
                    errors.append(
                        FieldError(f"authorization.{section}[{index}].{key}", "must not be empty")
                    )
    return errors


def _event_owner_selector(event_type: EventType, settings: RegistrySettings) -> list[FieldError]:
    selector = event_type.event_owner_selector
    if selector is None:
        return []
    return [
        FieldError(f"event_owner_selector.{key}", "must not be empty")
        for key in ("name", "value")
        if not getattr(selector, key).strip()
    ]


_FIELD_RULES: tuple[Rule, ...] = (
    _name,
    _owning_application,
    _enrichment_strategies,
    _partition_strategy,
    _cleanup_policy,
    _retention_time,
    _default_statistic,
    _authorization,
    _event_owner_selector,
)


def _schema(event_type: EventType, settings: RegistrySettings) -> list[FieldError]:
    """The custom schema: a draft 4 JSON Schema fit for the category and compatibility mode."""
    field = "schema.schema"
    size = len(event_type.schema.schema.encode())
    if size > settings.max_schema_bytes:
        return [FieldError(field, f"must be at most {settings.max_schema_bytes} bytes long "
                                  f"(got {size})")]
    try:
        schema = parse_schema_text(event_type.schema.schema)
    except SchemaTextInvalid as error:
        return [FieldError(field, str(error))]
    problem = meta_schema_problem(schema) or pattern_problem(schema)
    if problem is not None:
        return [FieldError(field, problem)]
    errors = [FieldError(field, problem) for problem in ref_problems(schema)]
    cycle = None if errors else ref_cycle(schema)
    if cycle is not None:
        errors.append(FieldError(field, cycle))
    if schema.get("type", "object") != "object":
        errors.append(
            FieldError(field, "the top-level type must be object (events are JSON objects)")
        )
    if event_type.compatibility_mode == "compatible":
        errors.extend(
            FieldError(field, f"{keyword} is not allowed in compatible mode (at {pointer(path)})")
            for path, node in walk(schema)
            for keyword in KEYWORDS_REFUSED_IN_COMPATIBLE_MODE
            if keyword in node
        )
    properties = schema.get("properties") or {}
    if event_type.category == "business" and "metadata" in properties:
        errors.append(
            FieldError(
                field,
                "a business event type may not define metadata: Nakadi adds it to the "
                "effective schema",
            )
        )
    if (
        event_type.category == "data"
        and "data_op" in properties
        and ("data" in properties or "metadata" in properties)
    ):
        errors.append(
            FieldError(
                field,
                "the schema of a data event type describes the content of data only: "
                "metadata, data_type and data_op are added by Nakadi",
            )
        )
    return errors


def _fields_in_schema(event_type: EventType, effective: Mapping[str, Any]) -> list[FieldError]:
    """Field lists that must name fields of the schema (the schema is known to be valid);
    `effective` is its effective schema."""
    errors = []
    key_prefix = "data." if event_type.category == "data" else ""
    for index, path in enumerate(event_type.partition_key_fields):
        if not has_field(effective, key_prefix + path):
            where = "data in the schema" if key_prefix else "the schema"
            errors.append(
                FieldError(f"partition_key_fields[{index}]", f"{path!r} is not a field of {where}")
            )
    for list_name in ("ordering_key_fields", "ordering_instance_ids"):
        for index, path in enumerate(getattr(event_type, list_name)):
            if not has_field(effective, path):
                errors.append(
                    FieldError(
                        f"{list_name}[{index}]",
                        f"{path!r} is not a field of the event (paths start at the event's root, "
                        "e.g. data.id or metadata.occurred_at)",
                    )
                )
    return errors


def _field_lists_without_schema(event_type: EventType) -> list[FieldError]:
    """Rules on the field lists that do not need the schema."""
    errors = []
    strategy, keys = event_type.partition_strategy, event_type.partition_key_fields
    if strategy == "hash" and not keys:
        errors.append(
            FieldError("partition_key_fields", "are required for the hash partition strategy")
        )
    if strategy != "hash" and keys:
        errors.append(
            FieldError(
                "partition_key_fields",
                f"must be absent unless partition_strategy is hash (it is {strategy})",
            )
        )
    for list_name in ("partition_key_fields", "ordering_key_fields", "ordering_instance_ids"):
        if len(set(getattr(event_type, list_name))) != len(getattr(event_type, list_name)):
            errors.append(FieldError(list_name, "must not name a field twice"))
    if event_type.ordering_instance_ids and not event_type.ordering_key_fields:
        errors.append(
            FieldError(
                "ordering_instance_ids", "can only be used together with ordering_key_fields"
            )
        )
    return errors
