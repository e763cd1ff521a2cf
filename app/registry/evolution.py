"""Event type versions: the first one on create, the next one on update (PUT).

An update may change only what the spec lets change, and a schema change must be one the
compatibility mode allows. Every accepted schema change becomes a new schema version, numbered
by semantic versioning: title/description changes are PATCH, new optional properties (and new
definitions) MINOR, anything else MAJOR.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum, IntEnum
from typing import Any

from app.registry.choices import INITIAL_SCHEMA_VERSION
from app.registry.errors import FieldError
from app.registry.json_schema import (
    SCHEMA_KEYWORDS,
    SCHEMA_LIST_KEYWORDS,
    parse_schema_text,
    pointer,
)
from app.registry.timestamps import rfc3339


class Level(IntEnum):
    """The semantic-versioning weight of a schema change."""

    PATCH = 1
    MINOR = 2
    MAJOR = 3


class ChangeKind(Enum):
    """What changed between two versions of a schema, and how much it weighs."""

    TITLE_CHANGED = ("title changed", Level.PATCH)
    DESCRIPTION_CHANGED = ("description changed", Level.PATCH)
    PROPERTY_ADDED = ("optional property added", Level.MINOR)
    DEFINITION_ADDED = ("definition added", Level.MINOR)
    REQUIRED_PROPERTY_ADDED = ("required property added", Level.MAJOR)
    PROPERTY_MARKED_REQUIRED = ("property marked as required", Level.MAJOR)
    ADDITIONAL_PROPERTIES_NARROWED = (
        "additionalProperties changed from true to a schema",
        Level.MAJOR,
    )
    PROPERTY_REMOVED = ("property removed", Level.MAJOR)
    DEFINITION_REMOVED = ("definition removed", Level.MAJOR)
    PROPERTY_NO_LONGER_REQUIRED = ("property no longer required", Level.MAJOR)
    TYPE_CHANGED = ("type changed", Level.MAJOR)
    ENUM_CHANGED = ("enum changed", Level.MAJOR)
    COMPOSITION_CHANGED = ("list of schemas changed", Level.MAJOR)
    KEYWORD_ADDED = ("keyword added", Level.MAJOR)
    KEYWORD_REMOVED = ("keyword removed", Level.MAJOR)
    KEYWORD_CHANGED = ("keyword value changed", Level.MAJOR)

    def __init__(self, description: str, level: Level) -> None:
        self.description = description
        self.level = level


@dataclass(frozen=True)
class SchemaChange:
    kind: ChangeKind
    path: str  # JSON pointer into the custom schema, e.g. #/properties/order_number

    @property
    def level(self) -> Level:
        return self.kind.level

    def __str__(self) -> str:
        return f"{self.kind.description} at {self.path}"


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


def _canonical(value: Any) -> str:
    # JSON text comparison: unlike ==, it tells true from 1 and 1 from 1.0.
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def schema_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[SchemaChange]:
    """Every change from the `old` custom schema to the `new` one (both parsed)."""
    changes: list[SchemaChange] = []
    _diff(old, new, (), changes)
    return changes


def _diff(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    path: tuple[str | int, ...],
    changes: list[SchemaChange],
) -> None:
    def add(kind: ChangeKind, keyword: str) -> None:
        changes.append(SchemaChange(kind, pointer((*path, keyword))))

    for keyword in [*old, *(key for key in new if key not in old)]:
        before, after = old.get(keyword), new.get(keyword)
        if keyword == "properties":
            _diff_properties(old, new, path, changes)
        elif keyword == "required":
            _diff_required(old, new, path, changes)
        elif keyword in old and keyword in new and _canonical(before) == _canonical(after):
            continue
        elif keyword in ("title", "description"):
            add(ChangeKind[f"{keyword.upper()}_CHANGED"], keyword)
        elif keyword == "definitions":
            added = ChangeKind.DEFINITION_ADDED
            _diff_named_schemas(before, after, (*path, keyword), changes, added)
        elif keyword in ("patternProperties", "dependencies"):
            _diff_named_schemas(before, after, (*path, keyword), changes, ChangeKind.KEYWORD_ADDED)
        elif keyword == "additionalProperties" and (before is None or before is True):
            if isinstance(after, dict):
                add(ChangeKind.ADDITIONAL_PROPERTIES_NARROWED, keyword)
            elif not (after is None or after is True):  # absent and true mean the same
                add(ChangeKind.KEYWORD_CHANGED, keyword)
        elif keyword in SCHEMA_KEYWORDS and isinstance(before, dict) and isinstance(after, dict):
            _diff(before, after, (*path, keyword), changes)
        elif keyword in SCHEMA_LIST_KEYWORDS and _same_length_lists(before, after):
            for index, (left, right) in enumerate(zip(before, after, strict=True)):
                _diff_subschema(left, right, (*path, keyword, index), changes)
        elif keyword in SCHEMA_LIST_KEYWORDS and keyword in old and keyword in new:
            add(ChangeKind.COMPOSITION_CHANGED, keyword)
        elif keyword not in old:
            add(ChangeKind.KEYWORD_ADDED, keyword)
        elif keyword not in new:
            add(ChangeKind.KEYWORD_REMOVED, keyword)
        elif keyword == "type":
            add(ChangeKind.TYPE_CHANGED, keyword)
        elif keyword == "enum":
            add(ChangeKind.ENUM_CHANGED, keyword)
        else:
            add(ChangeKind.KEYWORD_CHANGED, keyword)


def _same_length_lists(before: Any, after: Any) -> bool:
    return isinstance(before, list) and isinstance(after, list) and len(before) == len(after)


def _diff_subschema(
    before: Any, after: Any, path: tuple[str | int, ...], changes: list[SchemaChange]
) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        _diff(before, after, path, changes)
    elif _canonical(before) != _canonical(after):
        changes.append(SchemaChange(ChangeKind.KEYWORD_CHANGED, pointer(path)))


def _diff_named_schemas(
    before: Any,
    after: Any,
    path: tuple[str | int, ...],
    changes: list[SchemaChange],
    added: ChangeKind,
) -> None:
    before = before if isinstance(before, dict) else {}
    after = after if isinstance(after, dict) else {}
    removed = (
        ChangeKind.DEFINITION_REMOVED
        if added is ChangeKind.DEFINITION_ADDED
        else ChangeKind.KEYWORD_REMOVED
    )
    for name in before:
        if name not in after:
            changes.append(SchemaChange(removed, pointer((*path, name))))
        else:
            _diff_subschema(before[name], after[name], (*path, name), changes)
    for name in after:
        if name not in before:
            changes.append(SchemaChange(added, pointer((*path, name))))


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, dict) else {}


def _names(value: Any) -> list[str]:
    return [name for name in value if isinstance(name, str)] if isinstance(value, list) else []


def _diff_properties(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    path: tuple[str | int, ...],
    changes: list[SchemaChange],
) -> None:
    before, after = _properties(old), _properties(new)
    required = set(_names(new.get("required")))
    for name in before:
        where = pointer((*path, "properties", name))
        if name not in after:
            changes.append(SchemaChange(ChangeKind.PROPERTY_REMOVED, where))
        else:
            _diff_subschema(before[name], after[name], (*path, "properties", name), changes)
    for name in after:
        if name not in before:
            kind = (
                ChangeKind.REQUIRED_PROPERTY_ADDED
                if name in required
                else ChangeKind.PROPERTY_ADDED
            )
            changes.append(SchemaChange(kind, pointer((*path, "properties", name))))


def _diff_required(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    path: tuple[str | int, ...],
    changes: list[SchemaChange],
) -> None:
    before, after = set(_names(old.get("required"))), set(_names(new.get("required")))
    old_properties, new_properties = _properties(old), _properties(new)
    for name in sorted(before - after):
        changes.append(
            SchemaChange(
                ChangeKind.PROPERTY_NO_LONGER_REQUIRED, pointer((*path, "properties", name))
            )
        )
    for name in sorted(after - before):
        if name in new_properties and name not in old_properties:
            continue  # reported as REQUIRED_PROPERTY_ADDED
        changes.append(
            SchemaChange(ChangeKind.PROPERTY_MARKED_REQUIRED, pointer((*path, "properties", name)))
        )


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


def create_event_type(requested: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The event type to store for a validated POST: schema version 1.0.0, timestamps `now`."""
    stamp = rfc3339(now)
    event_type = dict(requested)
    event_type["schema"] = {
        **requested["schema"],
        "version": INITIAL_SCHEMA_VERSION,
        "created_at": stamp,
    }
    event_type["created_at"] = stamp
    event_type["updated_at"] = stamp
    return event_type


