"""Schema diffing: every change between two versions of a custom schema, with its weight.

The weights follow semantic versioning: title/description changes are PATCH, new optional
properties (and new definitions) MINOR, anything else MAJOR. Which changes a compatibility mode
allows is `evolution`'s business.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Any

from app.registry.json_schema import SCHEMA_KEYWORDS, SCHEMA_LIST_KEYWORDS, pointer


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
        elif (keyword in SCHEMA_LIST_KEYWORDS and isinstance(before, list)
              and isinstance(after, list) and len(before) == len(after)):
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
