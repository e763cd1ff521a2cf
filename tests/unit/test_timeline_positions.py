"""Positions through an event type's timelines, and the offsets clients see for them."""

from __future__ import annotations

import pytest

from app.domain.timeline import OffsetUnknown, Timeline, Timelines


def history(*last_offsets: tuple[int, ...] | None) -> Timelines:
    """Timelines 1.. with two partitions; the last one given as None (active)."""
    return Timelines(tuple(Timeline(f"t{n}", "e", n, "s", f"topic{n}", 2, last)
                           for n, last in enumerate(last_offsets, start=1)))


# Timeline 1 held events 0..4 of partition 0 and none of partition 1; timeline 2
# events 0..2 of partition 0 and 0..1 of partition 1; timeline 3 is active.
THREE = history((4, -1), (2, 1), None)


@pytest.mark.parametrize(("partition", "position", "offset"), [
    (0, -1, "001-0001--1"),
    (0, 0, "001-0001-000000000000000000"),
    (0, 4, "001-0001-000000000000000004"),
    (0, 5, "001-0002-000000000000000000"),
    (0, 7, "001-0002-000000000000000002"),
    (0, 8, "001-0003-000000000000000000"),
    (1, -1, "001-0001--1"),
    (1, 0, "001-0002-000000000000000000"),
    (1, 1, "001-0002-000000000000000001"),
    (1, 2, "001-0003-000000000000000000"),
])
def test_positions_run_through_the_timelines(partition, position, offset):
    assert THREE.encode(partition, position) == offset
    assert THREE.decode(partition, offset) == position


def test_the_start_of_a_timeline_is_the_end_of_the_one_before():
    assert THREE.decode(0, "001-0002--1") == 4
    assert THREE.decode(0, "001-0003--1") == 7
    assert THREE.decode(1, "001-0002--1") == -1


@pytest.mark.parametrize(("partition", "after", "located"), [
    (0, -1, (0, -1)), (0, 3, (0, 3)), (0, 4, (1, -1)), (0, 6, (1, 1)), (0, 7, (2, -1)),
    (0, 20, (2, 12)), (1, -1, (1, -1)), (1, 1, (2, -1)),
])
def test_reading_after_a_position_starts_in_the_timeline_of_the_next_event(partition, after,
                                                                           located):
    assert THREE.locate(partition, after) == located


@pytest.mark.parametrize(("offset", "reason"), [
    ("001-0004-000000000000000000", "belongs to timeline 4"),
    ("001-0001-000000000000000005", "past the end of timeline 1"),
    ("2", "is not of the form"),
])
def test_offsets_no_timeline_holds_are_refused(offset, reason):
    with pytest.raises(OffsetUnknown, match=reason):
        THREE.decode(0, offset)


def test_a_single_active_timeline_counts_engine_offsets():
    one = history(None)
    assert one.encode(1, 41) == "001-0001-000000000000000041"
    assert one.locate(1, 41) == (0, 41)


def test_only_the_last_timeline_may_be_active():
    with pytest.raises(ValueError):
        history(None, None)
