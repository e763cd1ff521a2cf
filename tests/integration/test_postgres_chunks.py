"""The postgres engine stores an append's events in chunks of consecutive offsets: reads
from any offset, through any poll size, give every event once, in order."""

from __future__ import annotations

import pytest

from app.storage.engine import BEFORE_FIRST, Lines, line_ends, stored_events
from app.storage.postgres_appender import CHUNK_BYTES, CHUNK_EVENTS, TextLiteral


def chunks(pool, topic: str) -> list[tuple[int, int, int]]:
    return [tuple(row) for row in pool.fetch_all(
        "SELECT partition, first_offset, last_offset FROM log_chunks"
        " WHERE topic_id = (SELECT id FROM log_topics WHERE name = %s)"
        " ORDER BY partition, last_offset", (topic,))]


def test_a_large_append_is_split_into_bounded_chunks(postgres_engine, postgres_topic, pool):
    payloads = [b'{"n":%d}' % n for n in range(2 * CHUNK_EVENTS + 500)]
    assert postgres_engine.append(postgres_topic, 0, payloads) == list(range(len(payloads)))
    assert chunks(pool, postgres_topic) == [
        (0, 0, CHUNK_EVENTS - 1), (0, CHUNK_EVENTS, 2 * CHUNK_EVENTS - 1),
        (0, 2 * CHUNK_EVENTS, 2 * CHUNK_EVENTS + 499)]

    big = [b'{"pad":"%s"}' % (b"x" * (CHUNK_BYTES // 2 - 20)) for _ in range(5)]
    postgres_engine.append(postgres_topic, 1, big)
    assert [last - first + 1 for p, first, last in chunks(pool, postgres_topic) if p == 1] \
        == [2, 2, 1]


@pytest.mark.parametrize("after", [BEFORE_FIRST, 0, 998, 999, 1000, 1500, 2498])
def test_a_read_starts_at_any_offset_inside_a_chunk(postgres_engine, postgres_topic, after):
    payloads = [b'{"n":%d}' % n for n in range(2500)]
    postgres_engine.append(postgres_topic, 0, payloads)
    events = postgres_engine.read(postgres_topic, 0, after, 1200)
    start = after + 1
    assert [(e.offset, e.payload) for e in events] == \
        [(n, payloads[n]) for n in range(start, min(start + 1200, 2500))]


def test_small_polls_over_large_chunks_give_every_event_once_in_order(postgres_engine,
                                                                      postgres_topic):
    for partition in (0, 1):
        postgres_engine.append(postgres_topic, partition,
                               [b'{"p":%d,"n":%d}' % (partition, n) for n in range(1700)])
    reader = postgres_engine.reader(postgres_topic, {0: 99, 1: BEFORE_FIRST})
    seen: dict[int, list[int]] = {0: [], 1: []}
    try:
        while batch := stored_events(reader.poll(333, timeout=0.5)):
            assert len(batch) <= 333
            for event in batch:
                seen[event.partition].append(event.offset)
    finally:
        reader.close()
    assert seen == {0: list(range(100, 1700)), 1: list(range(1700))}


def test_a_payload_with_a_line_break_is_refused_and_nothing_is_stored(postgres_engine,
                                                                     postgres_topic, pool):
    with pytest.raises(ValueError, match="line break"):
        postgres_engine.append_many(postgres_topic, {0: [b'{"a":1}'], 1: [b'{\n"a":2}']})
    assert chunks(pool, postgres_topic) == []


def test_chunks_are_stored_compressed(postgres_engine, postgres_topic, pool):
    payloads = [b'{"order_number":"%d","amount":%d,"currency":"EUR"}' % (n, n)
                for n in range(CHUNK_EVENTS)]
    postgres_engine.append(postgres_topic, 0, payloads)
    [(method, stored, size)] = pool.fetch_all(
        "SELECT pg_column_compression(payloads), pg_column_size(payloads),"
        " octet_length(payloads) FROM log_chunks"
        " WHERE topic_id = (SELECT id FROM log_topics WHERE name = %s)", (postgres_topic,))
    assert method == "lz4"
    assert stored < size / 3
    assert [e.payload for e in postgres_engine.read(postgres_topic, 0, BEFORE_FIRST, 2000)] \
        == payloads


@pytest.mark.parametrize("with_ends", [True, False], ids=["line ends", "written before them"])
def test_a_read_from_inside_a_chunk_gives_its_events_from_there(postgres_engine, postgres_topic,
                                                                pool, with_ends):
    payloads = [b'{"n":%d,"pad":"%s"}' % (n, b"x" * (n % 37)) for n in range(CHUNK_EVENTS)]
    postgres_engine.append(postgres_topic, 0, payloads)
    where = " WHERE topic_id = (SELECT id FROM log_topics WHERE name = %s)"
    [(ends,)] = pool.fetch_all("SELECT line_ends FROM log_chunks" + where, (postgres_topic,))
    assert bytes(ends) == line_ends(payloads)
    if not with_ends:
        pool.execute("UPDATE log_chunks SET line_ends = NULL" + where, (postgres_topic,))
    reader = postgres_engine.reader(postgres_topic, {0: 499})
    try:
        [run] = reader.poll(CHUNK_EVENTS, timeout=0.5)
    finally:
        reader.close()
    assert (run.first, list(run.payloads)) == (500, payloads[500:])
    # with its line ends the chunk is cut, not split into events
    assert (type(run.payloads) is Lines) == with_ends


QUOTING = [b'{"s":"it\'s"}', b'{"s":"a \\\\ and a \\"quote\\""}', b"{\"s\":\"''\\\\'\"}",
           '{"s":"\u00e9 \U0001F600","n":"\\u0000"}'.encode()]


def test_payloads_are_stored_exactly_whatever_they_quote(postgres_engine, postgres_topic):
    postgres_engine.append(postgres_topic, 0, QUOTING)
    assert [e.payload for e in postgres_engine.read(postgres_topic, 0, BEFORE_FIRST, 10)] \
        == QUOTING


@pytest.mark.parametrize("conforming", ["on", "off"])
def test_chunks_are_sent_as_text_that_reads_the_same_however_backslashes_are_read(
        pool, conforming):
    text = b"\n".join(QUOTING)
    with pool.transaction() as cursor:
        cursor.execute(f"SET LOCAL standard_conforming_strings = {conforming}")
        cursor.execute("SELECT %s", [TextLiteral(text)])
        assert cursor.fetchone()[0] == text.decode()
