"""Readers hand out events in runs; splitting runs keeps every event once, in order."""

import pytest

from app.storage.engine import (
    EventRun,
    Lines,
    StoredEvent,
    count_events,
    split_runs,
    stored_events,
)
from app.subscriptions.readers import Inbox
from tests.helpers.chunks import windowed

RUNS = [EventRun(0, 10, [b"a", b"b", b"c"]), EventRun(1, 0, [b"d"]), EventRun(0, 13, [b"e", b"f"])]


@pytest.mark.parametrize("count", range(8))
def test_splitting_runs_keeps_every_event_once_in_order(count):
    taken, rest = split_runs(RUNS, count)
    assert count_events(taken) == min(count, 6)
    assert stored_events(taken) + stored_events(rest) == stored_events(RUNS)
    assert all(run.payloads for run in taken + rest), "no empty run"


def test_a_run_knows_its_events_offsets():
    assert RUNS[0].last == 12
    assert stored_events(RUNS[:2]) == [StoredEvent(0, 10, b"a"), StoredEvent(0, 11, b"b"),
                                       StoredEvent(0, 12, b"c"), StoredEvent(1, 0, b"d")]


def test_the_inbox_gives_events_in_the_order_they_were_read_across_polls():
    inbox = Inbox()
    inbox.put("a", RUNS[:2])
    inbox.put("b", RUNS[2:])
    assert len(inbox) == 6
    first = inbox.take(2)
    assert [(event_type, stored_events(runs)) for event_type, runs in first] == [
        ("a", [StoredEvent(0, 10, b"a"), StoredEvent(0, 11, b"b")])]
    rest = inbox.take(10)
    assert [(event_type, [e.offset for e in stored_events(runs)]) for event_type, runs in rest] \
        == [("a", [12, 0]), ("b", [13, 14])]
    assert len(inbox) == 0


def test_a_stopped_readers_events_are_dropped_and_the_others_kept():
    """They may lie past a position the stream went back to; its next reader reads
    them again."""
    inbox = Inbox()
    inbox.put("a", [EventRun(0, 5, [b"1", b"2"])])
    inbox.put("b", [EventRun(0, 0, [b"3"])])
    inbox.put("a", [EventRun(1, 0, [b"4"])])
    inbox.drop("a")
    assert len(inbox) == 1
    assert inbox.take(10) == [("b", [EventRun(0, 0, [b"3"])])]
    assert len(inbox) == 0


@pytest.mark.parametrize("count", range(8))
def test_a_chunk_with_line_ends_is_split_between_runs_as_windows(count):
    events = [b"a", b"bb", b"c", b"dd", b"e", b"ff"]
    taken, rest = split_runs([EventRun(0, 10, windowed(*events))], count)
    assert stored_events(taken + rest) == stored_events([EventRun(0, 10, events)])
    assert all(type(run.payloads) is Lines for run in taken + rest), "not split into events"
