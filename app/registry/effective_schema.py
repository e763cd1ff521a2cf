"""Effective schemas: what events of an event type are validated against, per category.

- business: the custom schema's top-level properties plus the category's `metadata`.
- data: `metadata`, `data_type`, `data_op` (C/U/D/S) and `data`, which the custom schema describes.
- undefined: the custom schema as given.
In compatible and none modes no undeclared property is accepted (`additionalProperties: false`
wherever the schema does not say otherwise); forward mode accepts them.

Compiling and running the validator is `event_validator`; caching it, `validator_cache`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from app.domain.event_type import EventType
from app.registry.choices import DATA_OPERATIONS
from app.registry.json_schema import parse_schema_text, subschemas

# Base URI given to the custom part of a data event type's schema when it has none, so that
# its `#/definitions/...` references keep meaning its own root once it is nested under `data`.
DATA_SCHEMA_ID = "urn:nakadi:event-type:data"
# The spec: "compatible" and "none" accept no additional properties unless the schema says so.
STRICT_MODES = ("compatible", "none")
_OBJECT_KEYWORDS = ("properties", "required", "minProperties", "maxProperties")


def metadata_schema(event_type_name: str, cleanup_policy: str) -> dict[str, Any]:
    """The `metadata` object of business and data events (the spec's EventMetadata)."""
    required = ["eid", "occurred_at"]
    # The spec's partition_compaction_key: "Required when 'cleanup_policy' of event type is
    # set to 'compact'. Must be absent otherwise." Nakadi refuses an empty one. An annotation
    # alone is valid for every value: `not` of it refuses any, and the error names why.
    compaction_key: dict[str, Any] = {
        "not": {"description": "only compacted event types take a compaction key"}}
    if cleanup_policy == "compact":
        required.append("partition_compaction_key")
        compaction_key = {"type": "string", "minLength": 1}
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
            "partition_compaction_key": compaction_key,
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
    """Objects accept only the properties they declare, tuples only their items, unless the
    schema says otherwise with `additionalProperties` or `additionalItems` (only `none` mode
    may: compatible mode refuses those keywords). `not` is left alone: forbidding inside it
    would accept more, not less."""
    if (is_root or _is_object_schema(node)) and "additionalProperties" not in node:
        node["additionalProperties"] = False
    if isinstance(node.get("items"), list) and "additionalItems" not in node:
        node["additionalItems"] = False
    for path, child in subschemas(node):
        if path[0] != "not":
            _forbid_undeclared(child)


def effective_schema(
    event_type: EventType, custom_schema: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The effective schema of `event_type`, built from `custom_schema` when given (e.g. an
    older version's schema), else from its current schema.

    Never modifies its arguments.
    """
    if custom_schema is None:
        custom_schema = parse_schema_text(event_type.schema.schema)
    custom = copy.deepcopy(dict(custom_schema))
    strict = event_type.compatibility_mode in STRICT_MODES
    if strict:
        _forbid_undeclared(custom, is_root=True)
    category = event_type.category
    if category == "undefined":
        return custom
    metadata = metadata_schema(event_type.name, event_type.cleanup_policy)
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
