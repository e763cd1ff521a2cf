"""The available range of an event type's partitions over its timelines, asked of
each real storage engine."""

from __future__ import annotations

from app.domain.timeline import Timeline, Timelines
from app.storage.across_timelines import timelines_bounds
from app.storage.engine import PartitionBounds
from tests.helpers.storage import counting_bounds


def ranges(bounds: list[PartitionBounds]) -> list[tuple[int, int]]:
    return [(b.oldest, b.newest) for b in bounds]


def test_one_timeline_is_asked_once(engine, topic):
    """Each answer costs the storage (on kafka a new consumer and a fetch of every
    partition): the active timeline's gives both ends."""
    engine.append(topic, 0, [b'{"n": 0}', b'{"n": 1}'])
    engine_for, asked = counting_bounds(lambda _storage_id: engine)
    found = timelines_bounds(engine_for, Timelines((
        Timeline("t1", "e", 1, engine.storage_type, topic, 3),)))
    assert asked == [topic]
    assert ranges(found) == [(0, 1), (0, -1), (0, -1)]


def test_positions_run_through_a_closed_timeline_into_the_active_one(
        engine, topic, second_topic):
    engine.append(topic, 0, [b'{"n": 0}', b'{"n": 1}'])
    engine.append(second_topic, 0, [b'{"n": 2}'])
    engine.append(second_topic, 1, [b'{"n": 0}'])
    engine_for, asked = counting_bounds(lambda _storage_id: engine)
    found = timelines_bounds(engine_for, Timelines((
        Timeline("t1", "e", 1, engine.storage_type, topic, 3, (1, -1, -1)),
        Timeline("t2", "e", 2, engine.storage_type, second_topic, 3))))
    assert sorted(asked) == sorted([topic, second_topic])
    assert ranges(found) == [(0, 2), (0, 0), (0, -1)]
