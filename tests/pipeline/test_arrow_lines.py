"""Stream lines read by Arrow's JSON reader give exactly the rows of the general
path (dicts, then pyarrow), and every line they cannot give exactly is left to it."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from workers.pipeline.arrow_lines import ArrowLines
from workers.pipeline.client import parse_line
from workers.pipeline.rows import arrow_schema, derived_eid, record_batch
from workers.pipeline.schema_mapping import event_layout

ORDER = {"type": "object",
         "properties": {"order_number": {"type": "string"}, "amount": {"type": "number"},
                        "lines": {"type": "array", "items": {
                            "type": "object", "properties": {"sku": {"type": "string"},
                                                             "qty": {"type": "integer"}}}},
                        "paid": {"type": "boolean"}, "note": {}}}


def line(events: list, offset: int | None = None) -> bytes:
    last = len(events) - 1 if offset is None else offset
    return json.dumps({"cursor": {"partition": "0", "offset": f"001-0001-{last:018d}"},
                       "events": events, "info": {"debug": "ignored"}},
                      separators=(",", ":")).encode()


def offsets(count: int) -> pa.StringArray:
    return pa.array([f"001-0001-{n:018d}" for n in range(count)])


def both_paths(category: str, schema: dict, events: list) -> tuple[pa.RecordBatch | None,
                                                                   pa.RecordBatch]:
    """The rows from Arrow's reader (None when it leaves the line) and from the
    general path."""
    layout = event_layout(category, schema)
    lines = ArrowLines(layout, arrow_schema(layout))
    text = line(events)
    general = record_batch(layout, arrow_schema(layout), "orders", "0", offsets(len(events)),
                           parse_line(text)["events"])
    decoded = lines.decode(text)
    if decoded is None:
        return None, general
    assert (decoded.partition, decoded.offset) == ("0", f"001-0001-{len(events) - 1:018d}")
    return lines.record_batch("orders", "0", offsets(len(events)), decoded.events), general


def business(n: int, **extra) -> dict:
    return {"order_number": f"A{n}", "amount": 10 + n, "paid": n % 2 == 0,
            "lines": [{"sku": "s", "qty": n}, {"sku": None}],
            "metadata": {"eid": f"e-{n}", "occurred_at": "2026-11-23T10:00:00Z",
                         "parent_eids": ["p"], "partition": "0"},
            "undeclared": {"kept": "only in raw"}, **extra}


def test_typical_events_are_read_by_arrow_with_the_same_rows():
    events = [business(n) for n in range(5)]
    events[3] = {"order_number": "no metadata", "amount": 1.5}
    events[4]["metadata"].pop("eid")
    arrow, general = both_paths("business", ORDER, events)
    assert arrow is not None and arrow.equals(general)
    assert arrow.column(0)[3].as_py() == derived_eid("orders", "0", "001-0001-000000000000000003")
    arrow, general = both_paths("undefined", ORDER, events)
    assert arrow is not None and arrow.equals(general)
    arrow, general = both_paths("data", ORDER, [{"data_op": "C", "data_type": "order",
                                                 "data": business(1), "metadata": {"eid": "x"}}])
    assert arrow is not None and arrow.equals(general)


@pytest.mark.parametrize("event", [
    business(1, amount="ten"),                      # a string where a number is declared
    business(1, lines=[{"qty": 3.0}]),              # an integer written as 3.0
    business(1, lines=[{"qty": 2**64}]),            # an integer beyond 64 bits
    business(1, paid=1),                            # a number where a boolean is declared
    business(1, note={"any": "value"}),             # a JSON-text column holding a value
    business(1, note="text"),
    business(1, metadata={"eid": "e", "span_ctx": {"trace": "t"}}),  # a map holding a value
    business(1, metadata={"eid": 7}),               # an eid that is not a string
], ids=["string-for-number", "integer-as-float", "integer-beyond-64-bits",
        "number-for-boolean", "json-object", "json-string", "map", "numeric-eid"])
def test_lines_arrow_cannot_read_exactly_are_left_to_the_general_path(event):
    arrow, general = both_paths("business", ORDER, [business(0), event])
    assert arrow is None
    assert general.num_rows == 2


def test_duplicate_keys_are_left_to_the_general_path():
    layout = event_layout("business", ORDER)
    lines = ArrowLines(layout, arrow_schema(layout))
    text = line([business(0)]).replace(b'"amount":10', b'"amount":10,"amount":11')
    assert lines.decode(text) is None


def test_a_keep_alive_has_no_events_and_keeps_its_cursor():
    layout = event_layout("business", ORDER)
    lines = ArrowLines(layout, arrow_schema(layout))
    decoded = lines.decode(b'{"cursor":{"partition":"3","offset":"001-0001-000000000000000041"}}')
    assert decoded is not None and len(decoded.events) == 0
    assert (decoded.partition, decoded.offset) == ("3", "001-0001-000000000000000041")


def test_layouts_arrow_cannot_read_always_take_the_general_path():
    raw = event_layout("business", ORDER, raw=True)
    assert not ArrowLines(raw, arrow_schema(raw)).usable
    maps_in_array = event_layout("undefined", {"properties": {"tags": {
        "type": "array", "items": {"type": "object", "additionalProperties": {"type": "string"}}}}})
    assert not ArrowLines(maps_in_array, arrow_schema(maps_in_array)).usable
