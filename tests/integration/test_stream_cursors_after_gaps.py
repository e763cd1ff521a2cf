"""A low-level stream's cursors after events it had not reached were removed: each
batch's cursor is its last event's position, not a count of the events sent."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from app.services import Services
from app.storage.across_timelines import NO_WATCH, TimelinesReader
from app.streaming.event_stream import EventStream
from app.streaming.limits import StreamLimits
from tests.helpers.storage import create_event_type, expire


@pytest.fixture
def services(settings, pool) -> Iterator[Services]:
    built = Services(settings)
    yield built
    built.close()


def test_cursors_after_removed_events_name_the_events_sent(services, pool):
    name = create_event_type(services, "gaps")
    timelines = services.event_types.get(name)[1]  # type: ignore[index]
    engine = services.engines.get(timelines.active.storage_id)
    engine.append(timelines.active.topic, 0, [b'{"n": %d}' % n for n in range(20)])
    # The stream starts after position 4; events 5-14 go (retention) before it reads them.
    expire(pool, name, 0, 15)
    reader = TimelinesReader(services.engines.get, timelines, {0: 4}, NO_WATCH)
    stream = EventStream(reader, timelines, {0: 4},
                         StreamLimits(batch_limit=2, stream_limit=5, stream_timeout=10))
    lines = [json.loads(line) for chunk in stream.lines()
             for line in chunk.decode().splitlines()]
    sent = [(event["n"], line["cursor"]["offset"]) for line in lines
            for event in line.get("events", [])[-1:]]
    # Before: the cursors counted from 4 (6, 8, 9), naming events never sent.
    assert sent == [(16, timelines.encode(0, 16)), (18, timelines.encode(0, 18)),
                    (19, timelines.encode(0, 19))]
