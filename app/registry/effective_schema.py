"""Effective schemas: what events of an event type are validated against, per category.

- business: the custom schema's top-level properties plus the category's `metadata`.
- data: `metadata`, `data_type`, `data_op` (C/U/D/S) and `data`, which the custom schema describes.
- undefined: the custom schema as given.
In compatible mode no undeclared property is accepted anywhere (`additionalProperties: false`).

Publishing validates every event, so the compiled validator is cached per (event type, schema
version) in a `ValidatorCache`.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft4Validator
from jsonschema.exceptions import best_match

from app.registry.choices import DATA_OPERATIONS
from app.registry.formats import EVENT_FORMAT_CHECKER
from app.registry.json_schema import parse_schema_text, pointer

# Base URI given to the custom part of a data event type's schema when it has none, so that
# its `#/definitions/...` references keep meaning its own root once it is nested under `data`.
DATA_SCHEMA_ID = "urn:nakadi:event-type:data"
MAX_ERROR_LENGTH = 300
_OBJECT_KEYWORDS = ("properties", "required", "minProperties", "maxProperties")


def metadata_schema(event_type_name: str, cleanup_policy: str) -> dict[str, Any]:
    """The `metadata` object of business and data events (the spec's EventMetadata)."""
    required = ["eid", "occurred_at"]
    if cleanup_policy == "compact":
        required.append("partition_compaction_key")
    return {
        "type": "object",
        "properties": {
            "eid": {"type": "string", "format": "uuid"},
            "event_type": {"type": "string", "enum": [event_type_name]},
            "occurred_at": {"type": "string", "format": "date-time"},
            "received_at": {"type": "string", "format": "date-time"},
            "version": {"type": "string"},
            "parent_eids": {"type": "array", "items": {"type": "string", "format": "uuid"}},
            "flow_id": {"type": "string"},
            "partition": {"type": "string"},
            "partition_compaction_key": {"type": "string"},
            "span_ctx": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "required": required,
    }


def _is_object_schema(node: Mapping[str, Any]) -> bool:
    declared = node.get("type")
    if declared == "object" or (isinstance(declared, list) and "object" in declared):
        return True
    return declared is None and any(keyword in node for keyword in _OBJECT_KEYWORDS)


def _forbid_undeclared(node: dict[str, Any], is_root: bool = False) -> None:
    """Compatible mode: objects accept only declared properties, tuples only declared items."""
    if is_root or _is_object_schema(node):
        node["additionalProperties"] = False
    if isinstance(node.get("items"), list):
        node["additionalItems"] = False
    for keyword in ("properties", "definitions", "dependencies"):
        children = node.get(keyword)
        if isinstance(children, dict):
            for child in children.values():
                if isinstance(child, dict):
                    _forbid_undeclared(child)
    items = node.get("items")
    for child in items if isinstance(items, list) else [items]:
        if isinstance(child, dict):
            _forbid_undeclared(child)
    for keyword in ("allOf", "anyOf", "oneOf"):
        for child in node.get(keyword) or ():
            if isinstance(child, dict):
                _forbid_undeclared(child)


def effective_schema(
    event_type: Mapping[str, Any], custom_schema: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The effective schema of `event_type` (the stored/validated dict), built from
    `custom_schema` when given (e.g. an older version's schema), else from its current schema.

    Never modifies its arguments.
    """
    if custom_schema is None:
        custom_schema = parse_schema_text(event_type["schema"]["schema"])
    custom = copy.deepcopy(dict(custom_schema))
    strict = event_type.get("compatibility_mode") == "compatible"
    if strict:
        _forbid_undeclared(custom, is_root=True)
    category = event_type["category"]
    if category == "undefined":
        return custom
    metadata = metadata_schema(event_type["name"], event_type.get("cleanup_policy") or "delete")
    if category == "business":
        properties = dict(custom.get("properties") or {})
        properties["metadata"] = metadata
        required = [name for name in custom.get("required") or () if name != "metadata"]
        return {
            **custom,
            "type": "object",
            "properties": properties,
            "required": [*required, "metadata"],
        }
    custom.setdefault("type", "object")
    custom.setdefault("id", DATA_SCHEMA_ID)
    envelope: dict[str, Any] = {
        "type": "object",
        "properties": {
            "metadata": metadata,
            "data_type": {"type": "string"},
            "data_op": {"type": "string", "enum": list(DATA_OPERATIONS)},
            "data": custom,
        },
        "required": ["data", "metadata", "data_type", "data_op"],
    }
    if strict:
        envelope["additionalProperties"] = False
    return envelope


class EventValidator:
    """A compiled effective schema. `error_for` is what publishing calls for every event."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self._validator = Draft4Validator(schema, format_checker=EVENT_FORMAT_CHECKER)

    def error_for(self, event: Any) -> str | None:
        """None when `event` is valid, else the most relevant error as `#/path: reason`."""
        try:
            error = best_match(self._validator.iter_errors(event))
        except RecursionError:
            return "#: the event is nested too deeply to be validated"
        if error is None:
            return None
        message = error.message
        if len(message) > MAX_ERROR_LENGTH:
            message = message[: MAX_ERROR_LENGTH - 3] + "..."
        return f"{pointer(list(error.absolute_path))}: {message}"


class ValidatorCache:
    """Compiled validators per (event type name, schema version), least recently used evicted.

    An entry is rebuilt when anything its effective schema depends on differs from what it was
    built from (a re-created event type of the same name, a compatibility mode upgrade), so the
    cache never needs to be told about updates; `forget` only frees memory.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str], tuple[tuple[Any, ...], EventValidator]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()

    def validator_for(self, event_type: Mapping[str, Any]) -> EventValidator:
        """The validator for the current schema version of `event_type` (a stored event type)."""
        schema = event_type["schema"]
        key = (event_type["name"], schema.get("version") or "")
        fingerprint = (
            event_type["category"],
            event_type.get("compatibility_mode"),
            event_type.get("cleanup_policy"),
            schema["schema"],
        )
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] == fingerprint:
                self._entries.move_to_end(key)
                return entry[1]
        validator = EventValidator(effective_schema(event_type))
        with self._lock:
            self._entries[key] = (fingerprint, validator)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)
        return validator

    def forget(self, event_type_name: str) -> None:
        """Drop every version of an event type (after it was deleted)."""
        with self._lock:
            for key in [key for key in self._entries if key[0] == event_type_name]:
                del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)


# One per process: publishing asks it for the validator of the event type it publishes to.
VALIDATORS = ValidatorCache()
