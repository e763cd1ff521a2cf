"""Event type versions: the first one on create, the next one on update.

An update may change only what the spec lets change, and a schema change (`schema_diff`) must be
one the compatibility mode allows. Every accepted schema change becomes a new schema version,
numbered by semantic versioning from the weight of its heaviest change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, is_dataclass, replace
from datetime import datetime
from typing import Any

from app.domain.event_type import INITIAL_SCHEMA_VERSION, EventType, EventTypeSchema
from app.registry.errors import FieldError
from app.registry.json_schema import parse_schema_text
from app.registry.schema_diff import ChangeKind, Level, SchemaChange, schema_changes

_COMPATIBLE_CHANGES = frozenset(
    {
        ChangeKind.TITLE_CHANGED,
        ChangeKind.DESCRIPTION_CHANGED,
        ChangeKind.PROPERTY_ADDED,
        ChangeKind.DEFINITION_ADDED,
    }
)
ALLOWED_CHANGES: Mapping[str, frozenset[ChangeKind]] = {
    "compatible": _COMPATIBLE_CHANGES,
    "forward": _COMPATIBLE_CHANGES
    | {
        ChangeKind.REQUIRED_PROPERTY_ADDED,
        ChangeKind.PROPERTY_MARKED_REQUIRED,
        ChangeKind.ADDITIONAL_PROPERTIES_NARROWED,
    },
    "none": frozenset(ChangeKind),
}
_ALLOWED_IN_WORDS = {
    "compatible": "compatible mode allows only title/description changes and new optional "
    "properties or definitions",
    "forward": "forward mode allows title/description changes, new properties, marking "
    "properties required and changing additionalProperties from true to a schema",
}
# Each mode may move one step to the right, never to the left.
COMPATIBILITY_MODE_ORDER = ("none", "forward", "compatible")


def next_version(version: str, level: Level) -> str:
    """The version after `version` (`MAJOR.MINOR.PATCH`) for a change of `level`."""
    try:
        major, minor, patch = (int(part) for part in version.split("."))
    except ValueError:
        raise ValueError(f"not a MAJOR.MINOR.PATCH version: {version!r}") from None
    if level is Level.MAJOR:
        return f"{major + 1}.0.0"
    if level is Level.MINOR:
        return f"{major}.{minor + 1}.0"
    return f"{major}.{minor}.{patch + 1}"


def to_milliseconds(moment: datetime) -> datetime:
    """`moment` at the precision timestamps are shown with, so that it reads back equal."""
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def initial_event_type(requested: EventType, now: datetime) -> EventType:
    """The event type to store for a validated POST: schema version 1.0.0, timestamps `now`."""
    now = to_milliseconds(now)
    schema = replace(requested.schema, version=INITIAL_SCHEMA_VERSION, created_at=now)
    return replace(requested, schema=schema, created_at=now, updated_at=now)


@dataclass(frozen=True)
class Evolution:
    """The outcome of an update.

    Refused: `event_type` is None and `refusals` say why (answer 422). Accepted: `event_type`
    is what to store and answer; `changed` is False when the update changed nothing (there is
    nothing to write), and `new_schema_version` tells whether `event_type.schema` is a new
    version to add to the schema history.
    """

    event_type: EventType | None
    refusals: tuple[FieldError, ...] = ()
    schema_changes: tuple[SchemaChange, ...] = ()
    changed: bool = False
    new_schema_version: bool = False

    @property
    def refused(self) -> bool:
        return self.event_type is None


def _shown(value: Any) -> Any:
    """A field's value as the client sees it, for messages."""
    return vars(value) if is_dataclass(value) else value


def _field_refusals(stored: EventType, requested: EventType) -> list[FieldError]:
    refusals = []
    for name in ("name", "category", "cleanup_policy", "default_statistic"):
        if getattr(requested, name) != getattr(stored, name):
            shown = _shown(getattr(stored, name))
            refusals.append(FieldError(name, f"cannot be changed (it is {shown!r})"))
    strategy = stored.partition_strategy
    if requested.partition_strategy != strategy and strategy != "random":
        refusals.append(
            FieldError(
                "partition_strategy",
                f"can only be changed from random (it is {strategy!r})",
            )
        )
    keys = list(stored.partition_key_fields)
    if keys and list(requested.partition_key_fields) != keys:
        refusals.append(
            FieldError("partition_key_fields", f"cannot be changed once set (they are {keys!r})")
        )
    if stored.authorization and not requested.authorization:
        refusals.append(FieldError("authorization", "cannot be removed once present"))
    if stored.audience and not requested.audience:
        refusals.append(FieldError("audience", "cannot be removed once set"))
    before, after = stored.compatibility_mode, requested.compatibility_mode
    step = COMPATIBILITY_MODE_ORDER.index(after) - COMPATIBILITY_MODE_ORDER.index(before)
    if step not in (0, 1):
        refusals.append(
            FieldError(
                "compatibility_mode",
                f"cannot change from {before} to {after}: it only moves none -> forward -> "
                "compatible, one step at a time",
            )
        )
    return refusals


def _governing_mode(stored: EventType, requested: EventType) -> str:
    """The stricter of the two modes: an upgrade's schema change must already fit the new mode."""
    return max(
        stored.compatibility_mode, requested.compatibility_mode, key=COMPATIBILITY_MODE_ORDER.index
    )


def evolve_event_type(stored: EventType, requested: EventType, now: datetime) -> Evolution:
    """The update of `stored` to `requested` (validated by `validation.check_event_type` with
    `stored`), or the refusals of it."""
    refusals = _field_refusals(stored, requested)
    changes: list[SchemaChange] = []
    old_text, new_text = stored.schema.schema, requested.schema.schema
    if old_text != new_text:
        changes = schema_changes(parse_schema_text(old_text), parse_schema_text(new_text))
        mode = _governing_mode(stored, requested)
        refusals.extend(
            FieldError("schema.schema", f"{change} is not allowed ({_ALLOWED_IN_WORDS[mode]})")
            for change in changes
            if change.kind not in ALLOWED_CHANGES[mode]
        )
    if refusals:
        return Evolution(None, tuple(refusals), tuple(changes))

    now = to_milliseconds(now)
    if changes:
        level = max(change.level for change in changes)
        schema = EventTypeSchema(
            type=requested.schema.type,
            schema=new_text,
            version=next_version(stored.schema.version, level),
            created_at=now,
        )
    else:
        # Only formatting differs (or nothing): the stored text and version stay.
        schema = stored.schema
    updated = replace(
        requested, schema=schema, created_at=stored.created_at, updated_at=stored.updated_at
    )
    if updated == stored:
        return Evolution(stored, changed=False)
    return Evolution(
        replace(updated, updated_at=now),
        schema_changes=tuple(changes),
        changed=True,
        new_schema_version=bool(changes),
    )