@dataclass(frozen=True)
class Evolution:
    """The outcome of an update.

    Refused: `event_type` is None and `refusals` say why (answer 422). Accepted: `event_type`
    is what to store and answer; `changed` is False when the PUT changed nothing (there is
    nothing to write), and `new_schema_version` tells whether `event_type["schema"]` is a new
    version to add to the schema history.
    """

    event_type: dict[str, Any] | None
    refusals: tuple[FieldError, ...] = ()
    schema_changes: tuple[SchemaChange, ...] = ()
    changed: bool = False
    new_schema_version: bool = False

    @property
    def refused(self) -> bool:
        return self.event_type is None


def _field_refusals(stored: Mapping[str, Any], requested: Mapping[str, Any]) -> list[FieldError]:
    refusals = []
    for name in ("name", "category", "cleanup_policy", "default_statistic"):
        if requested.get(name) != stored.get(name):
            refusals.append(FieldError(name, f"cannot be changed (it is {stored.get(name)!r})"))
    strategy = stored["partition_strategy"]
    if requested["partition_strategy"] != strategy and strategy != "random":
        refusals.append(
            FieldError(
                "partition_strategy",
                f"can only be changed from random (it is {strategy!r})",
            )
        )
    keys = stored.get("partition_key_fields") or []
    if keys and list(requested["partition_key_fields"]) != list(keys):
        refusals.append(
            FieldError("partition_key_fields", f"cannot be changed once set (they are {keys!r})")
        )
    if stored.get("authorization") and not requested.get("authorization"):
        refusals.append(FieldError("authorization", "cannot be removed once present"))
    if stored.get("audience") and not requested.get("audience"):
        refusals.append(FieldError("audience", "cannot be removed once set"))
    before, after = stored["compatibility_mode"], requested["compatibility_mode"]
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


