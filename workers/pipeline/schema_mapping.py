"""An event type's JSON Schema as Spark columns.

The mapping goes through a small tree of ``Node``s, from which both the Spark
``StructType`` and the conversion of events into Arrow columns (``rows.py``) are
derived, so the two always agree. What Spark types cannot express (a value of
several types, tuples, an object without declared properties, recursion,
property names Spark cannot tell apart) becomes a ``json`` node: a string
column holding the value as JSON text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

MAX_DEPTH = 64
BROKER_COLUMNS = ("eid", "event_type", "partition", "offset")

# Nakadi's EventMetadata as the broker sends it (business and data events).
METADATA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "eid": {"type": "string"},
        "event_type": {"type": "string"},
        "occurred_at": {"type": "string"},
        "received_at": {"type": "string"},
        "version": {"type": "string"},
        "parent_eids": {"type": "array", "items": {"type": "string"}},
        "flow_id": {"type": "string"},
        "partition": {"type": "string"},
        "partition_compaction_key": {"type": "string"},
        "partition_keys": {"type": "array", "items": {"type": "string"}},
        "span_ctx": {"type": "object", "additionalProperties": {"type": "string"}},
        "published_by": {"type": "string"},
    },
}


@dataclass(frozen=True)
class Node:
    """One column type: ``string``, ``long``, ``double``, ``boolean``, ``json`` (any
    value as JSON text), ``struct`` (named ``fields``), ``array`` or ``map`` (of
    ``items``)."""
    kind: str
    fields: tuple[tuple[str, Node], ...] = ()
    items: Node | None = None

    @property
    def holds_json(self) -> bool:
        """Whether some value below needs turning into JSON text."""
        if self.kind == "json":
            return True
        if self.kind == "struct":
            return any(node.holds_json for _, node in self.fields)
        return self.items is not None and self.items.holds_json


JSON = Node("json")
SCALARS = {"string": Node("string"), "integer": Node("long"), "number": Node("double"),
           "boolean": Node("boolean")}


def map_schema(schema: Any) -> Node:
    """The node of a JSON Schema document (``$ref`` resolved within it)."""
    return _Mapper(schema).node(schema, (), 0)


class _Mapper:
    def __init__(self, root: Any) -> None:
        self.root = root

    def node(self, schema: Any, refs: tuple[str, ...], depth: int) -> Node:
        if not isinstance(schema, dict) or depth > MAX_DEPTH:
            return JSON  # true/false schemas, or nesting deeper than is sensible
        if "$ref" in schema:
            ref = schema["$ref"]
            target = self.resolve(ref)
            if target is None or ref in refs:
                return JSON  # unresolvable or recursive: no finite Spark type
            return self.node(target, (*refs, ref), depth + 1)
        for combinator in ("allOf", "anyOf", "oneOf"):
            if isinstance(schema.get(combinator), list):
                own = {k: v for k, v in schema.items() if k != combinator}
                parts = [self.node(s, refs, depth + 1) for s in schema[combinator]]
                if own.get("properties") or own.get("type"):
                    parts.append(self.node(own, refs, depth + 1))
                return _merge(parts)
        kind = _single_type(schema)
        if kind == "object":
            return self.object(schema, refs, depth)
        if kind == "array":
            items = schema.get("items")
            if isinstance(items, list):
                return JSON  # a tuple: positions of different types
            return Node("array", items=self.node(items, refs, depth + 1) if items else JSON)
        return SCALARS.get(kind or "", JSON)

    def object(self, schema: dict, refs: tuple[str, ...], depth: int) -> Node:
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                return Node("map", items=self.node(extra, refs, depth + 1))
            return JSON
        if not spark_can_name(properties):
            return JSON
        return Node("struct", tuple((name, self.node(sub, refs, depth + 1))
                                    for name, sub in properties.items()))

    def resolve(self, ref: Any) -> Any:
        """The schema a local JSON pointer (``#/definitions/x``) points at."""
        if not isinstance(ref, str) or not ref.startswith("#"):
            return None
        target = self.root
        for part in filter(None, ref[1:].split("/")):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                return None
        return target


def spark_can_name(names: Any) -> bool:
    """Spark resolves column names case-insensitively and cannot hold an empty one."""
    lowered = [name.lower() for name in names]
    return "" not in lowered and len(set(lowered)) == len(lowered)


def _single_type(schema: dict) -> str | None:
    """The one JSON type a schema allows (``null`` aside), guessed from its keywords
    when it names none; None when it allows several or cannot be told."""
    declared = schema.get("type")
    if isinstance(declared, list):
        types = {t for t in declared if t != "null"}
        if types == {"integer", "number"}:
            return "number"
        return types.pop() if len(types) == 1 else None
    if isinstance(declared, str):
        return None if declared == "null" else declared
    if "properties" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    if isinstance(schema.get("enum"), list):
        return _type_of_values(schema["enum"])
    if "const" in schema:
        return _type_of_values([schema["const"]])
    return None


def _type_of_values(values: list) -> str | None:
    types = set()
    for value in values:
        if value is None:
            continue
        if isinstance(value, bool):
            types.add("boolean")
        elif isinstance(value, int):
            types.add("integer")
        elif isinstance(value, float):
            types.add("number")
        elif isinstance(value, str):
            types.add("string")
        else:
            return None
    if types == {"integer", "number"}:
        return "number"
    return types.pop() if len(types) == 1 else None


def _merge(parts: list[Node]) -> Node:
    """One node for the branches of allOf/anyOf/oneOf: their common type, or one
    struct with the fields of all of them; JSON when they disagree."""
    if not parts:
        return JSON
    if all(part == parts[0] for part in parts):
        return parts[0]
    if all(part.kind == "struct" for part in parts):
        fields: dict[str, Node] = {}
        for part in parts:
            for name, node in part.fields:
                fields[name] = node if fields.get(name, node) == node else JSON
        if not spark_can_name(fields):
            return JSON
        return Node("struct", tuple(fields.items()))
    return JSON


def spark_type(node: Node) -> DataType:
    if node.kind == "struct":
        return StructType([StructField(name, spark_type(sub), True)
                           for name, sub in node.fields])
    if node.kind == "array":
        return ArrayType(spark_type(node.items or JSON), True)
    if node.kind == "map":
        return MapType(StringType(), spark_type(node.items or JSON), True)
    return {"long": LongType(), "double": DoubleType(),
            "boolean": BooleanType()}.get(node.kind, StringType())


@dataclass(frozen=True)
class Layout:
    """The columns of an event type's rows after the broker columns: each named
    column with the node of its values and the path to them in an event
    (``()``: the whole event, as JSON text)."""
    columns: tuple[tuple[str, tuple[str, ...], Node], ...]


def event_layout(category: str, schema: Any, raw: bool = False) -> Layout:
    """The payload columns of an event type's rows.

    - ``raw``: one ``raw`` column, the event as JSON text.
    - business: the schema's properties at the top level, and ``metadata``.
    - data: ``metadata``, ``data_op``, ``data_type`` and ``data`` (the schema).
    - undefined: the schema's properties at the top level.

    A payload property named like a broker column (``eid``, ``event_type``,
    ``partition``, ``offset``) is renamed ``payload_<name>``. A payload that is
    not an object with nameable properties is one ``payload`` JSON column.
    """
    if raw:
        return Layout((("raw", (), JSON),))
    metadata: tuple[str, tuple[str, ...], Node] = (
        "metadata", ("metadata",), map_schema(METADATA_SCHEMA))
    payload = map_schema(schema)
    if category == "data":
        return Layout((metadata, ("data_op", ("data_op",), Node("string")),
                       ("data_type", ("data_type",), Node("string")),
                       ("data", ("data",), payload)))
    columns: list[tuple[str, tuple[str, ...], Node]]
    if payload.kind == "struct":
        fields = [(name, node) for name, node in payload.fields
                  if not (category == "business" and name == "metadata")]
        columns = [(_column_name(name), (name,), node) for name, node in fields]
    else:
        columns = [("payload", (), JSON)]
    if category == "business":
        columns.append(metadata)
    if not spark_can_name([*BROKER_COLUMNS, *(name for name, _, _ in columns)]):
        columns = [("payload", (), JSON)] + ([metadata] if category == "business" else [])
    return Layout(tuple(columns))


def _column_name(name: str) -> str:
    return f"payload_{name}" if name.lower() in BROKER_COLUMNS else name


def row_schema(layout: Layout) -> StructType:
    """The Spark schema of rows: the broker columns, then the layout's columns."""
    return StructType(
        [StructField(name, StringType(), True) for name in BROKER_COLUMNS]
        + [StructField(name, spark_type(node), True) for name, _, node in layout.columns])
