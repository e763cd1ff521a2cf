"""Payloads kept in the pieces storage read them in: cut, grouped and written as JSON
exactly as the events one by one would be."""

from __future__ import annotations

import random
from collections.abc import Sequence

import orjson
import pytest

from app.storage.engine import Lines, line_ends, read_line_ends
from app.streaming.lines import batch_line
from app.streaming.payloads import Payloads, json_items, payload_bytes
from tests.helpers.chunks import lines, windowed


def named(prefix: str, count: int) -> list[bytes]:
    return [b'{"e":"%s%d"}' % (prefix.encode(), n) for n in range(count)]


def test_lines_are_the_events_of_their_chunk():
    chunk = lines(b'{"a":1}', b'{"b":2}', b'{"c":3}')
    assert len(chunk) == 3
    assert list(chunk) == [b'{"a":1}', b'{"b":2}', b'{"c":3}']
    assert chunk[1] == b'{"b":2}'
    assert chunk[1:] == [b'{"b":2}', b'{"c":3}']
    assert chunk[0:3] is chunk  # taken whole, not split
    assert payload_bytes(chunk) == 21 == payload_bytes(list(chunk))
    with pytest.raises(ValueError, match="one event"):
        Lines(b"", 0)


def test_lines_with_their_ends_are_cut_as_windows_of_their_text():
    events = [b'{"a":1}', b'{"bb":22}', b'{"c":3}', b'{"dddd":4444}', b'{"e":5}']
    chunk = windowed(*events)
    for start in range(-6, 6):
        for stop in range(-6, 7):
            assert list(chunk[start:stop]) == events[start:stop], (start, stop)
    middle = chunk[1:4]
    assert type(middle) is Lines and middle.data == b"\n".join(events[1:4])
    assert list(middle[1:]) == events[2:4] and type(middle[1:]) is Lines  # a window of a window
    assert middle[0:3] is middle
    assert [chunk[n] for n in range(-5, 5)] == events + events
    assert [middle[n] for n in range(3)] == events[1:4]
    assert payload_bytes(middle) == sum(map(len, events[1:4]))
    assert json_items(chunk[3:]) == [b'{"dddd":4444},{"e":5}']
    with pytest.raises(IndexError):
        chunk[5]


def test_line_ends_that_do_not_fit_their_chunk_are_not_used():
    events = [b'{"a":1}', b'{"b":2}']
    data = b"\n".join(events)
    assert list(read_line_ends(line_ends(events), data, 2) or []) == [7, 14]
    assert read_line_ends(None, data, 2) is None  # written before chunks had them
    assert read_line_ends(line_ends(events), data, 3) is None
    assert read_line_ends(line_ends(events), data + b"x", 2) is None
    assert read_line_ends(memoryview(line_ends(events)), data, 2) is not None  # as psycopg2 gives


def test_a_cut_takes_whole_pieces_and_splits_only_the_one_it_falls_in():
    chunk = lines(*named("b", 4))
    payloads = Payloads()
    payloads.add(named("a", 2))
    payloads.add(chunk)
    payloads.add([])
    payloads.add(named("c", 3))
    assert len(payloads) == 9

    head = payloads.cut(4)
    assert list(head) == named("a", 2) + named("b", 2)
    assert list(payloads) == named("b", 4)[2:] + named("c", 3)
    assert len(payloads) == 5

    assert list(payloads.cut(100)) == named("b", 4)[2:] + named("c", 3)
    assert not payloads and list(payloads.cut(1)) == []


def test_a_whole_chunk_goes_out_as_it_was_read():
    chunk = lines(*named("a", 3))
    payloads = Payloads()
    payloads.add(chunk)
    [group] = payloads.cut(3).groups(3)
    assert group is chunk
    assert json_items(group) == [chunk.data.replace(b"\n", b",")]


@pytest.mark.parametrize("chunk", [lines, windowed])
def test_groups_are_batch_sized_across_pieces_and_within_them(chunk):
    payloads = Payloads()
    payloads.add(named("a", 2))
    payloads.add(chunk(*named("b", 7)))
    payloads.add(named("c", 1))
    groups = payloads.groups(3)
    assert [list(group) for group in groups] == [
        named("a", 2) + named("b", 1), named("b", 7)[1:4], named("b", 7)[4:7], named("c", 1)]
    assert [len(group) for group in groups] == [3, 3, 3, 1]


def test_a_chunk_with_line_ends_is_grouped_into_windows_not_split():
    payloads = Payloads()
    payloads.add(windowed(*named("a", 10)))
    groups = payloads.groups(4)
    assert [type(group) for group in groups] == [Lines, Lines, Lines]
    assert [list(group) for group in groups] == [named("a", 10)[n:n + 4] for n in (0, 4, 8)]
    head = payloads.cut(5)
    assert [type(piece) for piece in head.pieces + payloads.pieces] == [Lines, Lines]


@pytest.mark.parametrize("seed", range(20))
def test_cuts_groups_and_json_keep_every_event_once_in_order(seed):
    rng = random.Random(seed)
    pieces: list[Sequence[bytes]] = []
    for n in range(rng.randint(1, 8)):
        events = named(f"{n}-", rng.randint(1, 12))
        pieces.append(rng.choice([lines, windowed])(*events) if rng.random() < 0.7 else events)
    everything = [event for piece in pieces for event in piece]
    payloads = Payloads()
    for piece in pieces:
        payloads.add(piece)

    out: list[bytes] = []
    while payloads:
        size = rng.randint(1, 6)
        for group in payloads.cut(rng.randint(1, 15)).groups(size):
            assert 0 < len(group) <= size
            line = batch_line({"partition": "0", "offset": "0"}, group)
            sent = [orjson.dumps(event) for event in orjson.loads(line)["events"]]
            assert sent == list(group)
            out += sent
    assert out == everything