def _governing_mode(stored: Mapping[str, Any], requested: Mapping[str, Any]) -> str:
    """The stricter of the two modes: an upgrade's schema change must already fit the new mode."""
    return max(
        stored["compatibility_mode"],
        requested["compatibility_mode"],
        key=COMPATIBILITY_MODE_ORDER.index,
    )


def evolve_event_type(
    stored: Mapping[str, Any], requested: Mapping[str, Any], now: datetime
) -> Evolution:
    """The update of `stored` to `requested` (validated by `validation.check_event_type` with
    `stored`), or the refusals of it."""
    refusals = _field_refusals(stored, requested)
    changes: list[SchemaChange] = []
    old_text, new_text = stored["schema"]["schema"], requested["schema"]["schema"]
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

    updated = dict(requested)
    updated["created_at"] = stored.get("created_at")
    if changes:
        level = max(change.level for change in changes)
        updated["schema"] = {
            "type": requested["schema"]["type"],
            "schema": new_text,
            "version": next_version(stored["schema"]["version"], level),
            "created_at": rfc3339(now),
        }
    else:
        # Only formatting differs (or nothing): the stored text and version stay.
        updated["schema"] = dict(stored["schema"])
    updated["updated_at"] = stored.get("updated_at")
    if all(updated[key] == stored.get(key) for key in updated):
        return Evolution(dict(stored), changed=False)
    updated["updated_at"] = rfc3339(now)
    return Evolution(
        updated,
        schema_changes=tuple(changes),
        changed=True,
        new_schema_version=bool(changes),
    )
