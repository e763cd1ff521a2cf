"""Stream lines decoded by Arrow's JSON reader straight into the layout's columns.

The general path (``client.parse_line`` then ``rows.record_batch``) makes a Python
dict per event and hands them to pyarrow; for typical events that is most of a
Spark task's CPU. Here a whole line is read by Arrow's C++ JSON reader with an
explicit schema derived from the layout, so no Python object is made per event.

It is only taken where it gives exactly what the general path gives, and a line
it cannot take goes the general way:
- Arrow refuses every value that does not have its column's JSON type (a string
  where a number is declared, ``3.0`` or ``2**64`` for an integer, duplicate
  keys...), where the general path would make the value null: such a line
  raises here and is decoded the general way.
- Map and JSON-text columns cannot be read by Arrow: they are read as empty
  structs, and a line where any of them holds a value goes the general way (so
  lines without ``metadata.span_ctx`` take this path, lines with it do not).
- Layouts with a map or JSON-text column inside an array, or the ``raw`` layout,
  always go the general way.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.json as pj

from workers.pipeline.client import StreamBatch
from workers.pipeline.rows import derived_eid
from workers.pipeline.schema_mapping import Layout, Node

PLACEHOLDER = pa.struct([])  # a value that must be absent or null on this path
MAX_BLOCK = (1 << 31) - 1  # Arrow's JSON reader takes blocks up to int32


class Unsupported(Exception):
    """A layout this path cannot decode."""


def _parse_type(target: pa.DataType, node: Node) -> pa.DataType:
    """The type Arrow reads a value of ``node`` as: ``target`` itself, except that
    map and JSON-text values are read as ``PLACEHOLDER``."""
    if node.kind in ("map", "json"):
        return PLACEHOLDER
    if node.kind == "struct":
        return pa.struct([pa.field(field.name, _parse_type(field.type, sub))
                          for field, (_, sub) in zip(target, node.fields, strict=True)])
    if node.kind == "array" and node.items is not None and _has_placeholder(node.items):
        raise Unsupported("a map or JSON-text value inside an array")
    return target


def _has_placeholder(node: Node) -> bool:
    if node.kind in ("map", "json"):
        return True
    if node.kind == "struct":
        return any(_has_placeholder(sub) for _, sub in node.fields)
    return node.items is not None and _has_placeholder(node.items)


def _finish(values: pa.Array, node: Node, target: pa.DataType) -> pa.Array | None:
    """``values`` as read, as the ``target`` type; None when a placeholder holds a
    value (the line must go the general way)."""
    if node.kind in ("map", "json"):
        return pa.nulls(len(values), target) if values.null_count == len(values) else None
    if node.kind != "struct" or not _has_placeholder(node):
        return values
    children = []
    for child, field, (_, sub) in zip(values.flatten(), target, node.fields, strict=True):
        finished = _finish(child, sub, field.type)
        if finished is None:
            return None
        children.append(finished)
    mask = values.is_null() if values.null_count else None
    return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)


@dataclass(frozen=True)
class _Plan:
    parse_options: pj.ParseOptions
    columns: tuple[tuple[str, Node, pa.DataType], ...]  # JSON property, node, target type


class ArrowLines:
    """Decodes stream lines of one layout into Arrow, where that is exact."""

    def __init__(self, layout: Layout, schema: pa.Schema) -> None:
        self.schema = schema
        try:
            self.plan: _Plan | None = self._plan(layout, schema)
        except Unsupported:
            self.plan = None

    @staticmethod
    def _plan(layout: Layout, schema: pa.Schema) -> _Plan:
        fields, columns = [], []
        for index, (_, path, node) in enumerate(layout.columns, start=4):
            if len(path) != 1:
                raise Unsupported("a column that is not one property of the event")
            target = schema.field(index).type
            fields.append(pa.field(path[0], _parse_type(target, node)))
            columns.append((path[0], node, target))
        if len({field.name for field in fields}) != len(fields):
            raise Unsupported("two columns from one property")
        metadata = dict((name, node) for name, node, _ in columns).get("metadata")
        if metadata is None:
            fields.append(pa.field("metadata", pa.struct([pa.field("eid", pa.string())])))
        elif dict(metadata.fields).get("eid") != Node("string"):
            raise Unsupported("metadata without a string eid")
        cursor = pa.struct([pa.field("partition", pa.string()),
                            pa.field("offset", pa.string())])
        line = pa.schema([pa.field("cursor", cursor),
                          pa.field("events", pa.list_(pa.struct(fields)))])
        return _Plan(pj.ParseOptions(explicit_schema=line, unexpected_field_behavior="ignore"),
                     tuple(columns))

    @property
    def usable(self) -> bool:
        return self.plan is not None

    def decode(self, line: bytes) -> StreamBatch | None:
        """The line's cursor and events, these as a RecordBatch of ``eid`` (null where
        an event has none) and the layout's columns; None when the line must be
        decoded the general way."""
        if self.plan is None or len(line) >= MAX_BLOCK:
            return None
        try:
            table = pj.read_json(io.BytesIO(line), parse_options=self.plan.parse_options,
                                 read_options=pj.ReadOptions(use_threads=False,
                                                             block_size=len(line) + 1))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if table.num_rows != 1:
            return None
        cursor = table.column("cursor").chunk(0)[0]
        partition, offset = cursor["partition"].as_py(), cursor["offset"].as_py()
        if partition is None or offset is None:
            return None
        events = table.column("events").chunk(0)
        if events.null_count:  # keep-alive: no events
            return StreamBatch(partition, offset, [])
        flat = events.flatten()
        if flat.null_count:  # an event that is not an object
            return None
        read = dict(zip((field.name for field in flat.type), flat.flatten(), strict=True))
        columns = []
        for name, node, target in self.plan.columns:
            finished = _finish(read[name], node, target)
            if finished is None:
                return None
            columns.append(finished)
        metadata = read["metadata"]
        eids = metadata.flatten()[metadata.type.get_field_index("eid")]
        return StreamBatch(partition, offset, pa.RecordBatch.from_arrays(
            [eids, *columns], names=["eid", *(name for name, _, _ in self.plan.columns)]))

    def record_batch(self, event_type: str, partition: str, offsets: pa.StringArray,
                     decoded: pa.RecordBatch) -> pa.RecordBatch:
        """The rows of events that ``decode`` gave, ``offsets[i]`` being the offset
        of the i-th; events without ``metadata.eid`` get the derived id."""
        count = decoded.num_rows
        if len(offsets) != count:
            raise ValueError(f"{count} events but {len(offsets)} offsets")
        eids = decoded.column(0)
        if eids.null_count:
            eids = pa.array([eid if eid is not None
                             else derived_eid(event_type, partition, offsets[i].as_py())
                             for i, eid in enumerate(eids.to_pylist())], pa.string())
        constant = [pa.repeat(pa.scalar(value, pa.string()), count)
                    for value in (event_type, partition)]
        return pa.RecordBatch.from_arrays(
            [eids, *constant, offsets, *decoded.columns[1:]], schema=self.schema)
