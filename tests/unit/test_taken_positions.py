"""A batch's cursor is the position of its last event, also after a gap."""

from app.streaming.positions import TakenPositions


def test_positions_follow_the_runs_taken_across_gaps():
    positions: TakenPositions[int] = TakenPositions({0: 4, 1: -1})
    positions.take(0, 5, 3)  # 5, 6, 7
    positions.take(0, 15, 4)  # 8-14 were removed meanwhile: 15-18
    positions.take(1, 0, 2)
    assert positions.send(0, 0) == 4  # a keep-alive keeps the last position
    assert positions.send(0, 2) == 6
    assert positions.send(0, 2) == 15  # 7, then 15
    assert positions.send(0, 3) == 18
    assert positions.send(1, 2) == 1
    assert positions.sent == {0: 18, 1: 1}


def test_consecutive_runs_join():
    positions: TakenPositions[str] = TakenPositions({"a": -1})
    for first in range(0, 10, 2):
        positions.take("a", first, 2)
    positions.take("a", 10, 0)
    assert positions.send("a", 10) == 9


def test_a_partition_reset_forgets_what_it_had_taken():
    positions: TakenPositions[str] = TakenPositions({})
    positions.reset("a", 9)
    positions.take("a", 10, 5)
    positions.reset("a", 9)  # its buffered events were given back (a hand-over)
    positions.take("a", 10, 2)
    assert positions.send("a", 2) == 11
    positions.forget("a")
    assert positions.sent == {}
