"""Events as Arrow record batches in the layout of ``schema_mapping``.

Columns are built whole by pyarrow (its C++ converts nested dicts and lists);
only columns holding JSON text are walked in Python first. A column whose
values do not all fit its type (an event of an older, incompatible schema
version, an integer beyond 64 bits) is rebuilt value by value, and a value
that does not fit becomes null, as in Spark's own JSON reader (PERMISSIVE
mode); the ``raw`` option keeps every event as sent.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

import orjson
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from workers.pipeline.schema_mapping import Layout, Node, row_schema

INT64 = range(-(2**63), 2**63)
# The namespace of the ids derived for events that carry no metadata.eid.
DERIVED_EID_NAMESPACE = uuid.UUID("4d3b1f6c-2a57-4f0e-9c0e-6b8f2f9b7a10")


def arrow_schema(layout: Layout) -> pa.Schema:
    return to_arrow_schema(row_schema(layout))


def derived_eid(event_type: str, partition: str, offset: str) -> str:
    """A stable id for an event without ``metadata.eid``: the same event (type,
    partition, offset) always gets the same id."""
    return str(uuid.uuid5(DERIVED_EID_NAMESPACE, f"{event_type}/{partition}/{offset}"))


def record_batch(layout: Layout, schema: pa.Schema, event_type: str, partition: str,
                 offsets: pa.StringArray, events: Sequence[dict[str, Any]]) -> pa.RecordBatch:
    """The rows of events read from one partition, ``offsets[i]`` being the offset
    of ``events[i]``."""
    eids = []
    for index, event in enumerate(events):
        metadata = event.get("metadata")
        eid = metadata.get("eid") if isinstance(metadata, dict) else None
        eids.append(eid if isinstance(eid, str)
                    else derived_eid(event_type, partition, offsets[index].as_py()))
    count = len(events)
    if len(offsets) != count:
        raise ValueError(f"{count} events but {len(offsets)} offsets")
    columns = [pa.array(eids, pa.string()),
               pa.array([event_type] * count, pa.string()),
               pa.array([partition] * count, pa.string()),
               offsets]
    for index, (_, path, node) in enumerate(layout.columns, start=4):
        values = list(events) if not path else [event.get(path[0]) for event in events]
        columns.append(_column(values, node, schema.field(index).type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _column(values: list[Any], node: Node, arrow_type: pa.DataType) -> pa.Array:
    if node.holds_json:
        values = [_with_json_text(value, node) for value in values]
    try:
        return pa.array(values, arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([fit(value, node) for value in values], arrow_type)


def json_text(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # an integer beyond 64 bits, which orjson does not write
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _with_json_text(value: Any, node: Node) -> Any:
    """The value with every part under a ``json`` node turned into JSON text."""
    if value is None:
        return None
    if node.kind == "json":
        return json_text(value)
    if node.kind == "struct" and isinstance(value, dict):
        return {name: _with_json_text(value.get(name), sub) for name, sub in node.fields}
    if node.kind == "array" and isinstance(value, list) and node.items:
        return [_with_json_text(item, node.items) for item in value]
    if node.kind == "map" and isinstance(value, dict) and node.items:
        return {key: _with_json_text(item, node.items) for key, item in value.items()}
    return value


def fit(value: Any, node: Node) -> Any:
    """The value as the node's type, or None where it does not fit."""
    if value is None:
        return None
    kind = node.kind
    if kind == "json":
        return json_text(value)
    if kind == "string":
        return value if isinstance(value, str) else None
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if kind == "long":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return value if isinstance(value, int) and not isinstance(value, bool) \
            and value in INT64 else None
    if kind == "double":
        return float(value) if isinstance(value, int | float) \
            and not isinstance(value, bool) else None
    if kind == "struct":
        if not isinstance(value, dict):
            return None
        return {name: fit(value.get(name), sub) for name, sub in node.fields}
    if kind == "array" and node.items:
        return [fit(item, node.items) for item in value] if isinstance(value, list) else None
    if kind == "map" and node.items:
        return {str(key): fit(item, node.items) for key, item in value.items()} \
            if isinstance(value, dict) else None
    return None
